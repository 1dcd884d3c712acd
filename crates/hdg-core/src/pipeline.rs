//! The pipeline, written once for every backend:
//! setup -> condense -> assemble -> trace solve -> recover -> postprocess (and error norms).
use std::time::Instant;

use hdg_mesh::Mesh;

use crate::backend::{Backend, ErrorNorms, VectorOps};
use crate::discretization::Discretization;
use crate::error::{CoreError, Result};
use crate::problem::Problem;
use crate::real::Real;
use crate::solver::{SolveReport, TraceSolver};

/// A stage of the pipeline, for progress reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Reference tables, topology, Dirichlet data, geometric factors.
    Setup,
    /// Batched static condensation.
    Condense,
    /// Assembly of the trace operator.
    Assemble,
    /// Krylov solve of the trace system.
    Solve,
    /// Recovery of u_h, q_h.
    Recover,
    /// Postprocessing to u* and error norms.
    Postprocess,
}

impl Stage {
    /// Lower-case name, as in the JSON report.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Setup => "setup",
            Stage::Condense => "condense",
            Stage::Assemble => "assemble",
            Stage::Solve => "solve",
            Stage::Recover => "recover",
            Stage::Postprocess => "postprocess",
        }
    }
}

/// Receives stage events: `started(stage)` then `finished(stage, seconds)`; and, through
/// [`Progress::iterations`], the trace solve's iterations.
pub trait Progress {
    /// A stage begins.
    fn started(&mut self, _stage: Stage) {}
    /// A stage ended after `seconds`.
    fn finished(&mut self, _stage: Stage, _seconds: f64) {}
    /// An observer of the trace solve's iterations, called with the iteration number and the
    /// solver's relative residual estimate after each ([`iteration`]); `None` (the default)
    /// for none. It is asked for when the solve stage starts and dropped when it ends.
    fn iterations(&mut self) -> Option<IterationObserver> {
        None
    }
}

/// An observer of a solve's iterations ([`Progress::iterations`]). It runs on the thread of
/// the solver's loop (never on a backend's worker threads), so it needs neither `Send` nor
/// `Sync`; it is called once per iteration, so it should be cheap (rate-limit any drawing).
pub type IterationObserver = Box<dyn FnMut(usize, f64)>;

thread_local! {
    /// The observer of the solve running on this thread. A thread-local rather than an
    /// argument: the Krylov solvers' signatures stay as they are, and the hook costs one
    /// thread-local read per iteration.
    static ITERATIONS: std::cell::RefCell<Option<IterationObserver>> =
        const { std::cell::RefCell::new(None) };
}

/// Reports iteration `iteration` of a trace solve, at relative residual `relative_residual`,
/// to the observer installed for the solve stage on this thread (none outside a pipeline's
/// solve). The Krylov solvers call it from their outer loops.
pub fn iteration(iteration: usize, relative_residual: f64) {
    ITERATIONS.with(|slot| {
        // A solve nested inside the observer itself is not reported again.
        if let Ok(mut slot) = slot.try_borrow_mut() {
            if let Some(observe) = slot.as_mut() {
                observe(iteration, relative_residual);
            }
        }
    });
}

/// Installs an iteration observer on this thread until dropped, then restores the one before.
struct Observing(Option<IterationObserver>);

impl Observing {
    fn install(observer: Option<IterationObserver>) -> Observing {
        Observing(ITERATIONS.with(|slot| slot.replace(observer)))
    }
}

impl Drop for Observing {
    fn drop(&mut self) {
        let previous = self.0.take();
        ITERATIONS.with(|slot| *slot.borrow_mut() = previous);
    }
}

/// A progress observer that does nothing.
pub struct Silent;
impl Progress for Silent {}

/// Wall-clock seconds of each stage.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StageTimings {
    /// Setup.
    pub setup: f64,
    /// Condensation.
    pub condense: f64,
    /// Assembly.
    pub assemble: f64,
    /// Trace solve.
    pub solve: f64,
    /// Recovery.
    pub recover: f64,
    /// Postprocessing and error norms.
    pub postprocess: f64,
    /// Everything.
    pub total: f64,
}

impl StageTimings {
    /// The times in stage order: setup, condense, assemble, solve, recover, postprocess, total.
    pub fn to_array(self) -> [f64; 7] {
        [
            self.setup,
            self.condense,
            self.assemble,
            self.solve,
            self.recover,
            self.postprocess,
            self.total,
        ]
    }

    /// The times from [`StageTimings::to_array`]'s order.
    pub fn from_array(t: [f64; 7]) -> StageTimings {
        let [setup, condense, assemble, solve, recover, postprocess, total] = t;
        StageTimings { setup, condense, assemble, solve, recover, postprocess, total }
    }
}

