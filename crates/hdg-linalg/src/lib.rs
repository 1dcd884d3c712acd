//! Krylov solvers, preconditioners and spectrum estimates for the HDG trace system, written once
//! over [`hdg_core::VectorOps`] and [`hdg_core::TraceOperator`]: the same code runs on host
//! vectors and on device vectors.
mod cg;
pub mod precond;

pub use cg::{
    check_tolerance, run_cg, solve_cg, CgSettings, CgStep, ConjugateGradient, Flow,
    PreconditionedCg, Preconditioning,
};
pub use precond::{BlockJacobi, Identity, Jacobi, ProjectOut, SinglePrecision};
mod direct;
mod gmres;
mod mixed;
mod pipelined;
pub use direct::{DirectCholesky, HostSystem, WholeOperator};
pub use gmres::Gmres;
pub use mixed::{refine, MixedPrecisionRefinement};
pub use pipelined::PipelinedCg;
mod chebyshev;
mod hybrid;
mod spectrum;
pub use chebyshev::{
    run_chebyshev, theoretical_iterations, Chebyshev, ChebyshevPreconditioner, ChebyshevSolver,
};
pub use hybrid::CgThenChebyshev;
pub use spectrum::{
    gershgorin_estimate, lanczos_estimate, lanczos_from_cg, power_iteration,
    symmetric_tridiagonal_eigenvalues, SpectrumEstimate,
};
pub mod multigrid;
pub use multigrid::{Cycle, Multigrid, MultigridSettings};
mod stopping;
mod suite;
pub use stopping::StoppingRule;
pub use suite::{MultigridPrecision, SolverChoice, Suite};
mod dispatch;
#[cfg(feature = "distributed")]
mod distributed;
pub use dispatch::{
    default_tolerance, SolverBackend, SolverPrecision, SolverSettings, DEFAULT_MAX_ITERATIONS,
};
