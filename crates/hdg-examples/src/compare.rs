//! `hdg solvers`: every solver of the suite on one assembled trace system, in one run.
use std::time::Instant;

use hdg_backend_cpu::CpuBackend;
use hdg_core::{
    Assembler, CoreError, Discretization, LocalSolver, Postprocessor, Problem, SolveReport,
    TraceSolver,
};
use hdg_linalg::{SolverChoice, Suite};
use hdg_mesh::Mesh;
use serde::Serialize;

/// One solver's row of the comparison.
#[derive(Clone, Debug, Serialize)]
pub struct SolverRow {
    /// Solver name.
    pub solver: String,
    /// Whether it met the tolerance.
    pub converged: bool,
    /// Iterations.
    pub iterations: usize,
    /// Global reductions.
    pub reductions: usize,
    /// Operator applications (both precisions for mixed).
    pub operator_applications: usize,
    /// Wall-clock seconds of the solve, bound estimates and preconditioner set-up included.
    pub seconds: f64,
    /// Final true relative residual.
    pub relative_residual: f64,
    /// L2 error of u_h after recovery with this solution.
    pub error_u: f64,
    /// L2 error of u*.
    pub error_u_star: f64,
    /// What the solver reported besides (bounds used, factor size, ...), or its error.
    pub notes: Vec<String>,
}

/// Condenses and assembles once, then runs every solver in `choices` from x = 0 and recovers
/// the errors with each solution. A solver that fails gets a row saying why.
pub fn compare(
    mesh: &Mesh,
    problem: &Problem,
    order: usize,
    tolerance: f64,
    max_iterations: usize,
    choices: &[SolverChoice],
    mut log: impl FnMut(&str),
) -> Result<(usize, Vec<SolverRow>), CoreError> {
    let backend = CpuBackend::new();
    let disc = Discretization::<f64>::new(mesh, problem, order)?;
    let prep = backend.prepare(&disc)?;
    let condensed = backend.condense(&disc, &prep)?;
    let (operator, rhs) = backend.assemble(&disc, &prep, &condensed)?;
    let exact = problem.exact.as_ref().ok_or_else(|| CoreError::InvalidParameter {
        name: "problem",
        reason: "the comparison needs an exact solution".into(),
    })?;
    let mut rows = Vec::new();
    for &choice in choices {
        let suite = Suite { choice, tolerance, max_iterations };
        let mixed = hdg_linalg::MixedPrecisionRefinement {
            tolerance,
            ..hdg_linalg::MixedPrecisionRefinement::default()
        };
        let solver: &dyn TraceSolver<f64, CpuBackend> =
            if choice == SolverChoice::Mixed { &mixed } else { &suite };
        let mut x = vec![0.0; disc.trace_dofs()];
        let start = Instant::now();
        let outcome: Result<SolveReport, CoreError> =
            solver.solve(&backend, &disc, &operator, &rhs, &mut x);
        let seconds = start.elapsed().as_secs_f64();
        let row = match outcome {
            Ok(report) => {
                let fields = backend.recover(&disc, &prep, &condensed, &x)?;
                let post = backend.postprocess(&disc, &prep, &fields)?;
                let errors = backend.error_norms(&disc, &prep, &fields, &post, exact)?;
                SolverRow {
                    solver: choice.name().into(),
                    converged: report.converged,
                    iterations: report.iterations,
                    reductions: report.reductions,
                    operator_applications: report.operator_applications,
                    seconds,
                    relative_residual: report.relative_residual,
                    error_u: errors.u,
                    error_u_star: errors.u_star,
                    notes: report.notes,
                }
            }
            Err(e) => SolverRow {
                solver: choice.name().into(),
                converged: false,
                iterations: 0,
                reductions: 0,
                operator_applications: 0,
                seconds,
                relative_residual: f64::NAN,
                error_u: f64::NAN,
                error_u_star: f64::NAN,
                notes: vec![format!("failed: {e}")],
            },
        };
        log(&format!(
            "{:<17} {:>6} iterations {:>8.2} s  residual {:.1e}",
            row.solver, row.iterations, row.seconds, row.relative_residual
        ));
        rows.push(row);
    }
    Ok((disc.trace_dofs(), rows))
}
