//! The CPU backend: every stage of the HDG pipeline as batched kernels over Rayon.
//!
//! Laid out as the CUDA backend is: the stages in [`stages`] (prepare, condense, assemble,
//! recover, postprocess, weighted), the trace operator in [`operator`] (the DBF matrix), the
//! vector operations in `vector` (level 1, fusions, precisions, blocks), the multigrid's
//! operations in [`multigrid`] and the constant operators in [`constant_operator`]; [`dense`]
//! holds the small dense kernels the element stages share.
pub mod constant_operator;
pub mod dense;
pub mod multigrid;
pub mod operator;
pub mod stages;
mod vector;

pub use operator::dbf::{Bf16, DbfMatrix, Entry};
pub use stages::prepare::CpuPrepared;

/// The CPU backend. Runs on Rayon's global pool (set `RAYON_NUM_THREADS` to choose the threads).
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuBackend;

impl CpuBackend {
    /// A CPU backend.
    pub fn new() -> Self {
        CpuBackend
    }
}
