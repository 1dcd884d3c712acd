//! The solver suite behind one name: what `hdg solve --solver NAME` and `hdg solvers` select.
//!
//! Preconditioners and eigenvalue bounds depend on the operator, so [`Suite`] builds them at
//! solve time and adds their cost (operator applications, reductions) to the report.
use std::time::Instant;

use hdg_core::{
    Assembler, BlockOps, CoreError, DemoteOperator, Discretization, FusedOps, KrylovSolver,
    MixedPrecisionOps, MultigridOperator, MultigridOps, PlanWork, Preconditioner, Real, Result,
    SolveReport, SolverPlan, TraceOperator, TraceSolver, VectorOps, VertexSpace,
};

use crate::{
    lanczos_estimate, BlockJacobi, CgSettings, CgThenChebyshev, Chebyshev, ChebyshevPreconditioner,
    ChebyshevSolver, ConjugateGradient, DirectCholesky, Gmres, Jacobi, Multigrid,
    MultigridSettings, PipelinedCg, PreconditionedCg, Preconditioning, ProjectOut, SinglePrecision,
    StoppingRule,
};

/// The solvers of the suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SolverChoice {
    /// Sparse Cholesky (faer, AMD ordering) of the exported matrix.
    Direct,
    /// Conjugate gradients.
    Cg,
    /// CG with Jacobi.
    PcgJacobi,
    /// CG with block Jacobi on the DBF diagonal blocks.
    PcgBlockJacobi,
    /// Pipelined CG (one reduction phase per iteration), Jacobi.
    PipelinedCg,
    /// Chebyshev iteration, Jacobi, bounds from 30 Lanczos (CG) steps with safety factors.
    Chebyshev,
    /// CG preconditioned by a degree-4 Chebyshev polynomial in D^-1 A (bounds as above).
    ChebPcg,
    /// CG for 25 steps, Lanczos bounds from its coefficients, then Chebyshev (Jacobi).
    CgChebyshev,
    /// GMRES(30), right Jacobi preconditioning.
    Gmres,
    /// Iterative refinement: f64 residuals, Jacobi-PCG inner solves in f32.
    Mixed,
    /// CG preconditioned by the auxiliary-space multigrid V-cycle ([`Multigrid`]): iteration
    /// counts independent of the mesh size. Needs the discretization (a [`TraceSolver`]).
    PcgMg,
}

impl SolverChoice {
    /// Every solver, in the order of the comparison table.
    pub const ALL: [SolverChoice; 11] = [
        SolverChoice::Direct,
        SolverChoice::PcgMg,
        SolverChoice::Cg,
        SolverChoice::PcgJacobi,
        SolverChoice::PcgBlockJacobi,
        SolverChoice::PipelinedCg,
        SolverChoice::Chebyshev,
        SolverChoice::ChebPcg,
        SolverChoice::CgChebyshev,
        SolverChoice::Gmres,
        SolverChoice::Mixed,
    ];

    /// Command-line name.
    pub fn name(self) -> &'static str {
        match self {
            SolverChoice::Direct => "direct",
            SolverChoice::Cg => "cg",
            SolverChoice::PcgJacobi => "pcg-jacobi",
            SolverChoice::PcgBlockJacobi => "pcg-block-jacobi",
            SolverChoice::PipelinedCg => "pipelined-cg",
            SolverChoice::Chebyshev => "chebyshev",
            SolverChoice::ChebPcg => "cheb-pcg",
            SolverChoice::CgChebyshev => "cg-chebyshev",
            SolverChoice::Gmres => "gmres",
            SolverChoice::Mixed => "mixed",
            SolverChoice::PcgMg => "pcg-mg",
        }
    }
}

