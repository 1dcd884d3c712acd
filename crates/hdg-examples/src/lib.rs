//! The pieces of the `hdg` program that tests and benchmarks reuse: mesh specifications, the
//! problem catalogue, and one solve with a chosen backend and precision.
pub mod bench;

use std::path::Path;
use std::str::FromStr;

use hdg_backend_cpu::CpuBackend;
use hdg_core::{
    solve, Backend, CoreError, Krylov, Manufactured, PipelineOptions, PipelineOutput,
    PipelineReport, Problem, Progress, Real,
};
use hdg_linalg::{ConjugateGradient, Preconditioning};
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

/// The Krylov method of the trace solve.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SolverKind {
    /// Conjugate gradients.
    Cg,
    /// Jacobi-preconditioned conjugate gradients.
    PcgJacobi,
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
    /// Krylov method.
    pub solver: SolverKind,
}

/// Runs the pipeline on the CPU backend in precision `T`; with `export_matrix`, also writes
/// the assembled trace matrix (Dirichlet unknowns eliminated) as a Matrix Market file.
pub fn solve_cpu<T: Real>(
    mesh: &Mesh,
    problem: &Problem,
    settings: &SolveSettings,
    export_matrix: Option<&Path>,
    progress: &mut dyn Progress,
) -> Result<PipelineReport, CoreError> {
    let options = PipelineOptions { keep_operator: export_matrix.is_some() };
    let output = run::<T, _>(&CpuBackend::new(), mesh, problem, settings, options, progress)?;
    if let (Some(path), Some((matrix, _))) = (export_matrix, &output.operator) {
        matrix.write_matrix_market(path)?;
    }
    Ok(output.report)
}

/// Runs the pipeline on any backend.
pub fn run<T: Real, B: Backend<T>>(
    backend: &B,
    mesh: &Mesh,
    problem: &Problem,
    settings: &SolveSettings,
    options: PipelineOptions,
    progress: &mut dyn Progress,
) -> Result<PipelineOutput<T, B>, CoreError> {
    let preconditioning = match settings.solver {
        SolverKind::Cg => Preconditioning::None,
        SolverKind::PcgJacobi => Preconditioning::Jacobi,
    };
    let cg = ConjugateGradient::new(settings.tolerance, settings.max_iterations, preconditioning);
    solve::<T, B>(backend, mesh, problem, settings.order, &Krylov(&cg), options, progress)
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
