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
/// [`CoreError::Io`] when the file cannot be written.
pub fn write(csr: &HostCsr, path: &Path) -> Result<(), CoreError> {
    sprs::io::write_matrix_market(path, &to_sprs(csr.clone())).map_err(CoreError::from)
}
