//! The trace matrix as a Matrix Market coordinate file (through `sprs`), for other solvers and
//! for inspection ([`crate::Solver::keep_operator`] keeps it).
use std::path::Path;

use hdg_core::{CoreError, HostCsr};

/// A host CSR matrix as an `sprs` matrix (for its Matrix Market writer and CSR products).
pub fn to_sprs(csr: HostCsr) -> sprs::CsMat<f64> {
    sprs::CsMat::new((csr.n, csr.n_cols), csr.indptr, csr.indices, csr.values)
}

/// Writes a host CSR matrix as a Matrix Market coordinate file.
///
/// # Errors
/// [`CoreError::InvalidParameter`] for a file name that does not end in `.mtx` (or `.mm`);
/// [`CoreError::Io`] when the file cannot be written.
pub fn write(csr: &HostCsr, path: &Path) -> Result<(), CoreError> {
    check_path(path)?;
    sprs::io::write_matrix_market(path, &to_sprs(csr.clone())).map_err(CoreError::from)
}

/// Refuses a file name that does not end in `.mtx` or `.mm` (any case), before any work is
/// done.
///
/// # Errors
/// [`CoreError::InvalidParameter`] naming the file.
pub fn check_path(path: &Path) -> Result<(), CoreError> {
    if crate::has_extension(path, &["mtx", "mm"]) {
        return Ok(());
    }
    Err(CoreError::InvalidParameter {
        name: "matrix file",
        reason: format!(
            "{}: the matrix is written in Matrix Market form; use a .mtx file name",
            path.display()
        ),
    })
}
