//! Conjugate gradients, plain and preconditioned: the reference Krylov method of the suite.
//!
//! [`run_cg`] is the one implementation of the iteration; [`ConjugateGradient`] wraps it as a
//! [`KrylovSolver`], the Lanczos spectrum estimate and the CG-then-Chebyshev hybrid call it with
//! an observer that receives every step's coefficients.
use hdg_core::{
    CoreError, FusedOps, KrylovSolver, Preconditioner, Real, Result, SolveReport, TraceOperator,
    VectorOps,
};

use crate::precond::{Identity, Jacobi};

/// The preconditioner of [`ConjugateGradient`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preconditioning {
    /// None: z = r.
    None,
    /// Jacobi: z = D^{-1} r with D the operator's diagonal.
    Jacobi,
}

/// Settings of one CG run.
#[derive(Clone, Copy, Debug)]
pub struct CgSettings {
    /// Stop when the recurrence's ||r|| / ||b|| <= tolerance.
    pub tolerance: f64,
    /// Give up after this many iterations (the report then says not converged).
    pub max_iterations: usize,
    /// Recompute the true residual b - A x every this many iterations (0: only at the end);
    /// each check is recorded, and a true residual below the tolerance ends the solve.
    pub true_residual_every: usize,
}

/// One CG step, as the observer sees it: x_{k+1} = x_k + alpha p_k, p_{k+1} = z_{k+1} + beta p_k.
#[derive(Clone, Copy, Debug)]
pub struct CgStep {
    /// Iteration number (1-based).
    pub iteration: usize,
    /// alpha_k.
    pub alpha: f64,
    /// beta_k (the coefficient of the next direction).
    pub beta: f64,
    /// Relative residual ||r|| / ||b|| after the step.
    pub relative_residual: f64,
}

/// What the observer answers: go on, or stop here (the report then says not converged unless
/// the tolerance was met).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Go on.
    Continue,
    /// Stop after this step.
    Stop,
}

fn check_lengths<T: Real, B: VectorOps<T>>(
    backend: &B,
    n: usize,
    rhs: &B::Vector,
    x: &B::Vector,
) -> Result<()> {
    if backend.len(rhs) != n || backend.len(x) != n {
        return Err(CoreError::InvalidParameter {
            name: "vector length",
            reason: format!(
                "operator has {n} rows, rhs {} and x {}",
                backend.len(rhs),
                backend.len(x)
            ),
        });
    }
    Ok(())
}

/// Checks a relative residual tolerance: a number in (0, 1).
///
/// # Errors
/// [`CoreError::InvalidParameter`] naming the value.
pub fn check_tolerance(tolerance: f64) -> Result<()> {
    if !(tolerance.is_finite() && tolerance > 0.0 && tolerance < 1.0) {
        return Err(CoreError::InvalidParameter {
            name: "tolerance",
            reason: format!("{tolerance} is not in (0, 1)"),
        });
    }
    Ok(())
}

/// ||b||, with the checks every solver makes first: lengths, a finite right-hand side.
pub(crate) fn rhs_norm<T: Real, B: VectorOps<T>>(
    backend: &B,
    operator: &dyn TraceOperator<T, Vector = B::Vector>,
    rhs: &B::Vector,
    x: &B::Vector,
    report: &mut SolveReport,
) -> Result<f64> {
    check_lengths(backend, operator.dim(), rhs, x)?;
    let b_norm = backend.dot(rhs, rhs)?.as_f64().sqrt();
    report.reductions += 1;
    if !b_norm.is_finite() {
        return Err(CoreError::Solver("the right-hand side contains NaN or infinity".into()));
    }
    Ok(b_norm)
}

/// r = b - A x; returns ||r|| / ||b||.
pub(crate) fn true_residual<T: Real, B: VectorOps<T>>(
    backend: &B,
    operator: &dyn TraceOperator<T, Vector = B::Vector>,
    rhs: &B::Vector,
    x: &B::Vector,
    r: &mut B::Vector,
    b_norm: f64,
    report: &mut SolveReport,
) -> Result<f64> {
    operator.apply(x, r)?;
    backend.xpby(rhs, -T::one(), r)?;
    report.operator_applications += 1;
    report.reductions += 1;
    Ok(backend.dot(r, r)?.as_f64().sqrt() / b_norm)
}

