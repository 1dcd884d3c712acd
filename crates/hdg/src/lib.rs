//! Hybridizable discontinuous Galerkin (LDG-H) for `-div(kappa grad u) + c u = f` on triangles
//! and tetrahedra, at high order, on the CPU or (feature `cuda`) an NVIDIA GPU: the whole
//! library behind one dependency.
//!
//! A solve is three values: a [`Mesh`] (generated, read from a Gmsh file, or made from
//! arrays), a [`Problem`] ([`Problem::builder`]: coefficients, source, boundary conditions per
//! boundary tag, optionally the exact solution), and a [`Solver`] (order, backend, precision,
//! trace solver, trace operator, device settings). [`Solver::solve`] returns a [`Solution`]
//! that owns u_h, q_h, the postprocessed u*, the trace on every face and the run's report, and
//! answers point evaluations, cell and face walks and error norms. An iterative solve that
//! stops short of its tolerance is [`Error::NotConverged`], which still carries the solution
//! it reached. [`Solver::run`] is the whole run as a program reports it ([`Run`]: the report,
//! the solution, the trace matrix, device and host memory), whether or not it converged.
//!
//! [`functionals`]: integrals of u_h or u* over the domain or a region, the flux through
//! boundary faces, the least and greatest values.
//!
//! The outputs: [`vtu`] (the solution for ParaView), [`png`] (a picture of a 2D solution),
//! [`json`] (the run's report as the `hdg` program prints it) and [`matrix_market`] (the
//! trace matrix); for a run over MPI ranks (feature `distributed`), `distributed::output`
//! (a `.pvtu` with one piece per rank, point evaluation on the owning rank).
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
//! let value = solution.evaluate(&[0.3, 0.7])?.expect("inside the mesh");
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
//! A program needs none of them to solve: everything a run takes is a [`Solver`] option.
mod compare;
#[cfg(feature = "distributed")]
pub mod distributed;
pub mod functionals;
pub mod json;
pub mod matrix_market;
pub mod png;
mod solver;
mod start;
pub mod vtu;

pub use hdg_backend_cpu as cpu;
pub use hdg_backend_cuda as cuda;
pub use hdg_core as core;
pub use hdg_linalg as linalg;
pub use hdg_mesh as mesh;

pub use compare::{Comparison, SolverRow};
pub use functionals::{boundary_flux, extrema, integral, integral_over, region_integral};
pub use hdg_backend_cuda::CudaSettings;
pub use hdg_core::{
    BoundaryCondition, CellView, Coefficient, CoreError, ErrorNorms, ExactSolution, FaceView,
    HostCsr, Manufactured, PipelineReport, PointValue, Precision, Problem, ProblemBuilder,
    Progress, Silent, Solution, Stage, Tau, TraceOperatorKind,
};
pub use hdg_linalg::{
    check_tolerance, default_tolerance, SolverChoice, SolverSettings, DEFAULT_MAX_ITERATIONS,
};
pub use hdg_mesh::{generate, gmsh, CellType, Mesh};
pub use solver::{
    host_peak_rss_bytes, host_threads, DeviceMemory, Run, Solver, MEMORY_SAMPLE_INTERVAL,
};
pub use start::{BackendStart, StartedBackend};

use std::fmt;
use std::str::FromStr;

/// Where the pipeline runs. In settings files it is named as [`Backend::name`] says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// Rayon threads on the host.
    #[default]
    Cpu,
    /// An NVIDIA GPU (the crate built with feature `cuda`).
    Cuda,
}

impl Backend {
    /// Both backends.
    pub const ALL: [Backend; 2] = [Backend::Cpu, Backend::Cuda];

    /// The name in reports, settings and on command lines: "cpu", "cuda".
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Cuda => "cuda",
        }
    }

    /// The highest polynomial order the backend runs.
    pub fn max_order(self) -> usize {
        match self {
            Backend::Cpu => hdg_core::MAX_ORDER,
            Backend::Cuda => hdg_backend_cuda::MAX_ELEMENT_ORDER,
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = String;
    /// A backend by its name ([`Backend::name`]).
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| format!("unknown backend '{s}' (known: cpu, cuda)"))
    }
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

impl Error {
    /// The error as the library's core error (a file that could not be written becomes
    /// [`CoreError::Io`], a solve that did not converge [`CoreError::Solver`]), for programs
    /// that report every failure one way.
    pub fn into_core(self) -> CoreError {
        match self {
            Error::Core(e) => e,
            Error::NotConverged(_) => CoreError::Solver(self.to_string()),
            Error::Output { .. } => CoreError::Io(self.to_string()),
        }
    }
}

/// Whether `path`'s extension is one of `extensions` (lower case, without the dot), in any
/// case: how every writer of the library and the program checks a file name against its format.
pub fn has_extension(path: &std::path::Path, extensions: &[&str]) -> bool {
    let extension = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    extension.is_some_and(|e| extensions.contains(&e.as_str()))
}

#[cfg(test)]
mod tests {
    use super::Backend;

    #[test]
    fn backend_names_round_trip() {
        for backend in Backend::ALL {
            assert_eq!(backend.name().parse::<Backend>(), Ok(backend));
            assert_eq!(backend.to_string(), backend.name());
        }
        assert_eq!(Backend::default(), Backend::Cpu);
        assert!("tpu".parse::<Backend>().unwrap_err().contains("cpu, cuda"));
    }
}
