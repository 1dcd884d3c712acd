//! The trace solvers' traits: what `hdg-linalg` implements over a backend's operations, not
//! what a backend implements. A [`Preconditioner`] applies M^-1, a [`KrylovSolver`] solves
//! with any [`TraceOperator`], and a [`TraceSolver`] is the pipeline's trace solve (given the
//! discretization too, for solvers such as the multigrid that build on the mesh).
use crate::auxiliary::VertexSpace;
use crate::backend::{Assembler, RecurrenceStep, TraceOperator, VectorOps};
use crate::discretization::Discretization;
use crate::error::Result;
use crate::real::Real;

/// A preconditioner: z = M^-1 r, through backend vector operations only.
pub trait Preconditioner<T: Real, B: VectorOps<T>> {
    /// Name for reports.
    fn name(&self) -> String;
    /// z = M^-1 r.
    fn apply(&self, backend: &B, r: &B::Vector, z: &mut B::Vector) -> Result<()>;
    /// w = M^-1 r, then one step of a polynomial recurrence on (p, x) (what a polynomial
    /// smoother does with each preconditioned residual). The default applies and then updates
    /// ([`RecurrenceStep::update`]); a preconditioner whose backend fuses the two overrides it
    /// (w is then scratch that may stay unwritten).
    fn apply_step(
        &self,
        backend: &B,
        r: &B::Vector,
        w: &mut B::Vector,
        step: RecurrenceStep<T>,
        p: &mut B::Vector,
        x: &mut B::Vector,
    ) -> Result<()> {
        self.apply(backend, r, w)?;
        step.update(backend, w, p, x)
    }
    /// Operator applications one call costs (polynomial preconditioners), for statistics.
    fn operator_applications(&self) -> usize {
        0
    }
    /// Global reductions one call costs, for statistics.
    fn reductions(&self) -> usize {
        0
    }
}

/// Stage "trace solve": a Krylov method over any trace operator, through vector operations only.
pub trait KrylovSolver<T: Real, B: VectorOps<T>> {
    /// Name for reports.
    fn name(&self) -> String;
    /// Solves A x = b from the initial guess in `x`.
    fn solve(
        &self,
        backend: &B,
        operator: &dyn TraceOperator<T, Vector = B::Vector>,
        rhs: &B::Vector,
        x: &mut B::Vector,
    ) -> Result<SolveReport>;
}

impl<T: Real, B: VectorOps<T>, P: Preconditioner<T, B> + ?Sized> Preconditioner<T, B> for &P {
    fn name(&self) -> String {
        (**self).name()
    }
    fn apply(&self, backend: &B, r: &B::Vector, z: &mut B::Vector) -> Result<()> {
        (**self).apply(backend, r, z)
    }
    fn apply_step(
        &self,
        backend: &B,
        r: &B::Vector,
        w: &mut B::Vector,
        step: RecurrenceStep<T>,
        p: &mut B::Vector,
        x: &mut B::Vector,
    ) -> Result<()> {
        (**self).apply_step(backend, r, w, step, p, x)
    }
    fn operator_applications(&self) -> usize {
        (**self).operator_applications()
    }
    fn reductions(&self) -> usize {
        (**self).reductions()
    }
}

impl<T: Real, B: VectorOps<T>, P: Preconditioner<T, B> + ?Sized> Preconditioner<T, B> for Box<P> {
    fn name(&self) -> String {
        (**self).name()
    }
    fn apply(&self, backend: &B, r: &B::Vector, z: &mut B::Vector) -> Result<()> {
        (**self).apply(backend, r, z)
    }
    fn apply_step(
        &self,
        backend: &B,
        r: &B::Vector,
        w: &mut B::Vector,
        step: RecurrenceStep<T>,
        p: &mut B::Vector,
        x: &mut B::Vector,
    ) -> Result<()> {
        (**self).apply_step(backend, r, w, step, p, x)
    }
    fn operator_applications(&self) -> usize {
        (**self).operator_applications()
    }
    fn reductions(&self) -> usize {
        (**self).reductions()
    }
}