/// Preconditioned CG from the initial guess in `x`. Returns the report; the final
/// `relative_residual` is the true one. A breakdown (p.Ap <= 0: the operator or the
/// preconditioner is not SPD) or a non-finite residual is an error. `observer` sees every
/// step, the last one included (its beta needs one more preconditioner application than the
/// solution does; [`solve_cg`] saves it).
pub fn run_cg<T: Real, B: FusedOps<T>>(
    backend: &B,
    operator: &dyn TraceOperator<T, Vector = B::Vector>,
    preconditioner: &dyn Preconditioner<T, B>,
    rhs: &B::Vector,
    x: &mut B::Vector,
    settings: &CgSettings,
    observer: &mut dyn FnMut(&CgStep) -> Flow,
) -> Result<SolveReport> {
    cg_loop(backend, operator, preconditioner, rhs, x, settings, Some(observer))
}

/// [`run_cg`] without an observer: the iteration that meets the tolerance ends at its residual,
/// without the preconditioner application and the update of p that only a next step would
/// use. The same x, residuals and iteration count.
pub fn solve_cg<T: Real, B: FusedOps<T>>(
    backend: &B,
    operator: &dyn TraceOperator<T, Vector = B::Vector>,
    preconditioner: &dyn Preconditioner<T, B>,
    rhs: &B::Vector,
    x: &mut B::Vector,
    settings: &CgSettings,
) -> Result<SolveReport> {
    cg_loop(backend, operator, preconditioner, rhs, x, settings, None)
}

fn cg_loop<T: Real, B: FusedOps<T>>(
    backend: &B,
    operator: &dyn TraceOperator<T, Vector = B::Vector>,
    preconditioner: &dyn Preconditioner<T, B>,
    rhs: &B::Vector,
    x: &mut B::Vector,
    settings: &CgSettings,
    mut observer: Option<&mut dyn FnMut(&CgStep) -> Flow>,
) -> Result<SolveReport> {
    check_tolerance(settings.tolerance)?;
    let n = operator.dim();
    let mut report = SolveReport::default();
    let b_norm = rhs_norm(backend, operator, rhs, x, &mut report)?;
    if b_norm == 0.0 {
        backend.scale(T::zero(), x)?;
        report.converged = true;
        return Ok(report);
    }
    let mut r = backend.zeros(n)?;
    let mut residual = true_residual(backend, operator, rhs, x, &mut r, b_norm, &mut report)?;
    let mut z = backend.zeros(n)?;
    let mut p = backend.zeros(n)?;
    let mut ap = backend.zeros(n)?;
    let mut check = backend.zeros(n)?;
    let count_precond = |report: &mut SolveReport| {
        report.operator_applications += preconditioner.operator_applications();
        report.reductions += preconditioner.reductions();
    };

    preconditioner.apply(backend, &r, &mut z)?;
    count_precond(&mut report);
    let mut rz = backend.dot(&r, &z)?;
    report.reductions += 1;
    backend.copy(&z, &mut p)?;
    while residual > settings.tolerance && report.iterations < settings.max_iterations {
        operator.apply(&p, &mut ap)?;
        report.operator_applications += 1;
        let pap = backend.dot(&p, &ap)?;
        report.reductions += 1;
        if pap <= T::zero() && residual <= T::UNIT_ROUNDOFF.sqrt() {
            // p is rounding noise by now: stagnation at the attainable accuracy, not a
            // non-SPD operator.
            report.notes.push(format!(
                "stagnated at iteration {} (p.Ap = {:e} at residual {residual:.2e})",
                report.iterations + 1,
                pap.as_f64()
            ));
            break;
        }
        if pap.is_nan() || pap <= T::zero() {
            return Err(CoreError::Solver(format!(
                "CG breakdown at iteration {}: p.Ap = {:e} (the operator or the preconditioner is not positive definite)",
                report.iterations + 1,
                pap.as_f64()
            )));
        }
        let alpha = rz / pap;
        let rr = backend.cg_update(alpha, &p, &ap, x, &mut r)?;
        report.iterations += 1;
        residual = rr.as_f64().sqrt() / b_norm;
        if observer.is_none() {
            // Progress of a trace solve (the inner uses of this loop pass an observer).
            hdg_core::pipeline::iteration(report.iterations, residual);
        }
        if observer.is_none() && residual <= settings.tolerance {
            report.reductions += 1; // r.r, fused in the update
            report.residual_history.push(residual);
            break;
        }
        // r.z: with no preconditioner z = r and r.z is the r.r just computed.
        preconditioner.apply(backend, &r, &mut z)?;
        count_precond(&mut report);
        let rz_new = backend.dot(&r, &z)?;
        report.reductions += 2; // r.r (fused in the update) and r.z
        if !residual.is_finite() {
            return Err(CoreError::Solver(format!(
                "CG diverged at iteration {} (residual is not finite)",
                report.iterations
            )));
        }
        if (rz_new.is_nan() || rz_new <= T::zero()) && residual > T::UNIT_ROUNDOFF.sqrt() {
            // r.M^-1 r <= 0 for r far from zero: M^-1 is not positive definite, and CG
            // without it would wander rather than fail.
            return Err(CoreError::Solver(format!(
                "CG breakdown at iteration {}: r.z = {:e} (the preconditioner {} is not positive definite)",
                report.iterations,
                rz_new.as_f64(),
                preconditioner.name()
            )));
        }
        let beta = rz_new / rz;
        rz = rz_new;
        backend.xpby(&z, beta, &mut p)?;
        report.residual_history.push(residual);
        let step = CgStep {
            iteration: report.iterations,
            alpha: alpha.as_f64(),
            beta: beta.as_f64(),
            relative_residual: residual,
        };
        if observer.as_mut().is_some_and(|observe| observe(&step) == Flow::Stop) {
            break;
        }
        if settings.true_residual_every > 0 && report.iterations % settings.true_residual_every == 0
        {
            // Monitor the drift of the recurrence; the recurrence itself is left alone
            // (replacing r would restart the Krylov space and slow convergence).
            let t = true_residual(backend, operator, rhs, x, &mut check, b_norm, &mut report)?;
            report.true_residual_checks.push((report.iterations, t));
            if t <= settings.tolerance {
                residual = residual.min(t);
                break;
            }
        }
    }
    let recurrence = residual;
    report.relative_residual =
        true_residual(backend, operator, rhs, x, &mut r, b_norm, &mut report)?;
    // Converged means the recurrence met the tolerance. The true residual is reported beside
    // it: in finite precision it stalls near u ||A|| ||x|| / ||b||, which for trace systems on
    // fine meshes (||b|| ~ h^2) lies above tight tolerances; a gap between the two says how
    // much of the requested accuracy the precision allows.
    report.converged = recurrence <= settings.tolerance && report.relative_residual.is_finite();
    Ok(report)
}