/// Lanczos steps for eigenvalue bounds, and the safety factors applied to them (Ritz values lie
/// inside the spectrum: lambda_max is under-estimated, lambda_min over-estimated).
const LANCZOS_STEPS: usize = 30;
const SAFETY_MAX: f64 = 1.1;
const SAFETY_MIN: f64 = 0.8;
/// Degree of the Chebyshev polynomial preconditioner.
const CHEBYSHEV_DEGREE: usize = 4;

/// A solver of the suite with its stopping rule.
#[derive(Clone, Copy, Debug)]
pub struct Suite {
    /// Which solver.
    pub choice: SolverChoice,
    /// The true relative residual to meet.
    pub tolerance: f64,
    /// Iteration cap.
    pub max_iterations: usize,
    /// Whether a true residual that stalls above the tolerance (the precision's attainable
    /// accuracy) counts as converged, as it does under the default tolerance
    /// ([`StoppingRule`]).
    pub accept_attainable: bool,
}

impl Suite {
    /// `choice` stopping at the true relative residual `tolerance` (which must be met) or
    /// after `max_iterations`.
    pub fn new(choice: SolverChoice, tolerance: f64, max_iterations: usize) -> Self {
        Suite { choice, tolerance, max_iterations, accept_attainable: false }
    }

    /// The stopping rule every iterative solve of the suite ends with.
    pub fn stopping_rule(&self) -> StoppingRule {
        StoppingRule { tolerance: self.tolerance, accept_attainable: self.accept_attainable }
    }
}

fn cg_settings(s: &Suite) -> CgSettings {
    CgSettings {
        tolerance: s.tolerance,
        max_iterations: s.max_iterations,
        true_residual_every: 100,
    }
}

/// Eigenvalue bounds of D^-1 A from Lanczos, widened by the safety factors; the estimate's cost
/// is added to `cost`.
fn jacobi_bounds<T: Real, B: FusedOps<T>>(
    backend: &B,
    operator: &dyn TraceOperator<T, Vector = B::Vector>,
    jacobi: &Jacobi<B::Vector>,
    rhs: &B::Vector,
    cost: &mut SolveReport,
) -> Result<(f64, f64)> {
    let estimate = lanczos_estimate(backend, operator, jacobi, rhs, LANCZOS_STEPS)?;
    cost.operator_applications += estimate.operator_applications;
    cost.reductions += estimate.reductions;
    let bounds = (estimate.lambda_min * SAFETY_MIN, estimate.lambda_max * SAFETY_MAX);
    cost.notes.push(format!(
        "bounds of D^-1 A from {LANCZOS_STEPS} Lanczos steps: [{:.4e}, {:.4e}], used [{:.4e}, {:.4e}] ({} applications, {} reductions)",
        estimate.lambda_min, estimate.lambda_max, bounds.0, bounds.1, estimate.operator_applications, estimate.reductions
    ));
    Ok(bounds)
}

fn add_cost(mut report: SolveReport, cost: SolveReport) -> SolveReport {
    report.operator_applications += cost.operator_applications;
    report.reductions += cost.reductions;
    let mut notes = cost.notes;
    notes.append(&mut report.notes);
    report.notes = notes;
    report
}

impl<T: Real, B: FusedOps<T> + BlockOps<T>> KrylovSolver<T, B> for Suite {
    fn name(&self) -> String {
        self.choice.name().into()
    }

    fn solve(
        &self,
        backend: &B,
        operator: &dyn TraceOperator<T, Vector = B::Vector>,
        rhs: &B::Vector,
        x: &mut B::Vector,
    ) -> Result<SolveReport> {
        if self.choice == SolverChoice::Direct {
            return DirectCholesky::solve(backend, operator, rhs, x);
        }
        self.stopping_rule().apply(|| self.iterate(backend, operator, rhs, x))
    }
}