/// What a pipeline run reports.
#[derive(Clone, Debug)]
pub struct PipelineReport {
    /// Cells.
    pub cells: usize,
    /// Global trace unknowns.
    pub trace_dofs: usize,
    /// Polynomial order.
    pub order: usize,
    /// Backend name.
    pub backend: String,
    /// "f32" or "f64".
    pub precision: &'static str,
    /// Solver name.
    pub solver: String,
    /// The trace solve.
    pub solve: SolveReport,
    /// L2 errors, when the problem has an exact solution.
    pub errors: Option<ErrorNorms>,
    /// Stage timings.
    pub timings: StageTimings,
}

/// Choices about what a run keeps.
#[derive(Clone, Copy, Debug, Default)]
pub struct PipelineOptions {
    /// Keep the assembled trace operator and right-hand side in the output (for export or
    /// benchmarks); otherwise it is freed as soon as the solve ends.
    pub keep_operator: bool,
    /// Copy the trace of every face to the host, boundary faces included
    /// ([`crate::diagnostics::full_trace`]): [`PipelineOutput::full_trace`].
    pub full_trace: bool,
}

/// The results a run leaves on the backend, with its report.
pub struct PipelineOutput<T: Real, B: Backend<T>> {
    /// Report.
    pub report: PipelineReport,
    /// Free trace values.
    pub trace: <B as VectorOps<T>>::Vector,
    /// u_h, q_h.
    pub fields: B::LocalFields,
    /// u*.
    pub postprocessed: B::Postprocessed,
    /// The trace operator and right-hand side, if [`PipelineOptions::keep_operator`].
    pub operator: Option<(B::Operator, <B as VectorOps<T>>::Vector)>,
    /// The trace on every face (`[face * n_f + m]`, the projected data on Dirichlet faces), if
    /// [`PipelineOptions::full_trace`].
    pub full_trace: Option<Vec<T>>,
}

pub(crate) fn timed<R>(
    progress: &mut dyn Progress,
    stage: Stage,
    slot: &mut f64,
    work: impl FnOnce() -> Result<R>,
) -> Result<R> {
    progress.started(stage);
    let start = Instant::now();
    let result = work()?;
    *slot = start.elapsed().as_secs_f64();
    progress.finished(stage, *slot);
    Ok(result)
}

/// rhs minus its component along the constant trace z (the null vector of a pure Neumann
/// problem with c = 0): the discrete data satisfy the compatibility condition z . rhs = 0 only
/// up to quadrature and rounding, and the projection makes the singular system consistent.
fn remove_constant<T: Real, B: Backend<T>>(
    backend: &B,
    disc: &Discretization<'_, T>,
    rhs: &mut <B as VectorOps<T>>::Vector,
) -> Result<()> {
    let z = backend.copy_from_host(&disc.constant_trace())?;
    let (zr, zz) = (backend.dot(&z, rhs)?, backend.dot(&z, &z)?);
    backend.axpy(-(zr / zz), &z, rhs)
}

