//! Krylov solvers for the HDG trace system, written once over [`hdg_core::VectorOps`]: the same
//! code runs on host vectors and on device vectors.
mod cg;

pub use cg::{ConjugateGradient, Preconditioning};
