//! Sparse matrices on the host in compressed sparse row form: what a trace operator exports
//! (for direct solvers and checks) and what the multigrid builds its coarse levels from before
//! they go to a backend.
use rayon::prelude::*;

use crate::error::{CoreError, Result};

/// A sparse matrix on the host in compressed sparse row form (values in f64): the export of a
/// trace operator (for direct solvers and checks), and the multigrid's matrices and transfers
/// before they go to a backend ([`crate::MultigridOps::upload_csr`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostCsr {
    /// Rows.
    pub n: usize,
    /// Columns (= `n` for the trace matrix and every operator; transfers are rectangular).
    pub n_cols: usize,
    /// Row pointers, n + 1 entries.
    pub indptr: Vec<usize>,
    /// Column of each entry, sorted within each row.
    pub indices: Vec<usize>,
    /// Value of each entry.
    pub values: Vec<f64>,
}

impl HostCsr {
    /// Checks what a backend relies on when it uploads the matrix: n + 1 row pointers from 0
    /// to nnz, non-decreasing, column indices below `n_cols` (and below 2^32), as many values
    /// as indices.
    pub fn check_structure(&self) -> Result<()> {
        let bad =
            |reason: String| Err(CoreError::InvalidParameter { name: "sparse matrix", reason });
        if self.indptr.len() != self.n + 1 || self.indptr[0] != 0 {
            return bad(format!("{} row pointers for {} rows", self.indptr.len(), self.n));
        }
        if self.indptr.windows(2).any(|w| w[0] > w[1]) || self.indptr[self.n] != self.indices.len()
        {
            return bad("row pointers are not a non-decreasing sequence ending at nnz".into());
        }
        if self.values.len() != self.indices.len() {
            return bad(format!("{} values for {} indices", self.values.len(), self.indices.len()));
        }
        if self.n_cols > u32::MAX as usize || self.indices.par_iter().any(|&c| c >= self.n_cols) {
            return bad(format!("a column index is not below {} columns", self.n_cols));
        }
        Ok(())
    }
}