/// Solves `problem` on `mesh` at `order` with `backend` and the Krylov method `solver`.
pub fn solve<T: Real, B: Backend<T>>(
    backend: &B,
    mesh: &Mesh,
    problem: &Problem,
    order: usize,
    solver: &dyn TraceSolver<T, B>,
    options: PipelineOptions,
    progress: &mut dyn Progress,
) -> Result<PipelineOutput<T, B>> {
    let start = Instant::now();
    let mut t = StageTimings::default();
    progress.started(Stage::Setup);
    let disc = Discretization::<T>::new(mesh, problem, order)?;
    // What the solver needs from `disc` alone (the multigrid's vertex space: host work) is
    // made on a thread of its own while the backend prepares, condenses and assembles.
    let (prep, condensed, operator, rhs, plan) = std::thread::scope(|scope| -> Result<_> {
        let planning = solver.plan(&disc).map(|work| scope.spawn(work));
        let prep = backend.prepare(&disc)?;
        t.setup = start.elapsed().as_secs_f64();
        progress.finished(Stage::Setup, t.setup);
        let mut condensed =
            timed(progress, Stage::Condense, &mut t.condense, || backend.condense(&disc, &prep))?;
        let (operator, rhs) = timed(progress, Stage::Assemble, &mut t.assemble, || {
            let (operator, mut rhs) = backend.assemble(&disc, &prep, &condensed)?;
            if disc.constant_null_space {
                remove_constant(backend, &disc, &mut rhs)?;
            }
            backend.release_assembly_inputs(&mut condensed, &operator);
            Ok((operator, rhs))
        })?;
        let plan = match planning {
            Some(thread) => Some(thread.join().map_err(|_| {
                CoreError::Solver("the trace solver's plan failed (its thread panicked)".into())
            })??),
            None => None,
        };
        Ok((prep, condensed, operator, rhs, plan))
    })?;
    let observing = Observing::install(progress.iterations());
    let (trace, solve_report) = timed(progress, Stage::Solve, &mut t.solve, || {
        let mut x = backend.zeros(disc.trace_dofs())?;
        let report = solver.solve_planned(backend, &disc, plan, &operator, &rhs, &mut x)?;
        Ok((x, report))
    })?;
    drop(observing);
    let operator = options.keep_operator.then_some((operator, rhs));
    let mut trace = trace;
    let fields = timed(progress, Stage::Recover, &mut t.recover, || {
        let fields = backend.recover(&disc, &prep, &condensed, &trace)?;
        if !disc.constant_null_space {
            return Ok(fields);
        }
        // The solve fixed the constant only up to rounding: shift the trace by the mean of
        // u_h (a constant trace shifts u_h by the same constant when c = 0) and recover again.
        let mean = disc.mean_of(&backend.fields_to_host(&fields)?.u);
        let z = backend.copy_from_host(&disc.constant_trace())?;
        backend.axpy(T::from_f64_lossy(-mean), &z, &mut trace)?;
        backend.recover(&disc, &prep, &condensed, &trace)
    })?;
    drop(condensed);
    let full_trace = match options.full_trace {
        true => Some(crate::diagnostics::full_trace(&disc, &backend.to_host(&trace)?)),
        false => None,
    };
    let (postprocessed, errors) = timed(progress, Stage::Postprocess, &mut t.postprocess, || {
        let post = backend.postprocess(&disc, &prep, &fields)?;
        let errors = match &problem.exact {
            Some(exact) => Some(crate::user_code::run_user("the exact solution", || {
                backend.error_norms(&disc, &prep, &fields, &post, exact)
            })??),
            None => None,
        };
        Ok((post, errors))
    })?;
    t.total = start.elapsed().as_secs_f64();
    Ok(PipelineOutput {
        report: PipelineReport {
            cells: mesh.n_cells(),
            trace_dofs: disc.trace_dofs(),
            order,
            backend: backend.name().to_string(),
            precision: T::NAME,
            solver: solver.name(),
            solve: solve_report,
            errors,
            timings: t,
        },
        trace,
        fields,
        postprocessed,
        operator,
        full_trace,
    })
}

/// A summary of a run in four lines: sizes, the trace solve, the errors (when the problem has
/// an exact solution) and the stage times, e.g.
///
/// ```text
/// 2048 cells, order 3, 12160 trace unknowns (cpu, f64)
/// trace solve: pcg-mg, 9 iterations, relative residual 4.1e-11 (converged)
/// L2 errors: u_h 1.2e-7, q_h 3.5e-6, u* 4.4e-9
/// time: 0.052 s (setup 0.004, condense 0.011, assemble 0.003, solve 0.021, recover 0.002, postprocess 0.011)
/// ```
impl std::fmt::Display for PipelineReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{} cells, order {}, {} trace unknowns ({}, {})",
            self.cells, self.order, self.trace_dofs, self.backend, self.precision
        )?;
        let solve = &self.solve;
        writeln!(
            f,
            "trace solve: {}, {} iterations, relative residual {:.1e} ({})",
            self.solver,
            solve.iterations,
            solve.relative_residual,
            if solve.converged { "converged" } else { "not converged" }
        )?;
        if let Some(e) = &self.errors {
            let q = if e.q.is_nan() { "-".to_string() } else { format!("{:.1e}", e.q) };
            writeln!(f, "L2 errors: u_h {:.1e}, q_h {q}, u* {:.1e}", e.u, e.u_star)?;
        }
        let t = &self.timings;
        write!(
            f,
            "time: {:.3} s (setup {:.3}, condense {:.3}, assemble {:.3}, solve {:.3}, recover \
             {:.3}, postprocess {:.3})",
            t.total, t.setup, t.condense, t.assemble, t.solve, t.recover, t.postprocess
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// Iterations reach the observer installed on this thread while it is installed, and no
    /// other; the one before comes back when it is dropped.
    #[test]
    fn iterations_reach_the_installed_observer_only() {
        let seen = Rc::new(RefCell::new(Vec::new()));
        let observer = |tag: usize| -> Option<IterationObserver> {
            let seen = seen.clone();
            Some(Box::new(move |i, _| seen.borrow_mut().push((tag, i))))
        };
        iteration(1, 0.5);
        let outer = Observing::install(observer(0));
        iteration(2, 0.1);
        {
            let _inner = Observing::install(observer(1));
            iteration(3, 0.01);
        }
        iteration(4, 0.001);
        drop(outer);
        iteration(5, 0.0001);
        assert_eq!(*seen.borrow(), [(0, 2), (1, 3), (0, 4)]);
    }
}