impl Suite {
    /// One run of the iterative solver `choice` from x (its setup included).
    fn iterate<T: Real, B: FusedOps<T> + BlockOps<T>>(
        &self,
        backend: &B,
        operator: &dyn TraceOperator<T, Vector = B::Vector>,
        rhs: &B::Vector,
        x: &mut B::Vector,
    ) -> Result<SolveReport> {
        let (tol, max) = (self.tolerance, self.max_iterations);
        let mut cost = SolveReport::default();
        let report = match self.choice {
            SolverChoice::Direct => DirectCholesky::solve(backend, operator, rhs, x)?,
            SolverChoice::Cg => ConjugateGradient::new(tol, max, Preconditioning::None)
                .solve(backend, operator, rhs, x)?,
            SolverChoice::PcgJacobi => ConjugateGradient::new(tol, max, Preconditioning::Jacobi)
                .solve(backend, operator, rhs, x)?,
            SolverChoice::PcgBlockJacobi => {
                let preconditioner = BlockJacobi::new(backend, operator)?;
                PreconditionedCg { settings: cg_settings(self), preconditioner }
                    .solve(backend, operator, rhs, x)?
            }
            SolverChoice::PipelinedCg => {
                PipelinedCg::new(tol, max, Jacobi::new(backend, operator)?)
                    .solve(backend, operator, rhs, x)?
            }
            SolverChoice::Chebyshev => {
                let jacobi = Jacobi::new(backend, operator)?;
                let (lambda_min, lambda_max) =
                    jacobi_bounds(backend, operator, &jacobi, rhs, &mut cost)?;
                let chebyshev = Chebyshev {
                    lambda_min,
                    lambda_max,
                    tolerance: tol,
                    max_iterations: max,
                    check_every: 10,
                };
                ChebyshevSolver { chebyshev, preconditioner: jacobi }
                    .solve(backend, operator, rhs, x)?
            }
            SolverChoice::ChebPcg => {
                let jacobi = Jacobi::new(backend, operator)?;
                let (lambda_min, lambda_max) =
                    jacobi_bounds(backend, operator, &jacobi, rhs, &mut cost)?;
                let preconditioner = ChebyshevPreconditioner::new(
                    operator,
                    jacobi,
                    CHEBYSHEV_DEGREE,
                    lambda_min,
                    lambda_max,
                )?;
                PreconditionedCg { settings: cg_settings(self), preconditioner }
                    .solve(backend, operator, rhs, x)?
            }
            SolverChoice::CgChebyshev => {
                CgThenChebyshev::new(tol, max, Jacobi::new(backend, operator)?)
                    .solve(backend, operator, rhs, x)?
            }
            SolverChoice::Gmres => Gmres::new(30, tol, max, Jacobi::new(backend, operator)?)
                .solve(backend, operator, rhs, x)?,
            SolverChoice::PcgMg => {
                return Err(CoreError::InvalidParameter {
                    name: "solver",
                    reason:
                        "pcg-mg builds its coarse space from the mesh: run it as the pipeline's \
                         trace solver (TraceSolver), which is given the discretization"
                            .into(),
                })
            }
            SolverChoice::Mixed => return Err(CoreError::InvalidParameter {
                name: "solver",
                reason:
                    "mixed precision needs the f64 pipeline and a backend with both precisions; \
                             use MixedPrecisionRefinement as the trace solver"
                        .into(),
            }),
        };
        Ok(add_cost(report, cost))
    }
}

/// How `pcg-mg` runs in a precision: in f32 the hierarchy is built on the trace operator
/// itself; in f64 on the operator rounded to f32 when [`MultigridSettings::single_precision`]
/// says so (an f32 V-cycle inside f64 CG, [`SinglePrecision`]), else on the operator itself.
pub trait MultigridPrecision<B>: Real
where
    B: Assembler<Self> + MultigridOps<Self>,
    B::Operator: MultigridOperator<Self, B>,
{
    /// CG with the multigrid preconditioner built for `disc` (on the vertex space of `plan`,
    /// made ahead for `disc`, when there is one).
    fn pcg_mg(
        suite: &Suite,
        backend: &B,
        disc: &Discretization<'_, Self>,
        plan: Option<SolverPlan>,
        operator: &B::Operator,
        rhs: &<B as VectorOps<Self>>::Vector,
        x: &mut <B as VectorOps<Self>>::Vector,
    ) -> Result<SolveReport>;
}

