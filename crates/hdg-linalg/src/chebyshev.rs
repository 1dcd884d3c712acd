//! Chebyshev iteration (the correct three-term recurrence) and the Chebyshev polynomial
//! preconditioner.
//!
//! Given bounds 0 < lambda_min < lambda_max on the spectrum of M^-1 A, Chebyshev iteration
//! builds the residual polynomial of least maximum on [lambda_min, lambda_max] without any inner
//! product: only the stopping test needs one, and [`Chebyshev::check_every`] decides how often
//! it is paid. The recurrence is the one of Gutknecht & Röllin (*Parallel Computing* 28, 2002,
//! doi 10.1016/S0167-8191(01)00139-9). With d = (lmax + lmin)/2 and c = (lmax - lmin)/2:
//!
//! ```text
//! alpha_1 = 1/d,  beta_2 = (c alpha_1)^2 / 2,  beta_k = (c alpha_{k-1} / 2)^2  (k >= 3),
//! alpha_k = 1 / (d - beta_k / alpha_{k-1}),
//! z_k = M^-1 r_k,  p_k = z_k + beta_k p_{k-1},  x += alpha_k p_k,  r -= alpha_k A p_k.
//! ```
//!
//! The "Templates" variant (SIAM Templates 1994, IML++ `cheby.h`) sets alpha_1 = 2/d and
//! alpha_k = 1/(d - beta_k): its coefficients lock into a heavy-ball/Richardson step whose
//! iteration count grows like kappa instead of sqrt(kappa). Do not "simplify" the update of
//! alpha back to it (the tests measure the difference).
use std::sync::Mutex;

use hdg_core::{
    CoreError, KrylovSolver, Preconditioner, Real, RecurrenceStep, Result, SolveReport,
    TraceOperator, VectorOps,
};

use crate::cg::{check_tolerance, rhs_norm, true_residual};

/// A checked residual this many times the initial one means the iteration diverges.
const DIVERGENCE_FACTOR: f64 = 1e3;

/// Settings of a Chebyshev iteration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Chebyshev {
    /// Lower bound on the spectrum of M^-1 A (> 0). An over-estimate only slows convergence.
    pub lambda_min: f64,
    /// Upper bound on the spectrum of M^-1 A. An under-estimate by more than lambda_min makes
    /// the iteration diverge (it is then reported as an error).
    pub lambda_max: f64,
    /// Stop when ||r|| / ||b|| <= tolerance (confirmed by a true residual).
    pub tolerance: f64,
    /// Give up after this many iterations (the report then says not converged).
    pub max_iterations: usize,
    /// Compute the residual norm (one reduction) every this many iterations (>= 1); the
    /// iterations in between need no reduction at all.
    pub check_every: usize,
}

/// Checks 0 < lambda_min < lambda_max, both finite.
pub(crate) fn check_bounds(lambda_min: f64, lambda_max: f64) -> Result<()> {
    if !(lambda_min.is_finite() && lambda_max.is_finite() && lambda_min > 0.0)
        || lambda_min >= lambda_max
    {
        return Err(CoreError::InvalidParameter {
            name: "eigenvalue bounds",
            reason: format!(
                "need finite 0 < lambda_min < lambda_max, got [{lambda_min:e}, {lambda_max:e}]"
            ),
        });
    }
    Ok(())
}

impl Chebyshev {
    /// Validates the settings: bounds, tolerance, `check_every >= 1`.
    pub fn validate(&self) -> Result<()> {
        check_bounds(self.lambda_min, self.lambda_max)?;
        check_tolerance(self.tolerance)?;
        if self.check_every == 0 {
            return Err(CoreError::InvalidParameter {
                name: "check_every",
                reason: "must be at least 1".into(),
            });
        }
        Ok(())
    }
}

/// The Chebyshev coefficients (alpha_k, beta_k) of the correct recurrence, one step at a time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Coefficients {
    d: f64,
    c: f64,
    k: usize,
    alpha: f64,
}

