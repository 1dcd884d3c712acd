//! Mixed-precision iterative refinement: f64 residuals, f32 inner solves.
//!
//! Each refinement step computes r = b - A x in f64 on the backend, rounds r to f32, solves
//! A32 d = r32 roughly (Jacobi-preconditioned CG in f32, [`crate::run_cg`]) and adds d to x in
//! f64. The inner solves run on an f32 copy of the operator (half the memory traffic of the
//! matrix-vector products that dominate the solve); the outer residual in f64 lets x converge
//! to f64 accuracy as long as kappa(A) u32 < 1: each step multiplies the error by about
//! max(inner_tolerance, kappa u32). A pure f32 solve stalls near u32 ||A|| ||x|| / ||b||.
use std::time::Instant;

use hdg_core::{
    Assembler, CoreError, DemoteOperator, Discretization, MixedPrecisionOps, Result, SolveReport,
    TraceOperator, TraceSolver, VectorOps,
};

use crate::cg::{check_tolerance, rhs_norm, run_cg, true_residual, CgSettings, Flow};
use crate::precond::Jacobi;

/// A refinement step that does not reduce the outer residual below this fraction of the
/// previous one counts as stagnation (the inner solve no longer helps: kappa(A) u32 ~ 1, or the
/// inner solver fails).
const STAGNATION_RATIO: f64 = 0.9;

/// Iterative refinement with an f64 outer residual and f32 Jacobi-PCG inner solves, as a
/// [`TraceSolver`] of any backend that has both precisions and an operator that can demote
/// itself ([`DemoteOperator`]).
///
/// The report: `iterations` = inner CG iterations in total; `relative_residual` = the final
/// outer (f64, true) relative residual; `residual_history` = every inner iteration's residual
/// estimate, scaled to the outer system (inner relative residual x outer relative residual at
/// the start of that refinement); `true_residual_checks` = (inner iterations so far, outer
/// residual) at each refinement; `operator_applications` and `reductions` sum both precisions,
/// the notes split them and give the refinement count.
#[derive(Clone, Copy, Debug)]
pub struct MixedPrecisionRefinement {
    /// Stop when the f64 ||b - A x|| / ||b|| <= tolerance (in (0, 1); 1e-12 is reachable for
    /// well-conditioned trace systems).
    pub tolerance: f64,
    /// At most this many refinement steps (inner solves); the report then says not converged.
    pub max_refinements: usize,
    /// Relative tolerance of each inner f32 solve (in (0, 1)); ~1e-4..1e-5: tighter is wasted
    /// in f32 (u32 ~ 6e-8 times the condition number), looser costs more refinements.
    pub inner_tolerance: f64,
    /// Iteration cap of each inner solve (an inner solve that hits it still yields a
    /// correction; the outer residual decides whether it helped).
    pub inner_max_iterations: usize,
}

impl Default for MixedPrecisionRefinement {
    /// Tolerance 1e-12, at most 20 refinements, inner tolerance 1e-5, 10 000 inner iterations.
    fn default() -> Self {
        MixedPrecisionRefinement {
            tolerance: 1e-12,
            max_refinements: 20,
            inner_tolerance: 1e-5,
            inner_max_iterations: 10_000,
        }
    }
}