/// The vertex space of `disc`, and a note of the time it took.
fn vertex_space<T: Real>(disc: &Discretization<'_, T>, split_ratio: f64) -> Result<SolverPlan> {
    let started = Instant::now();
    let vertex_space = VertexSpace::new(disc, split_ratio)?;
    let note = format!(
        "vertex space ({} unknowns): {:.1} ms",
        vertex_space.n_free_vertices,
        started.elapsed().as_secs_f64() * 1e3
    );
    Ok(SolverPlan { vertex_space, notes: vec![note] })
}

/// The plan's vertex space, or one made now; the notes say which.
fn planned_space<T: Real>(
    disc: &Discretization<'_, T>,
    plan: Option<SolverPlan>,
    settings: &MultigridSettings,
) -> Result<(VertexSpace, Vec<String>)> {
    match plan {
        Some(SolverPlan { vertex_space, mut notes }) => {
            notes.iter_mut().for_each(|note| note.push_str(" (alongside the element stages)"));
            Ok((vertex_space, notes))
        }
        None => vertex_space(disc, settings.split_ratio).map(|p| (p.vertex_space, p.notes)),
    }
}

/// PCG with `preconditioner`, its setup notes first in the report.
pub(crate) fn pcg_with<T: Real, B: FusedOps<T>>(
    suite: &Suite,
    backend: &B,
    operator: &dyn TraceOperator<T, Vector = B::Vector>,
    preconditioner: &dyn Preconditioner<T, B>,
    setup_notes: &[String],
    rhs: &B::Vector,
    x: &mut B::Vector,
) -> Result<SolveReport> {
    let pcg = PreconditionedCg { settings: cg_settings(suite), preconditioner };
    let mut report = suite.stopping_rule().apply(|| pcg.solve(backend, operator, rhs, x))?;
    let mut notes = setup_notes.to_vec();
    notes.append(&mut report.notes);
    report.notes = notes;
    Ok(report)
}

/// CG with the multigrid built in the operator's own precision.
fn pcg_mg_same_precision<T, B>(
    suite: &Suite,
    backend: &B,
    disc: &Discretization<'_, T>,
    plan: Option<SolverPlan>,
    operator: &B::Operator,
    rhs: &<B as VectorOps<T>>::Vector,
    x: &mut <B as VectorOps<T>>::Vector,
) -> Result<SolveReport>
where
    T: Real,
    B: Assembler<T> + MultigridOps<T>,
    B::Operator: MultigridOperator<T, B>,
{
    let settings = MultigridSettings {
        singular: disc.constant_null_space,
        // A rounded copy of a singular operator has a slightly different null space: the
        // cycle would feed CG inconsistent corrections.
        single_precision: !disc.constant_null_space,
        ..MultigridSettings::auto(disc.mesh.dim(), disc.order)
    };
    let (space, mut notes) = planned_space(disc, plan, &settings)?;
    let mg = Multigrid::new(backend, operator, &space, &disc.topology, &settings)?;
    notes.extend_from_slice(mg.notes());
    if disc.constant_null_space {
        let null = backend.copy_from_host(&disc.constant_trace())?;
        let projected = ProjectOut::new(backend, &mg, null)?;
        return pcg_with(suite, backend, operator, &projected, &notes, rhs, x);
    }
    pcg_with(suite, backend, operator, &mg, &notes, rhs, x)
}