impl Coefficients {
    pub(crate) fn new(lambda_min: f64, lambda_max: f64) -> Self {
        Coefficients {
            d: 0.5 * (lambda_max + lambda_min),
            c: 0.5 * (lambda_max - lambda_min),
            k: 0,
            alpha: 0.0,
        }
    }

    /// (alpha_k, beta_k) of the next step; beta_1 = 0 (p_1 = z_1).
    pub(crate) fn next(&mut self) -> (f64, f64) {
        self.k += 1;
        let beta = match self.k {
            1 => 0.0,
            2 => 0.5 * (self.c * self.alpha).powi(2),
            _ => (0.5 * self.c * self.alpha).powi(2),
        };
        self.alpha = if self.k == 1 { 1.0 / self.d } else { 1.0 / (self.d - beta / self.alpha) };
        (self.alpha, beta)
    }
}

/// How an iteration ended: normally, or by divergence (the report so far is kept so that a
/// caller that retries can account for the work).
pub(crate) enum Outcome {
    /// Converged or ran out of iterations.
    Done(SolveReport),
    /// A checked residual exceeded [`DIVERGENCE_FACTOR`] x the initial one, or was not finite.
    Diverged(SolveReport, String),
}

/// The Chebyshev iteration; divergence is an [`Outcome`], not an error.
pub(crate) fn chebyshev_iteration<T: Real, B: VectorOps<T>>(
    backend: &B,
    operator: &dyn TraceOperator<T, Vector = B::Vector>,
    preconditioner: &dyn Preconditioner<T, B>,
    rhs: &B::Vector,
    x: &mut B::Vector,
    settings: &Chebyshev,
) -> Result<Outcome> {
    settings.validate()?;
    let n = operator.dim();
    let mut report = SolveReport::default();
    let b_norm = rhs_norm(backend, operator, rhs, x, &mut report)?;
    if b_norm == 0.0 {
        backend.scale(T::zero(), x)?;
        report.converged = true;
        return Ok(Outcome::Done(report));
    }
    let mut r = backend.zeros(n)?;
    let initial = true_residual(backend, operator, rhs, x, &mut r, b_norm, &mut report)?;
    if !initial.is_finite() {
        return Err(CoreError::Solver(
            "Chebyshev: the initial residual is not finite (initial guess contains NaN?)".into(),
        ));
    }
    if initial <= settings.tolerance {
        report.relative_residual = initial;
        report.converged = true;
        return Ok(Outcome::Done(report));
    }
    let mut z = backend.zeros(n)?;
    let mut p = backend.zeros(n)?;
    let mut ap = backend.zeros(n)?;
    let mut coefficients = Coefficients::new(settings.lambda_min, settings.lambda_max);
    // The true residual last computed at the current iterate, if any (saves the final one).
    let mut confirmed: Option<f64> = None;
    while report.iterations < settings.max_iterations {
        preconditioner.apply(backend, &r, &mut z)?;
        report.operator_applications += preconditioner.operator_applications();
        report.reductions += preconditioner.reductions();
        let (alpha, beta) = coefficients.next();
        if report.iterations == 0 {
            backend.copy(&z, &mut p)?;
        } else {
            backend.xpby(&z, T::from_f64_lossy(beta), &mut p)?;
        }
        backend.axpy(T::from_f64_lossy(alpha), &p, x)?;
        operator.apply(&p, &mut ap)?;
        report.operator_applications += 1;
        backend.axpy(T::from_f64_lossy(-alpha), &ap, &mut r)?;
        report.iterations += 1;
        confirmed = None;
        let k = report.iterations;
        if k % settings.check_every != 0 && k != settings.max_iterations {
            continue;
        }
        let residual = backend.dot(&r, &r)?.as_f64().sqrt() / b_norm;
        report.reductions += 1;
        report.residual_history.push(residual);
        hdg_core::pipeline::iteration(k, residual);
        if !residual.is_finite() || residual > DIVERGENCE_FACTOR * initial {
            let message = format!(
                "Chebyshev diverged at iteration {k}: relative residual {residual:e} against {initial:e} at the start; the eigenvalue bounds [{:e}, {:e}] are probably wrong (lambda_max under-estimated)",
                settings.lambda_min, settings.lambda_max
            );
            report.relative_residual = residual;
            report.notes.push(message.clone());
            return Ok(Outcome::Diverged(report, message));
        }
        if residual <= settings.tolerance {
            // Confirm with the true residual; on drift, restart the recurrence residual from
            // it (Chebyshev has no orthogonality to lose, so this costs no convergence).
            let t = true_residual(backend, operator, rhs, x, &mut z, b_norm, &mut report)?;
            report.true_residual_checks.push((k, t));
            confirmed = Some(t);
            if t <= settings.tolerance {
                break;
            }
            backend.copy(&z, &mut r)?;
        }
    }
    report.relative_residual = match confirmed {
        Some(t) => t,
        None => true_residual(backend, operator, rhs, x, &mut r, b_norm, &mut report)?,
    };
    report.converged = report.relative_residual <= settings.tolerance;
    report.notes.push(format!(
        "chebyshev bounds [{:e}, {:e}], residual checked every {} iteration(s)",
        settings.lambda_min, settings.lambda_max, settings.check_every
    ));
    Ok(Outcome::Done(report))
}