/// (Preconditioned) conjugate gradients with a relative-residual stopping test.
#[derive(Clone, Debug)]
pub struct ConjugateGradient {
    /// Stop when ||r|| / ||b|| <= tolerance.
    pub tolerance: f64,
    /// Give up after this many iterations (the report then says not converged).
    pub max_iterations: usize,
    /// Preconditioner.
    pub preconditioning: Preconditioning,
    /// Recompute the true residual every this many iterations (0: only at the end).
    pub true_residual_every: usize,
}

impl ConjugateGradient {
    /// CG with the given tolerance, at most `max_iterations` iterations, and a true-residual
    /// check every 100 iterations.
    pub fn new(tolerance: f64, max_iterations: usize, preconditioning: Preconditioning) -> Self {
        ConjugateGradient { tolerance, max_iterations, preconditioning, true_residual_every: 100 }
    }

    fn settings(&self) -> CgSettings {
        CgSettings {
            tolerance: self.tolerance,
            max_iterations: self.max_iterations,
            true_residual_every: self.true_residual_every,
        }
    }
}

impl<T: Real, B: FusedOps<T>> KrylovSolver<T, B> for ConjugateGradient {
    fn name(&self) -> String {
        match self.preconditioning {
            Preconditioning::None => "cg".into(),
            Preconditioning::Jacobi => "pcg-jacobi".into(),
        }
    }

    fn solve(
        &self,
        backend: &B,
        operator: &dyn TraceOperator<T, Vector = B::Vector>,
        rhs: &B::Vector,
        x: &mut B::Vector,
    ) -> Result<SolveReport> {
        check_tolerance(self.tolerance)?;
        let settings = self.settings();
        match self.preconditioning {
            Preconditioning::None => solve_cg(backend, operator, &Identity, rhs, x, &settings),
            Preconditioning::Jacobi => {
                let jacobi = Jacobi::new(backend, operator)?;
                solve_cg(backend, operator, &jacobi, rhs, x, &settings)
            }
        }
    }
}

/// CG with any preconditioner (block Jacobi, a Chebyshev polynomial, ...).
pub struct PreconditionedCg<P> {
    /// Settings.
    pub settings: CgSettings,
    /// The preconditioner.
    pub preconditioner: P,
}

impl<T: Real, B: FusedOps<T>, P: Preconditioner<T, B>> KrylovSolver<T, B> for PreconditionedCg<P> {
    fn name(&self) -> String {
        format!("pcg-{}", self.preconditioner.name())
    }
    fn solve(
        &self,
        backend: &B,
        operator: &dyn TraceOperator<T, Vector = B::Vector>,
        rhs: &B::Vector,
        x: &mut B::Vector,
    ) -> Result<SolveReport> {
        solve_cg(backend, operator, &self.preconditioner, rhs, x, &self.settings)
    }
}
