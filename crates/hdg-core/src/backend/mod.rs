//! The backend contract: what a backend provides to run the HDG pipeline, in layers.
//!
//! | layer | traits | what it serves |
//! | --- | --- | --- |
//! | vectors | [`VectorOps`], [`FusedOps`] (defaults only) | every Krylov solver |
//! | element stages | [`LocalSolver`], [`Assembler`], [`Postprocessor`], [`Backend`] | the pipeline (`crate::pipeline::solve`) |
//! | trace operator | [`TraceOperator`] | every Krylov solver |
//! | blocks | [`BlockOps`] | block Jacobi, the multigrid's smoother |
//! | halo | [`HaloOps`] | the distributed pipeline's exchanges between processes |
//! | two precisions | [`MixedPrecisionOps`], [`DemoteOperator`] | mixed-precision refinement, the f32 V-cycle in f64 |
//! | multigrid | [`MultigridOps`], [`MultigridOperator`] | the auxiliary-space multigrid |
//!
//! Each stage follows the formulation (`docs/formulation.md`, section 'The stages of a solve').
//! Every backend-resident object is an associated type, so a GPU backend keeps geometry,
//! condensed element data, the trace operator and the Krylov vectors on the device between
//! stages; host round trips happen only where a method says `to_host`. Host-side setup
//! (reference tables, the trace topology, Dirichlet data) is built once in
//! [`crate::Discretization`] and handed to every backend. The solvers' own traits
//! ([`crate::solver`]) are implemented by `hdg-linalg`, not by backends.
mod multigrid;
mod operator;
mod stages;
mod vector;

pub use multigrid::{Coarsening, MultigridOperator, MultigridOps, SmoothingCopy, SplitLevel};
pub use operator::{DemoteOperator, TraceOperator, TraceOperatorKind};
pub use stages::{Assembler, ErrorNorms, HostCondensed, HostFields, LocalSolver, Postprocessor};
pub use vector::{
    check_lengths, whole_blocks, BlockOps, FusedOps, HaloOps, MixedPrecisionOps, RecurrenceStep,
    VectorOps,
};

use crate::real::Real;

/// A backend: all stages, and the vector operations the solvers of `hdg-linalg` use.
pub trait Backend<T: Real>: Assembler<T> + Postprocessor<T> + FusedOps<T> {
    /// Short name ("cpu", "cuda").
    fn name(&self) -> &'static str;
    /// One line about the hardware it runs on (the default: the name).
    fn describe(&self) -> String {
        self.name().to_string()
    }
}
