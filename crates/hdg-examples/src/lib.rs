//! The pieces of the `hdg` program that tests and benchmarks reuse: mesh specifications, the
//! problem catalogue, and one solve with a chosen backend and precision.
pub mod bench;
pub mod compare;

use std::path::Path;
use std::str::FromStr;

use hdg_backend_cpu::CpuBackend;
use hdg_core::{
    solve, Assembler, Backend, CoreError, DemoteOperator, HostCsr, Krylov, Manufactured,
    MixedPrecisionOps, PipelineOptions, PipelineOutput, PipelineReport, Problem, Progress, Real,
    TraceOperator,
};
use hdg_linalg::{MixedPrecisionRefinement, SolverChoice, Suite};
use hdg_mesh::{generate, Diagonal, Mesh};

/// A mesh given on the command line: `square:N` is the unit square cut into N x N squares,
/// each split into two triangles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MeshSpec {
    /// Squares per side.
    pub n: usize,
}

impl FromStr for MeshSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, size) =
            s.split_once(':').ok_or_else(|| format!("mesh '{s}' is not of the form square:N"))?;
        if kind != "square" {
            return Err(format!("unknown mesh kind '{kind}' (known: square)"));
        }
        let n: usize =
            size.parse().map_err(|_| format!("mesh size '{size}' is not a positive integer"))?;
        if n == 0 {
            return Err("mesh size N must be at least 1".into());
        }
        Ok(MeshSpec { n })
    }
}

impl MeshSpec {
    /// Builds the mesh, optionally perturbed.
    pub fn build(
        &self,
        diagonal: Diagonal,
        perturbation: f64,
        seed: u64,
    ) -> Result<Mesh, CoreError> {
        let mesh = generate::unit_square(self.n, diagonal)?;
        if perturbation > 0.0 {
            Ok(generate::perturb(&mesh, perturbation, seed)?)
        } else {
            Ok(mesh)
        }
    }
}

/// The manufactured problems the program knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ProblemKind {
    /// u = sin(pi x) sin(pi y)
    Sine,
    /// u = exp(x) sin(2 y)
    Expsin,
    /// a polynomial of degree K (reproduced exactly)
    Poly,
}

impl ProblemKind {
    /// The problem for order `order`.
    pub fn problem(self, order: usize) -> Problem {
        let solution = match self {
            ProblemKind::Sine => Manufactured::Sine,
            ProblemKind::Expsin => Manufactured::ExpSin,
            ProblemKind::Poly => Manufactured::Polynomial(order),
        };
        Problem::manufactured(solution, 1.0, 0.0)
    }
}

/// Floating-point precision of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Precision {
    /// Double precision.
    F64,
    /// Single precision.
    F32,
}

/// Parses a solver name of the suite (for clap).
pub fn parse_solver(name: &str) -> Result<SolverChoice, String> {
    SolverChoice::ALL.into_iter().find(|c| c.name() == name).ok_or_else(|| {
        let names: Vec<_> = SolverChoice::ALL.iter().map(|c| c.name()).collect();
        format!("unknown solver '{name}' (known: {})", names.join(", "))
    })
}

/// Everything one solve needs besides the mesh and the problem.
#[derive(Clone, Copy, Debug)]
pub struct SolveSettings {
    /// Polynomial order.
    pub order: usize,
    /// Relative residual tolerance.
    pub tolerance: f64,
    /// Iteration cap.
    pub max_iterations: usize,
    /// Trace solver.
    pub solver: SolverChoice,
}

impl SolveSettings {
    fn suite(&self) -> Suite {
        Suite {
            choice: self.solver,
            tolerance: self.tolerance,
            max_iterations: self.max_iterations,
        }
    }

    /// Mixed-precision refinement with this run's tolerance.
    pub fn mixed(&self) -> MixedPrecisionRefinement {
        MixedPrecisionRefinement {
            tolerance: self.tolerance,
            ..MixedPrecisionRefinement::default()
        }
    }
}

/// The backend a run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendKind {
    /// Rayon on the host.
    Cpu,
    /// CUDA (builds with `--features cuda`).
    Cuda,
}