/// Stage "trace solve" as the pipeline sees it: a solver of the assembled operator of a
/// backend. Every [`KrylovSolver`] is one (through [`Krylov`]); solvers that need more than the
/// operator's trait methods (a second precision, say) implement this directly.
pub trait TraceSolver<T: Real, B: Assembler<T>> {
    /// Name for reports.
    fn name(&self) -> String;
    /// Solves A x = b from the initial guess in `x`; `disc` is the discretization `operator`
    /// was assembled from (a multigrid preconditioner builds its coarse space from it).
    fn solve(
        &self,
        backend: &B,
        disc: &Discretization<'_, T>,
        operator: &B::Operator,
        rhs: &<B as VectorOps<T>>::Vector,
        x: &mut <B as VectorOps<T>>::Vector,
    ) -> Result<SolveReport>;
    /// The part of the solve's setup that needs `disc` alone ([`SolverPlan`]), as work for
    /// another thread: the pipeline runs it while the backend prepares, condenses and
    /// assembles. None (the default): nothing to do ahead.
    fn plan<'d>(&self, disc: &'d Discretization<'_, T>) -> Option<PlanWork<'d>> {
        let _ = disc;
        None
    }
    /// [`TraceSolver::solve`] with the plan made ahead for the same `disc` (the default
    /// ignores it).
    fn solve_planned(
        &self,
        backend: &B,
        disc: &Discretization<'_, T>,
        plan: Option<SolverPlan>,
        operator: &B::Operator,
        rhs: &<B as VectorOps<T>>::Vector,
        x: &mut <B as VectorOps<T>>::Vector,
    ) -> Result<SolveReport> {
        let _ = plan;
        self.solve(backend, disc, operator, rhs, x)
    }
}

/// What a trace solver builds from the discretization alone, before the trace operator
/// exists: the multigrid preconditioner's vertex space ([`TraceSolver::plan`]).
pub struct SolverPlan {
    /// The vertex space of `disc`.
    pub vertex_space: VertexSpace,
    /// How its making went, for the solve's report.
    pub notes: Vec<String>,
}

/// The making of a [`SolverPlan`], to run on another thread.
pub type PlanWork<'d> = Box<dyn FnOnce() -> Result<SolverPlan> + Send + 'd>;

/// A Krylov method used as the pipeline's trace solver.
pub struct Krylov<'a, T: Real, B: VectorOps<T>>(pub &'a dyn KrylovSolver<T, B>);

impl<T: Real, B: Assembler<T>> TraceSolver<T, B> for Krylov<'_, T, B> {
    fn name(&self) -> String {
        self.0.name()
    }
    fn solve(
        &self,
        backend: &B,
        _disc: &Discretization<'_, T>,
        operator: &B::Operator,
        rhs: &<B as VectorOps<T>>::Vector,
        x: &mut <B as VectorOps<T>>::Vector,
    ) -> Result<SolveReport> {
        self.0.solve(backend, operator, rhs, x)
    }
}

/// What a Krylov solve did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SolveReport {
    /// Iterations taken.
    pub iterations: usize,
    /// Final relative residual ||b - A x|| / ||b|| (recomputed, not the recurrence's).
    pub relative_residual: f64,
    /// Whether the tolerance was met.
    pub converged: bool,
    /// Relative residual after each iteration (the recurrence's estimate).
    pub residual_history: Vec<f64>,
    /// (iteration, true relative residual) at each periodic true-residual check.
    pub true_residual_checks: Vec<(usize, f64)>,
    /// Operator applications.
    pub operator_applications: usize,
    /// Global reductions (dot products, norms; several dots fused in one phase count once).
    pub reductions: usize,
    /// Extra information a solver reports (eigenvalue bounds used, their cost, restarts, ...).
    pub notes: Vec<String>,
}
