//! Hybridizable discontinuous Galerkin (LDG-H) for `-div(kappa grad u) + c u = f` on triangles
//! and tetrahedra, at high order, on the CPU or (feature `cuda`) an NVIDIA GPU: the whole
//! library behind one dependency.
//!
//! A solve is three values: a [`Mesh`] (generated, read from a Gmsh file, or made from
//! arrays), a [`Problem`] ([`Problem::builder`]: coefficients, source, boundary conditions per
//! boundary tag, optionally the exact solution), and a [`Solver`] (order, backend, precision,
//! trace solver). [`Solver::solve`] returns a [`Solution`] that owns u_h, q_h, the
//! postprocessed u*, the trace on every face and the run's report, and answers point
//! evaluations, cell and face walks and error norms; [`vtu::write`] saves it for ParaView.
//! An iterative solve that stops short of its tolerance is [`Error::NotConverged`], which
//! still carries the solution it reached.
//!
//! # Embedding
//!
//! The unit square from arrays, split into 2 n^2 triangles; u = exp(x) sin(y), with a Neumann
//! condition on the right side (tag 2) and Dirichlet data on the rest (tag 1):
//!
//! ```
//! use hdg::{Backend, CellType, Mesh, Problem, Solver};
//!
//! // Vertices and cells of a structured triangulation, as a mesh generator would give them.
//! let n = 8;
//! let mut vertices = Vec::new();
//! for j in 0..=n {
//!     for i in 0..=n {
//!         vertices.extend([i as f64 / n as f64, j as f64 / n as f64]);
//!     }
//! }
//! let mut cells = Vec::new();
//! for j in 0..n {
//!     for i in 0..n {
//!         let v = j * (n + 1) + i;
//!         cells.extend([v, v + 1, v + n + 2, v, v + n + 2, v + n + 1]);
//!     }
//! }
//! // Boundary tags from each boundary face's centroid: 2 on x = 1, 1 elsewhere.
//! let mesh = Mesh::new(CellType::Triangle, vertices, cells, |x| if x[0] > 1.0 - 1e-12 { 2 } else { 1 })?;
//!
//! // -lap u = 0 for u = exp(x) sin(y); on x = 1 the flux grad u . n = du/dx = u.
//! let u = |x: &[f64]| x[0].exp() * x[1].sin();
//! let problem = Problem::builder()
//!     .source(|_| 0.0)
//!     .dirichlet(u)
//!     .neumann(2, move |x, n| u(x) * n[0] + x[0].exp() * x[1].cos() * n[1])
//!     .exact(u)
//!     .build();
//!
//! // Solve at order 3 on the CPU (Backend::Cuda with the `cuda` feature and a GPU).
//! let solution = Solver::new(mesh, problem).order(3).backend(Backend::Cpu).solve()?;
//!
//! // The errors against the exact solution: k + 1 = 4 for u_h, k + 2 = 5 for u*.
//! let errors = solution.report().errors.expect("the problem has an exact solution");
//! assert!(errors.u < 1e-5 && errors.u_star < 1e-6, "{errors:?}");
//!
//! // Evaluate anywhere: the cell is found by a point locator.
//! let value = solution.evaluate(&[0.3, 0.7]).expect("inside the mesh");
//! assert!((value.u_star - u(&[0.3, 0.7])).abs() < 1e-6);
//! // Many points at once (in parallel); points outside the mesh give None.
//! let values = solution.evaluate_many(&[0.1, 0.1, 0.9, 0.5, 2.0, 0.0])?;
//! assert!(values[2].is_none());
//!
//! // Error norms against any function, here the same u.
//! let again = solution.errors_against(u)?;
//! assert!((again.u - errors.u).abs() <= 1e-12 * errors.u);
//!
//! // The solution for ParaView.
//! let file = std::env::temp_dir().join(format!("hdg-doc-{}.vtu", std::process::id()));
//! hdg::vtu::write(&solution, &file, &hdg::vtu::Options::default())?;
//! # std::fs::remove_file(&file).ok();
//! # Ok::<(), hdg::Error>(())
//! ```
//!
//! # Crates
//!
//! The facade re-exports the workspace's crates for what it does not wrap: [`core`]
//! (`hdg-core`: the pipeline, the problem, reference elements, backend traits), [`mesh`]
//! (`hdg-mesh`: meshes, generators, the Gmsh reader, the point locator), [`linalg`]
//! (`hdg-linalg`: the Krylov solvers and preconditioners), [`cpu`] and [`cuda`] (the backends).
pub mod vtu;