/// Preconditioned Chebyshev iteration on A x = rhs from the initial guess in `x`, with the
/// bounds of `settings` taken as bounds on the spectrum of M^-1 A (z = M^-1 r).
///
/// The residual norm is computed only every `check_every` iterations (and at the last one); a
/// recurrence residual below the tolerance is confirmed by a true residual. Reductions are
/// counted as they happen: ||b||, the initial and final true residuals, the checks, and what the
/// preconditioner reports. Errors: invalid bounds or tolerance ([`CoreError::InvalidParameter`]);
/// a checked residual above 1e3 x the initial one or not finite ([`CoreError::Solver`]: the
/// bounds are probably wrong, lambda_max under-estimated). Running out of iterations is not
/// an error: the report says `converged = false`.
pub fn run_chebyshev<T: Real, B: VectorOps<T>>(
    backend: &B,
    operator: &dyn TraceOperator<T, Vector = B::Vector>,
    preconditioner: &dyn Preconditioner<T, B>,
    rhs: &B::Vector,
    x: &mut B::Vector,
    settings: &Chebyshev,
) -> Result<SolveReport> {
    match chebyshev_iteration(backend, operator, preconditioner, rhs, x, settings)? {
        Outcome::Done(report) => Ok(report),
        Outcome::Diverged(_, message) => Err(CoreError::Solver(message)),
    }
}

/// Iterations that Chebyshev iteration with exact bounds needs in theory to reduce the residual
/// by `eps`: ceil(ln(2/eps) / ln(1/q)), q = (sqrt(kappa) - 1)/(sqrt(kappa) + 1),
/// kappa = lambda_max / lambda_min (from the bound 2 q^k / (1 + q^2k) on the residual
/// polynomial). Returns `usize::MAX` for invalid input.
pub fn theoretical_iterations(lambda_min: f64, lambda_max: f64, eps: f64) -> usize {
    if check_bounds(lambda_min, lambda_max).is_err() || !(eps > 0.0 && eps < 1.0) {
        return usize::MAX;
    }
    let s = (lambda_max / lambda_min).sqrt();
    let q = (s - 1.0) / (s + 1.0);
    ((2.0 / eps).ln() / (1.0 / q).ln()).ceil() as usize
}

/// Chebyshev iteration as a [`KrylovSolver`], with its preconditioner (the bounds in
/// `chebyshev` are bounds on the spectrum of M^-1 A).
pub struct ChebyshevSolver<P> {
    /// Bounds, tolerance, iteration limits.
    pub chebyshev: Chebyshev,
    /// The preconditioner M.
    pub preconditioner: P,
}

impl<T: Real, B: VectorOps<T>, P: Preconditioner<T, B>> KrylovSolver<T, B> for ChebyshevSolver<P> {
    fn name(&self) -> String {
        format!("chebyshev-{}", self.preconditioner.name())
    }
    fn solve(
        &self,
        backend: &B,
        operator: &dyn TraceOperator<T, Vector = B::Vector>,
        rhs: &B::Vector,
        x: &mut B::Vector,
    ) -> Result<SolveReport> {
        run_chebyshev(backend, operator, &self.preconditioner, rhs, x, &self.chebyshev)
    }
}

