//! Core of the HDG library: precision and backend traits, reference elements, the problem
//! description, and the pipeline that every backend runs.
//!
//! The pipeline, stage by stage, and where each lives:
//!
//! | stage | here | implemented by a backend through |
//! | --- | --- | --- |
//! | mesh | `hdg-mesh` | |
//! | reference element | [`reference`](mod@reference), [`tables`] | |
//! | setup (geometry, topology, Dirichlet data, Neumann and Robin terms, coefficients at quadrature points) | [`geometry`], [`topology`], [`discretization`], [`boundary`], [`coefficients`] | [`LocalSolver::prepare`] |
//! | local solve (static condensation) | | [`LocalSolver::condense`] |
//! | assembly | [`topology`] (structure) | [`Assembler`] |
//! | trace solve | [`TraceOperator`], [`KrylovSolver`] (`hdg-linalg`) | [`VectorOps`], [`FusedOps`], [`BlockOps`] |
//! | recovery | | [`LocalSolver::recover`] |
//! | postprocess, errors | | [`Postprocessor`] |
//!
//! The method and its signs are those of `docs/formulation.md` (LDG-H, q = -kappa grad u;
//! sections 'The problem' and 'The local problem').
//! Around the stages: [`resources`] estimates memory before allocating, [`user_code`] runs the
//! problem's closures so that a panic or a value that is not finite becomes an error naming
//! them.
pub mod auxiliary;
pub mod backend;
pub mod boundary;
pub mod coefficients;
pub mod constant_operator;
pub mod csr;
pub mod dbf;
pub mod diagnostics;
pub mod discretization;
#[cfg(feature = "distributed")]
pub mod distributed;
pub mod error;
pub mod error_norms;
pub mod geometry;
pub mod lanes;
pub mod load;
pub mod manufactured;
pub mod pipeline;
pub mod problem;
pub mod real;
pub mod reference;
pub mod resources;
pub mod solution;
pub mod solver;
pub mod sparse_rows;
pub mod tables;
pub mod topology;
pub mod user_code;

pub use auxiliary::VertexSpace;
pub use backend::{
    check_lengths, whole_blocks, Assembler, Backend, BlockOps, Coarsening, DemoteOperator,
    ErrorNorms, FusedOps, HaloOps, HostCondensed, HostFields, LocalSolver, MixedPrecisionOps,
    MultigridOperator, MultigridOps, Postprocessor, RecurrenceStep, SmoothingCopy, SplitLevel,
    TraceOperator, TraceOperatorKind, VectorOps,
};
pub use csr::HostCsr;
pub use dbf::DbfEntries;
pub use discretization::{Discretization, MAX_ORDER, MIN_ORDER};
pub use error::{CoreError, Result};
pub use hdg_mesh::CellType;
pub use pipeline::{
    solve, PipelineOptions, PipelineOutput, PipelineReport, Progress, Silent, Stage, StageTimings,
};
pub use problem::{
    BoundaryCondition, Coefficient, ExactSolution, FaceField, Manufactured, ManufacturedSpec,
    Problem, ProblemBuilder, ScalarField, Source, Tau, TensorField, VectorField,
};
pub use real::{Precision, Real};
pub use reference::{ReferenceElement, ReferenceTetrahedron, ReferenceTriangle};
pub use solution::{CellView, FaceView, PointValue, Solution};
pub use solver::{
    Krylov, KrylovSolver, PlanWork, Preconditioner, SolveReport, SolverPlan, TraceSolver,
};
pub use tables::ElementTables;
pub use topology::{TraceTopology, NONE};
