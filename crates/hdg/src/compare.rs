//! Every solver of the suite on one assembled trace system, in one run: what `hdg solvers`
//! prints ([`Solver::compare_solvers`]).
use std::time::Instant;

use hdg_core::{CoreError, Discretization, Progress, Stage, VectorOps};
use hdg_linalg::{SolverBackend, SolverChoice, SolverSettings};
use serde::Serialize;

use crate::{Backend, Error, Solver};

/// One solver's row of a comparison.
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

/// What [`Solver::compare_solvers`] measured.
#[derive(Clone, Debug)]
pub struct Comparison {
    /// Trace unknowns of the system.
    pub trace_dofs: usize,
    /// One row per solver, in the order asked.
    pub rows: Vec<SolverRow>,
}

impl Solver {
    /// Condenses and assembles once (in f64, on this solver's backend), then runs every solver
    /// in `choices` from x = 0 with this solver's tolerance and iteration cap, and recovers
    /// the errors with each solution. A solver that fails gets a row saying why. `progress`
    /// hears of the stages; each row, once done, is also given to `row_done`.
    ///
    /// # Errors
    /// [`Error::Core`] for a problem without an exact solution, bad input or a backend
    /// failure before the first solver runs.
    pub fn compare_solvers(
        &self,
        choices: &[SolverChoice],
        progress: &mut dyn Progress,
        row_done: &mut dyn FnMut(&SolverRow),
    ) -> Result<Comparison, Error> {
        match self.backend_choice() {
            Backend::Cpu => {
                self.compare_on(&hdg_backend_cpu::CpuBackend::new(), choices, progress, row_done)
            }
            #[cfg(feature = "cuda")]
            Backend::Cuda => {
                let cuda = hdg_backend_cuda::CudaBackend::new()?
                    .with_settings(self.cuda_settings_choice().clone())?;
                self.compare_on(&cuda, choices, progress, row_done)
            }
            #[cfg(not(feature = "cuda"))]
            Backend::Cuda => Err(hdg_backend_cuda::availability().unwrap_err().into()),
        }
    }

    fn compare_on<B: SolverBackend>(
        &self,
        backend: &B,
        choices: &[SolverChoice],
        progress: &mut dyn Progress,
        row_done: &mut dyn FnMut(&SolverRow),
    ) -> Result<Comparison, Error> {
        let problem = self.problem();
        let exact = problem.exact.as_ref().ok_or_else(|| CoreError::InvalidParameter {
            name: "problem",
            reason: "the comparison needs an exact solution".into(),
        })?;
        progress.started(Stage::Setup);
        let started = Instant::now();
        let disc = Discretization::<f64>::new(self.mesh(), problem, self.order_choice())?;
        let prep = backend.prepare(&disc)?;
        progress.finished(Stage::Setup, started.elapsed().as_secs_f64());
        progress.started(Stage::Condense);
        let started = Instant::now();
        let condensed = backend.condense(&disc, &prep)?;
        progress.finished(Stage::Condense, started.elapsed().as_secs_f64());
        progress.started(Stage::Assemble);
        let started = Instant::now();
        let (operator, rhs) = backend.assemble(&disc, &prep, &condensed)?;
        progress.finished(Stage::Assemble, started.elapsed().as_secs_f64());
        let mut rows = Vec::new();
        for &choice in choices {
            let settings = SolverSettings { choice, ..*self.solver_choice() };
            let mut x = VectorOps::<f64>::zeros(backend, disc.trace_dofs())?;
            let started = Instant::now();
            let outcome = settings
                .trace_solver::<f64, B>()
                .and_then(|solver| solver.solve(backend, &disc, &operator, &rhs, &mut x));
            let seconds = started.elapsed().as_secs_f64();
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
            row_done(&row);
            rows.push(row);
        }
        Ok(Comparison { trace_dofs: disc.trace_dofs(), rows })
    }
}