/// A fixed Chebyshev polynomial in M^-1 A as a preconditioner: z = s(M^-1 A) M^-1 r, the
/// result of `degree` steps of Chebyshev iteration on A z = r from z = 0 with the given bounds
/// and no residual check.
///
/// Why it is a valid CG preconditioner: s(M^-1 A) M^-1 = M^-1/2 s(M^-1/2 A M^-1/2) M^-1/2 is
/// symmetric, it is the same linear map at every call (fixed coefficients, no inner products),
/// and it is positive definite because s(l) = (1 - q(l))/l > 0 where |q(l)| < 1, with q the
/// Chebyshev residual polynomial: on all of (0, lambda_max + lambda_min). So lambda_max may be
/// under-estimated by up to lambda_min, and lambda_min may be anything in (0, lambda_max) (it
/// only shapes the polynomial); a safe choice is a Gershgorin upper bound.
///
/// It needs the operator, which the [`Preconditioner`] interface does not pass: it holds a
/// reference to it (so it lives no longer than the operator), and a workspace of four vectors,
/// allocated on the first call and reused (behind a mutex, so the preconditioner stays `Sync`).
/// One call costs `degree - 1` operator applications (the residual after the last step is not
/// needed) plus `degree` applications of the inner preconditioner, and no reduction.
pub struct ChebyshevPreconditioner<'a, T: Real, V, P> {
    /// Number of Chebyshev steps (the degree of the residual polynomial; z is a polynomial of
    /// degree `degree - 1` in M^-1 A applied to M^-1 r).
    pub degree: usize,
    /// Lower end of the interval the polynomial is built on.
    pub lambda_min: f64,
    /// Upper end of the interval (bound on the spectrum of M^-1 A).
    pub lambda_max: f64,
    /// The inner preconditioner M.
    pub inner: P,
    operator: &'a dyn TraceOperator<T, Vector = V>,
    workspace: Mutex<Option<[V; 4]>>,
}

impl<'a, T: Real, V, P> ChebyshevPreconditioner<'a, T, V, P> {
    /// A Chebyshev polynomial preconditioner of `degree` steps (>= 1) for `operator`, with
    /// bounds on the spectrum of M^-1 A (M = `inner`).
    pub fn new(
        operator: &'a dyn TraceOperator<T, Vector = V>,
        inner: P,
        degree: usize,
        lambda_min: f64,
        lambda_max: f64,
    ) -> Result<Self> {
        check_bounds(lambda_min, lambda_max)?;
        if degree == 0 {
            return Err(CoreError::InvalidParameter {
                name: "Chebyshev preconditioner degree",
                reason: "must be at least 1".into(),
            });
        }
        Ok(ChebyshevPreconditioner {
            degree,
            lambda_min,
            lambda_max,
            inner,
            operator,
            workspace: Mutex::new(None),
        })
    }
}

impl<T: Real, B: VectorOps<T>, P: Preconditioner<T, B>> Preconditioner<T, B>
    for ChebyshevPreconditioner<'_, T, B::Vector, P>
{
    fn name(&self) -> String {
        format!("chebyshev{}-{}", self.degree, self.inner.name())
    }

    fn apply(&self, backend: &B, r: &B::Vector, z: &mut B::Vector) -> Result<()> {
        check_bounds(self.lambda_min, self.lambda_max)?;
        let n = backend.len(r);
        let taken = self
            .workspace
            .lock()
            .map_err(|_| CoreError::Solver("Chebyshev preconditioner workspace poisoned".into()))?
            .take();
        let mut work = match taken {
            Some(w) if backend.len(&w[0]) == n => w,
            _ => [backend.zeros(n)?, backend.zeros(n)?, backend.zeros(n)?, backend.zeros(n)?],
        };
        let [res, w, p, ap] = &mut work;
        let polynomial = SmoothingPolynomial {
            degree: self.degree,
            lambda_min: self.lambda_min,
            lambda_max: self.lambda_max,
        };
        polynomial.apply(backend, self.operator, &self.inner, [res, w, p, ap], r, z)?;
        if let Ok(mut slot) = self.workspace.lock() {
            *slot = Some(work);
        }
        Ok(())
    }

    fn operator_applications(&self) -> usize {
        self.degree - 1 + self.degree * self.inner.operator_applications()
    }

    fn reductions(&self) -> usize {
        self.degree * self.inner.reductions()
    }
}