impl<B> MultigridPrecision<B> for f32
where
    B: Assembler<f32> + MultigridOps<f32>,
    B::Operator: MultigridOperator<f32, B>,
{
    fn pcg_mg(
        suite: &Suite,
        backend: &B,
        disc: &Discretization<'_, f32>,
        plan: Option<SolverPlan>,
        operator: &B::Operator,
        rhs: &<B as VectorOps<f32>>::Vector,
        x: &mut <B as VectorOps<f32>>::Vector,
    ) -> Result<SolveReport> {
        pcg_mg_same_precision(suite, backend, disc, plan, operator, rhs, x)
    }
}

impl<B> MultigridPrecision<B> for f64
where
    B: Assembler<f64> + MultigridOps<f64> + MultigridOps<f32> + MixedPrecisionOps,
    B::Operator: DemoteOperator<B> + MultigridOperator<f64, B>,
    <B::Operator as DemoteOperator<B>>::Low: MultigridOperator<f32, B>,
{
    fn pcg_mg(
        suite: &Suite,
        backend: &B,
        disc: &Discretization<'_, f64>,
        plan: Option<SolverPlan>,
        operator: &B::Operator,
        rhs: &<B as VectorOps<f64>>::Vector,
        x: &mut <B as VectorOps<f64>>::Vector,
    ) -> Result<SolveReport> {
        let settings = MultigridSettings {
            singular: disc.constant_null_space,
            single_precision: !disc.constant_null_space,
            ..MultigridSettings::auto(disc.mesh.dim(), disc.order)
        };
        if !settings.single_precision {
            return pcg_mg_same_precision(suite, backend, disc, plan, operator, rhs, x);
        }
        let (space, mut notes) = planned_space(disc, plan, &settings)?;
        let started = Instant::now();
        let low = operator.demote()?;
        notes.push(format!(
            "trace operator rounded to f32 for the V-cycle: {:.1} ms",
            started.elapsed().as_secs_f64() * 1e3
        ));
        let mg = Multigrid::<f32, B>::new(backend, &low, &space, &disc.topology, &settings)?;
        notes.extend_from_slice(mg.notes());
        pcg_with(suite, backend, operator, &SinglePrecision::new(&mg), &notes, rhs, x)
    }
}

impl<T, B> TraceSolver<T, B> for Suite
where
    T: MultigridPrecision<B>,
    B: Assembler<T> + MultigridOps<T>,
    B::Operator: MultigridOperator<T, B>,
{
    fn name(&self) -> String {
        self.choice.name().into()
    }

    /// `pcg-mg` builds its hierarchy from `disc` (setup time and levels in the notes); every
    /// other choice is the [`KrylovSolver`].
    fn solve(
        &self,
        backend: &B,
        disc: &Discretization<'_, T>,
        operator: &B::Operator,
        rhs: &<B as VectorOps<T>>::Vector,
        x: &mut <B as VectorOps<T>>::Vector,
    ) -> Result<SolveReport> {
        self.solve_planned(backend, disc, None, operator, rhs, x)
    }

    /// `pcg-mg`'s vertex space, which needs `disc` alone.
    fn plan<'d>(&self, disc: &'d Discretization<'_, T>) -> Option<PlanWork<'d>> {
        if self.choice != SolverChoice::PcgMg {
            return None;
        }
        let split_ratio = MultigridSettings::auto(disc.mesh.dim(), disc.order).split_ratio;
        Some(Box::new(move || vertex_space(disc, split_ratio)))
    }

    fn solve_planned(
        &self,
        backend: &B,
        disc: &Discretization<'_, T>,
        plan: Option<SolverPlan>,
        operator: &B::Operator,
        rhs: &<B as VectorOps<T>>::Vector,
        x: &mut <B as VectorOps<T>>::Vector,
    ) -> Result<SolveReport> {
        match self.choice {
            SolverChoice::PcgMg => T::pcg_mg(self, backend, disc, plan, operator, rhs, x),
            SolverChoice::Direct => {
                TraceSolver::<T, B>::solve(&DirectCholesky, backend, disc, operator, rhs, x)
            }
            _ => KrylovSolver::<T, B>::solve(self, backend, operator, rhs, x),
        }
    }
}