/// Iterative refinement of A x = b from the initial guess in `x`, with `op64` for the outer
/// f64 residuals and `op32` (meant to be `op64` rounded to f32) for the inner solves.
///
/// Any pair of operators works, which lets tests count the applications of each. Errors: a
/// non-finite right-hand side or residual, an inner CG breakdown (op32 or its diagonal not
/// positive definite), invalid settings. A refinement that does not reduce the outer residual
/// by at least 10% stops the solve with `converged = false` and a note (not an error: x is the
/// best iterate found but one, and the report says how far it got).
pub fn refine<B: MixedPrecisionOps>(
    backend: &B,
    op64: &dyn TraceOperator<f64, Vector = <B as VectorOps<f64>>::Vector>,
    op32: &dyn TraceOperator<f32, Vector = <B as VectorOps<f32>>::Vector>,
    rhs: &<B as VectorOps<f64>>::Vector,
    x: &mut <B as VectorOps<f64>>::Vector,
    settings: &MixedPrecisionRefinement,
) -> Result<SolveReport> {
    check_tolerance(settings.tolerance)?;
    check_tolerance(settings.inner_tolerance)?;
    let n = op64.dim();
    if op32.dim() != n {
        return Err(CoreError::InvalidParameter {
            name: "f32 operator",
            reason: format!("has {} rows, the f64 operator {n}", op32.dim()),
        });
    }
    let mut report = SolveReport::default();
    let b_norm = rhs_norm::<f64, B>(backend, op64, rhs, x, &mut report)?;
    if b_norm == 0.0 {
        VectorOps::<f64>::scale(backend, 0.0, x)?;
        report.converged = true;
        return Ok(report);
    }
    let jacobi = Jacobi::new::<f32, B>(backend, op32)?;
    let inner_settings = CgSettings {
        tolerance: settings.inner_tolerance,
        max_iterations: settings.inner_max_iterations,
        true_residual_every: 0,
    };
    let mut r64 = VectorOps::<f64>::zeros(backend, n)?;
    let mut r32 = VectorOps::<f32>::zeros(backend, n)?;
    let mut d32 = VectorOps::<f32>::zeros(backend, n)?;
    // Applications and reductions per precision (the report holds the sums).
    let (mut ops64, mut ops32, mut red64, mut red32) = (0usize, 0usize, report.reductions, 0usize);
    let mut refinements = 0usize;
    let mut inner_iterations: Vec<usize> = Vec::new();
    let mut previous = f64::INFINITY;
    let started = Instant::now();
    loop {
        let mut outer = SolveReport::default();
        let residual =
            true_residual::<f64, B>(backend, op64, rhs, x, &mut r64, b_norm, &mut outer)?;
        ops64 += outer.operator_applications;
        red64 += outer.reductions;
        if !residual.is_finite() {
            return Err(CoreError::Solver(format!(
                "mixed-precision refinement diverged after {refinements} refinements (residual is not finite)"
            )));
        }
        report.true_residual_checks.push((report.iterations, residual));
        report.relative_residual = residual;
        if residual <= settings.tolerance {
            report.converged = true;
            break;
        }
        if residual > STAGNATION_RATIO * previous {
            report.notes.push(format!(
                "stagnation: refinement {refinements} took the residual from {previous:.3e} to {residual:.3e} (f32 inner solves cannot help further: kappa(A) u32 too large?)"
            ));
            break;
        }
        if refinements >= settings.max_refinements {
            break;
        }
        previous = residual;
        // Scale r to unit norm before rounding: the f32 range then never limits how small a
        // residual can be corrected.
        let r_norm = residual * b_norm;
        VectorOps::<f64>::scale(backend, 1.0 / r_norm, &mut r64)?;
        backend.demote(&r64, &mut r32)?;
        VectorOps::<f32>::scale(backend, 0.0, &mut d32)?;
        let inner =
            run_cg::<f32, B>(backend, op32, &jacobi, &r32, &mut d32, &inner_settings, &mut |_| {
                Flow::Continue
            })?;
        refinements += 1;
        inner_iterations.push(inner.iterations);
        report.iterations += inner.iterations;
        report.residual_history.extend(inner.residual_history.iter().map(|&e| e * residual));
        ops32 += inner.operator_applications;
        red32 += inner.reductions;
        // x += ||r|| d (the scaling undone in f32: ||r|| d is as representable as d).
        VectorOps::<f32>::scale(backend, r_norm as f32, &mut d32)?;
        backend.promote_add(&d32, x)?;
    }
    report.operator_applications = ops64 + ops32;
    report.reductions = red64 + red32;
    report.notes.push(format!(
        "refinements: {refinements}; inner f32 Jacobi-PCG iterations per refinement: {inner_iterations:?}"
    ));
    report.notes.push(format!(
        "operator applications: f64 {ops64}, f32 {ops32}; reductions: f64 {red64}, f32 {red32}"
    ));
    report.notes.push(format!("time: {:.3} ms", started.elapsed().as_secs_f64() * 1e3));
    Ok(report)
}

/// Why an f32 solve has no mixed-precision refinement.
pub(crate) const MIXED_NEEDS_F64: &str =
    "mixed precision refines an f64 solution: choose the f64 precision";

impl MixedPrecisionRefinement {
    /// Stopping at `tolerance`, the other settings [`Default`]'s.
    pub fn with_tolerance(tolerance: f64) -> Self {
        MixedPrecisionRefinement { tolerance, ..Default::default() }
    }

    /// Demotes `operator` once (its cost is in the notes), then runs [`refine`] with it.
    ///
    /// # Errors
    /// The demotion's; [`refine`]'s.
    pub fn solve_demoted<B, O>(
        &self,
        backend: &B,
        operator: &O,
        rhs: &<B as VectorOps<f64>>::Vector,
        x: &mut <B as VectorOps<f64>>::Vector,
    ) -> Result<SolveReport>
    where
        B: MixedPrecisionOps,
        O: DemoteOperator<B, Vector = <B as VectorOps<f64>>::Vector>,
    {
        let t0 = Instant::now();
        let low = operator.demote()?;
        let demote_ms = t0.elapsed().as_secs_f64() * 1e3;
        let mut report = refine::<B>(backend, operator, &low, rhs, x, self)?;
        report.notes.push(format!("operator demoted to f32 in {demote_ms:.3} ms"));
        Ok(report)
    }
}

impl<B> TraceSolver<f64, B> for MixedPrecisionRefinement
where
    B: Assembler<f64> + MixedPrecisionOps,
    B::Operator: DemoteOperator<B>,
{
    fn name(&self) -> String {
        "mixed".into()
    }

    /// [`MixedPrecisionRefinement::solve_demoted`].
    fn solve(
        &self,
        backend: &B,
        _disc: &Discretization<'_, f64>,
        operator: &B::Operator,
        rhs: &<B as VectorOps<f64>>::Vector,
        x: &mut <B as VectorOps<f64>>::Vector,
    ) -> Result<SolveReport> {
        self.solve_demoted(backend, operator, rhs, x)
    }
}