use std::sync::Arc;

pub use hdg_backend_cpu as cpu;
pub use hdg_backend_cuda as cuda;
pub use hdg_core as core;
pub use hdg_linalg as linalg;
pub use hdg_mesh as mesh;

pub use hdg_core::{
    BoundaryCondition, CellView, Coefficient, CoreError, ErrorNorms, ExactSolution, FaceView,
    Manufactured, PipelineReport, PointValue, Precision, Problem, ProblemBuilder, Progress, Silent,
    Solution, Stage, Tau,
};
pub use hdg_linalg::SolverChoice;
pub use hdg_mesh::{generate, gmsh, CellType, Mesh};

use hdg_core::{Backend as BackendTrait, MultigridOps, PipelineOptions, Real};
use hdg_linalg::{MixedPrecisionRefinement, Suite};

/// Where the pipeline runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Backend {
    /// Rayon threads on the host.
    #[default]
    Cpu,
    /// An NVIDIA GPU (the crate built with feature `cuda`).
    Cuda,
}

/// What can go wrong in a solve.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input, a backend failure, memory, ... ([`CoreError`]).
    #[error(transparent)]
    Core(#[from] CoreError),
    /// The iterative trace solve stopped at its iteration cap above the tolerance. The
    /// solution it reached is here: its report says how far it got.
    #[error(
        "the trace solve did not converge: relative residual {:.3e} after {} iterations",
        .0.report().solve.relative_residual,
        .0.report().solve.iterations
    )]
    NotConverged(Box<Solution>),
    /// A file could not be written.
    #[error("cannot write {path}: {reason}")]
    Output {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        reason: String,
    },
}

impl From<hdg_mesh::MeshError> for Error {
    fn from(e: hdg_mesh::MeshError) -> Error {
        Error::Core(CoreError::Mesh(e))
    }
}

/// A solve, set up step by step: `Solver::new(mesh, problem).order(3).solve()`.
///
/// Defaults: order 2, the CPU backend, f64, CG with the multigrid preconditioner
/// ([`SolverChoice::PcgMg`]), relative residual tolerance 1e-10 (1e-5 in f32), at most
/// 10 000 iterations.
#[derive(Clone, Debug)]
#[must_use]
pub struct Solver {
    mesh: Arc<Mesh>,
    problem: Problem,
    order: usize,
    backend: Backend,
    precision: Precision,
    solver: SolverChoice,
    tolerance: Option<f64>,
    max_iterations: usize,
}

impl Solver {
    /// A solve of `problem` on `mesh` with the defaults above.
    pub fn new(mesh: impl Into<Arc<Mesh>>, problem: Problem) -> Solver {
        Solver {
            mesh: mesh.into(),
            problem,
            order: 2,
            backend: Backend::Cpu,
            precision: Precision::F64,
            solver: SolverChoice::PcgMg,
            tolerance: None,
            max_iterations: 10_000,
        }
    }

    /// Polynomial order k (1 to 10 on the CPU, 1 to 8 on CUDA).
    pub fn order(mut self, order: usize) -> Solver {
        self.order = order;
        self
    }

    /// The backend.
    pub fn backend(mut self, backend: Backend) -> Solver {
        self.backend = backend;
        self
    }