/// The fixed Chebyshev polynomial z = s(M^-1 A) M^-1 r of [`ChebyshevPreconditioner`], also
/// the smoother of every multigrid level: `degree` steps of Chebyshev iteration on A z = r from
/// z = 0 on [lambda_min, lambda_max], with no inner product.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SmoothingPolynomial {
    /// Steps (>= 1).
    pub degree: usize,
    /// Lower end of the interval.
    pub lambda_min: f64,
    /// Upper end of the interval (a bound on the spectrum of M^-1 A).
    pub lambda_max: f64,
}

impl SmoothingPolynomial {
    /// z = s(M^-1 A) M^-1 r, with `work` four vectors of r's length (overwritten). Costs
    /// `degree` applications of `inner` and `degree - 1` of `operator`. Each step's
    /// preconditioning and recurrence update go through [`Preconditioner::apply_step`], and
    /// the residual update r -= alpha A p through [`product_update`]: one pass each where the
    /// backend fuses them, the same bits either way.
    pub(crate) fn apply<T: Real, B: VectorOps<T>>(
        &self,
        backend: &B,
        operator: &dyn TraceOperator<T, Vector = B::Vector>,
        inner: &dyn Preconditioner<T, B>,
        work: [&mut B::Vector; 4],
        r: &B::Vector,
        z: &mut B::Vector,
    ) -> Result<()> {
        let [res, w, p, ap] = work;
        let mut coefficients = Coefficients::new(self.lambda_min, self.lambda_max);
        for k in 1..=self.degree {
            let (alpha, beta) = coefficients.next();
            let alpha = T::from_f64_lossy(alpha);
            // The first step's residual is r itself, and p and z start at 0.
            let (residual, step) = match k {
                1 => (r, RecurrenceStep::First { alpha }),
                _ => (&*res, RecurrenceStep::Next { alpha, beta: T::from_f64_lossy(beta) }),
            };
            inner.apply_step(backend, residual, w, step, p, z)?;
            if k < self.degree {
                // res = r - alpha A p on the first step, res -= alpha A p after.
                let b = if k == 1 { Some(r) } else { None };
                product_update(backend, operator, -alpha, p, b, res, ap)?;
            }
        }
        Ok(())
    }
}

/// y = b + alpha A x (y += alpha A x without `b`): the operator's fused product where it has
/// one ([`TraceOperator::apply_update`]), else the product into `scratch` and a vector update
/// (`copy` and `axpy`, or `xpby` when alpha = -1, which needs no copy), with the same bits.
pub(crate) fn product_update<T: Real, B: VectorOps<T>>(
    backend: &B,
    operator: &dyn TraceOperator<T, Vector = B::Vector>,
    alpha: T,
    x: &B::Vector,
    b: Option<&B::Vector>,
    y: &mut B::Vector,
    scratch: &mut B::Vector,
) -> Result<()> {
    if operator.fuses_update() {
        return operator.apply_update(alpha, x, b, y);
    }
    match b {
        // b - A x: the product straight into y, then y = b + (-1) y.
        Some(b) if alpha == -T::one() => {
            operator.apply(x, y)?;
            backend.xpby(b, alpha, y)
        }
        Some(b) => {
            operator.apply(x, scratch)?;
            backend.copy(b, y)?;
            backend.axpy(alpha, scratch, y)
        }
        None => {
            operator.apply(x, scratch)?;
            backend.axpy(alpha, scratch, y)
        }
    }
}