/// Runs the pipeline on the chosen backend; with `export_matrix`, also writes the assembled
/// trace matrix (Dirichlet unknowns eliminated) as a Matrix Market file.
pub fn solve_on(
    backend: BackendKind,
    mesh: &Mesh,
    problem: &Problem,
    settings: &SolveSettings,
    precision: Precision,
    export_matrix: Option<&Path>,
    progress: &mut dyn Progress,
) -> Result<PipelineReport, CoreError> {
    match backend {
        BackendKind::Cpu => {
            run_all(&CpuBackend::new(), mesh, problem, settings, precision, export_matrix, progress)
        }
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => {
            let cuda = hdg_backend_cuda::CudaBackend::new()?;
            run_all(&cuda, mesh, problem, settings, precision, export_matrix, progress)
        }
        #[cfg(not(feature = "cuda"))]
        BackendKind::Cuda => Err(hdg_backend_cuda::availability().unwrap_err()),
    }
}

/// One backend, both precisions, every solver (mixed precision in f64 only).
fn run_all<B>(
    backend: &B,
    mesh: &Mesh,
    problem: &Problem,
    settings: &SolveSettings,
    precision: Precision,
    export_matrix: Option<&Path>,
    progress: &mut dyn Progress,
) -> Result<PipelineReport, CoreError>
where
    B: Backend<f64> + Backend<f32> + MixedPrecisionOps,
    <B as Assembler<f64>>::Operator: DemoteOperator<B>,
{
    let options = PipelineOptions { keep_operator: export_matrix.is_some() };
    let suite = settings.suite();
    let order = settings.order;
    fn finish<T: Real, B: Backend<T>>(
        out: PipelineOutput<T, B>,
        export_matrix: Option<&Path>,
    ) -> Result<PipelineReport, CoreError> {
        if let (Some(path), Some((matrix, _))) = (export_matrix, &out.operator) {
            write_matrix_market(&matrix.to_host_csr()?, path)?;
        }
        Ok(out.report)
    }
    match (precision, settings.solver) {
        (Precision::F64, SolverChoice::Mixed) => {
            let mixed = settings.mixed();
            finish(
                solve::<f64, B>(backend, mesh, problem, order, &mixed, options, progress)?,
                export_matrix,
            )
        }
        (Precision::F32, SolverChoice::Mixed) => Err(CoreError::InvalidParameter {
            name: "solver",
            reason: "mixed precision refines an f64 solution: use --precision f64".into(),
        }),
        (Precision::F64, _) => finish(
            solve::<f64, B>(backend, mesh, problem, order, &Krylov(&suite), options, progress)?,
            export_matrix,
        ),
        (Precision::F32, _) => finish(
            solve::<f32, B>(backend, mesh, problem, order, &Krylov(&suite), options, progress)?,
            export_matrix,
        ),
    }
}

/// Writes a host CSR matrix as a Matrix Market coordinate file.
pub fn write_matrix_market(csr: &HostCsr, path: &Path) -> Result<(), CoreError> {
    let matrix = sprs::CsMat::new(
        (csr.n, csr.n),
        csr.indptr.clone(),
        csr.indices.clone(),
        csr.values.clone(),
    );
    sprs::io::write_matrix_market(path, &matrix).map_err(CoreError::from)
}

/// The report as the stable JSON object of `hdg solve --json`.
pub fn report_json(report: &PipelineReport) -> serde_json::Value {
    let errors =
        report.errors.map(|e| serde_json::json!({ "u": e.u, "q": e.q, "u_star": e.u_star }));
    let t = &report.timings;
    serde_json::json!({
        "cells": report.cells,
        "trace_dofs": report.trace_dofs,
        "order": report.order,
        "backend": report.backend,
        "precision": report.precision,
        "solver": report.solver,
        "iterations": report.solve.iterations,
        "relative_residual": report.solve.relative_residual,
        "converged": report.solve.converged,
        "errors": errors,
        "timings_s": {
            "setup": t.setup,
            "condense": t.condense,
            "assemble": t.assemble,
            "solve": t.solve,
            "recover": t.recover,
            "postprocess": t.postprocess,
            "total": t.total,
        },
    })
}
