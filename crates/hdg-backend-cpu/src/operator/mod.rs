//! The trace operator the CPU backend's assembly builds: the DBF matrix ([`dbf`]), with its
//! products, its multigrid hooks and its bfloat16 smoothing copy.
pub mod dbf;

pub use dbf::{Bf16, DbfMatrix, Entry};
