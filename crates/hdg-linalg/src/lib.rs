//! Krylov solvers, preconditioners and spectrum estimates for the HDG trace system, written once
//! over [`hdg_core::VectorOps`] and [`hdg_core::TraceOperator`]: the same code runs on host
//! vectors and on device vectors.
mod cg;
pub mod precond;

pub use cg::{
    run_cg, CgSettings, CgStep, ConjugateGradient, Flow, PreconditionedCg, Preconditioning,
};
pub use precond::{BlockJacobi, Identity, Jacobi};