    /// The working precision of every stage.
    pub fn precision(mut self, precision: Precision) -> Solver {
        self.precision = precision;
        self
    }

    /// The trace solver.
    pub fn solver(mut self, solver: SolverChoice) -> Solver {
        self.solver = solver;
        self
    }

    /// The relative residual at which the iterative trace solve stops.
    pub fn tolerance(mut self, tolerance: f64) -> Solver {
        self.tolerance = Some(tolerance);
        self
    }

    /// The iteration cap of the trace solve.
    pub fn max_iterations(mut self, max_iterations: usize) -> Solver {
        self.max_iterations = max_iterations;
        self
    }

    /// Runs the pipeline.
    ///
    /// # Errors
    /// [`Error::Core`] for bad input (each names what is wrong and where) or a backend
    /// failure; [`Error::NotConverged`], carrying the solution, when the trace solve stops
    /// above its tolerance.
    pub fn solve(&self) -> Result<Solution, Error> {
        self.solve_with_progress(&mut Silent)
    }

    /// [`Self::solve`], reporting each stage's start and end to `progress`.
    ///
    /// # Errors
    /// As [`Self::solve`].
    pub fn solve_with_progress(&self, progress: &mut dyn Progress) -> Result<Solution, Error> {
        let solution = match self.backend {
            Backend::Cpu => self.run_on(&hdg_backend_cpu::CpuBackend::new(), progress)?,
            #[cfg(feature = "cuda")]
            Backend::Cuda => self.run_on(&hdg_backend_cuda::CudaBackend::new()?, progress)?,
            #[cfg(not(feature = "cuda"))]
            Backend::Cuda => {
                hdg_backend_cuda::availability()?;
                unreachable!("availability() is an error without the cuda feature")
            }
        };
        if solution.report().solve.converged {
            Ok(solution)
        } else {
            Err(Error::NotConverged(Box::new(solution)))
        }
    }

    fn run_on<B>(&self, backend: &B, progress: &mut dyn Progress) -> Result<Solution, Error>
    where
        B: BackendTrait<f64>
            + BackendTrait<f32>
            + hdg_core::MixedPrecisionOps
            + MultigridOps<f64>
            + MultigridOps<f32>,
        <B as hdg_core::Assembler<f64>>::Operator: hdg_core::DemoteOperator<B>,
    {
        let tolerance = self.tolerance.unwrap_or(match self.precision {
            Precision::F64 => 1e-10,
            Precision::F32 => 1e-5,
        });
        let suite = Suite { choice: self.solver, tolerance, max_iterations: self.max_iterations };
        match (self.precision, self.solver) {
            (Precision::F64, SolverChoice::Mixed) => {
                let mixed = MixedPrecisionRefinement { tolerance, ..Default::default() };
                self.pipeline::<f64, B>(backend, &mixed, progress)
            }
            (Precision::F32, SolverChoice::Mixed) => Err(CoreError::InvalidParameter {
                name: "solver",
                reason: "mixed precision refines an f64 solution: use Precision::F64".into(),
            }
            .into()),
            (Precision::F64, _) => self.pipeline::<f64, B>(backend, &suite, progress),
            (Precision::F32, _) => self.pipeline::<f32, B>(backend, &suite, progress),
        }
    }

    fn pipeline<T: Real, B: BackendTrait<T>>(
        &self,
        backend: &B,
        solver: &dyn hdg_core::TraceSolver<T, B>,
        progress: &mut dyn Progress,
    ) -> Result<Solution, Error> {
        let options = PipelineOptions { full_trace: true, ..Default::default() };
        let out = hdg_core::solve::<T, B>(
            backend,
            &self.mesh,
            &self.problem,
            self.order,
            solver,
            options,
            progress,
        )?;
        let solution =
            Solution::from_output(backend, self.mesh.clone(), self.problem.clone(), &out)?;
        Ok(solution.expect("the pipeline was asked for the full trace"))
    }
}
