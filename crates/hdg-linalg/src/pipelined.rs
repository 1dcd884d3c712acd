//! Pipelined preconditioned conjugate gradients (Ghysels & Vanroose, "Hiding global
//! synchronization latency in the preconditioned conjugate gradient algorithm", Parallel
//! Computing 40, 2014: algorithm "PIPECG").
//!
//! Plain PCG needs two global reduction phases per iteration (p.Ap, then r.z), each a full
//! synchronisation of the device or of the ranks. The pipelined variant carries the extra
//! recurrences w = A u, s = A p, q = M^-1 s, z = A q so that all the dots an iteration needs
//! (gamma = r.u, delta = w.u, and r.r for the stopping test) are taken at one point, through
//! one [`FusedOps::dot_many`] call, independent of the operator and preconditioner
//! application that follow; with an asynchronous reduction the two would overlap. The price is
//! four more vectors, more vector updates, and a larger gap between the recurrence and the
//! true residual (rounding errors in the extra recurrences), which this implementation
//! monitors with true-residual checks and, if the recurrence claims convergence the true
//! residual does not confirm, closes by restarting from the current iterate.
use hdg_core::{
    CoreError, FusedOps, KrylovSolver, Preconditioner, Real, Result, SolveReport, TraceOperator,
};

use crate::cg::{check_tolerance, rhs_norm, true_residual};

/// How many times a solve restarts when the recurrence has met the tolerance but the true
/// residual has not (the residual gap of pipelined CG). Each restart recomputes r, u, w from
/// the current iterate, which removes the accumulated gap.
const MAX_GAP_RESTARTS: usize = 3;

/// Pipelined preconditioned CG: one global reduction phase per iteration.
///
/// Stops when the recurrence's ||r|| / ||b|| <= `tolerance`; the reported
/// `relative_residual` is the true one, recomputed at the end. The report's `reductions`
/// counts each fused [`FusedOps::dot_many`] once, so a solve of k iterations costs k + O(1)
/// reduction phases (plain CG needs two phases per iteration, p.Ap and
/// r.z; [`crate::run_cg`] counts three: p.Ap, r.r fused in the update, r.z).
///
/// If the recurrence meets the tolerance but the true residual does not (the residual gap of
/// the pipelined recurrences), the iteration restarts from the current x, at most 3 times, each
/// restart noted in the report; the iterations of all restarts count.
#[derive(Clone, Debug)]
pub struct PipelinedCg<P> {
    /// Stop when ||r|| / ||b|| <= tolerance (in (0, 1)).
    pub tolerance: f64,
    /// Give up after this many iterations (the report then says not converged).
    pub max_iterations: usize,
    /// Recompute the true residual b - A x every this many iterations (0: only at the end);
    /// each check is recorded, and a true residual below the tolerance ends the solve.
    pub true_residual_every: usize,
    /// The preconditioner M (must be SPD).
    pub preconditioner: P,
}

impl<P> PipelinedCg<P> {
    /// Pipelined CG with the given tolerance, iteration cap and preconditioner, and a
    /// true-residual check every 100 iterations.
    pub fn new(tolerance: f64, max_iterations: usize, preconditioner: P) -> Self {
        PipelinedCg { tolerance, max_iterations, true_residual_every: 100, preconditioner }
    }
}

/// The work vectors of the pipelined recurrences.
struct State<V> {
    r: V,
    u: V,
    w: V,
    m: V,
    n: V,
    z: V,
    q: V,
    s: V,
    p: V,
}

impl<T: Real, B: FusedOps<T>, P: Preconditioner<T, B>> KrylovSolver<T, B> for PipelinedCg<P> {
    fn name(&self) -> String {
        format!("pipelined-cg-{}", self.preconditioner.name())
    }

    fn solve(
        &self,
        backend: &B,
        operator: &dyn TraceOperator<T, Vector = B::Vector>,
        rhs: &B::Vector,
        x: &mut B::Vector,
    ) -> Result<SolveReport> {
        check_tolerance(self.tolerance)?;
        let dim = operator.dim();
        let mut report = SolveReport::default();
        let b_norm = rhs_norm(backend, operator, rhs, x, &mut report)?;
        if b_norm == 0.0 {
            backend.scale(T::zero(), x)?;
            report.converged = true;
            return Ok(report);
        }
        let precond = &self.preconditioner;
        let count_precond = |report: &mut SolveReport| {
            report.operator_applications += precond.operator_applications();
            report.reductions += precond.reductions();
        };
        let mut st = State {
            r: backend.zeros(dim)?,
            u: backend.zeros(dim)?,
            w: backend.zeros(dim)?,
            m: backend.zeros(dim)?,
            n: backend.zeros(dim)?,
            z: backend.zeros(dim)?,
            q: backend.zeros(dim)?,
            s: backend.zeros(dim)?,
            p: backend.zeros(dim)?,
        };
        let mut check = backend.zeros(dim)?;
        let mut restarts = 0;
        'restart: loop {
            // r = b - A x, u = M^-1 r, w = A u. The norm of the initial residual comes with the
            // first fused dot below, so the residual is formed without a reduction of its own.
            operator.apply(x, &mut st.r)?;
            backend.xpby(rhs, -T::one(), &mut st.r)?;
            report.operator_applications += 1;
            precond.apply(backend, &st.r, &mut st.u)?;
            count_precond(&mut report);
            operator.apply(&st.u, &mut st.w)?;
            report.operator_applications += 1;
            let mut gamma_old = T::zero();
            let mut alpha_old = T::zero();
            let mut first = true;
            let recurrence = loop {
                // The one global reduction phase of the iteration.
                let dots = backend.dot_many(&[(&st.r, &st.u), (&st.w, &st.u), (&st.r, &st.r)])?;
                report.reductions += 1;
                let (gamma, delta) = (dots[0], dots[1]);
                let recurrence = dots[2].as_f64().max(0.0).sqrt() / b_norm;
                if !first {
                    report.residual_history.push(recurrence);
                    hdg_core::pipeline::iteration(report.iterations, recurrence);
                }
                if !recurrence.is_finite() || !gamma.as_f64().is_finite() {
                    return Err(CoreError::Solver(format!(
                        "pipelined CG diverged at iteration {} (residual is not finite)",
                        report.iterations
                    )));
                }
                if !first
                    && self.true_residual_every > 0
                    && report.iterations % self.true_residual_every == 0
                {
                    let t =
                        true_residual(backend, operator, rhs, x, &mut check, b_norm, &mut report)?;
                    report.true_residual_checks.push((report.iterations, t));
                    if t <= self.tolerance {
                        report.relative_residual = t;
                        break 'restart;
                    }
                }
                if recurrence <= self.tolerance || report.iterations >= self.max_iterations {
                    break recurrence;
                }
                // In exact arithmetic: gamma = r.M^-1 r > 0 and delta - beta gamma / alpha_old
                // = p.Ap > 0 for SPD A and M; anything else is a breakdown.
                if gamma.is_nan() || gamma <= T::zero() {
                    return Err(CoreError::Solver(format!(
                        "pipelined CG breakdown at iteration {}: r.M^-1 r = {:e} (the preconditioner is not positive definite)",
                        report.iterations + 1,
                        gamma.as_f64()
                    )));
                }
                // m = M^-1 w, n = A m: the work the reduction above would overlap with.
                precond.apply(backend, &st.w, &mut st.m)?;
                count_precond(&mut report);
                operator.apply(&st.m, &mut st.n)?;
                report.operator_applications += 1;
                let (alpha, beta) = if first {
                    (gamma / delta, T::zero())
                } else {
                    let beta = gamma / gamma_old;
                    (gamma / (delta - beta * gamma / alpha_old), beta)
                };
                let pap = gamma / alpha;
                if pap <= T::zero() && recurrence <= T::UNIT_ROUNDOFF.sqrt() {
                    // Deep in convergence the recurrences carry rounding noise only: a sign
                    // flip there is stagnation at the attainable accuracy, not indefiniteness.
                    report.notes.push(format!(
                        "stagnated at iteration {} (p.Ap = {:e} at recurrence residual {recurrence:.2e}): the attainable accuracy of this precision",
                        report.iterations + 1,
                        pap.as_f64()
                    ));
                    break recurrence;
                }
                if pap <= T::zero() && restarts < MAX_GAP_RESTARTS && !first {
                    // The pipelined recurrences lose accuracy over long runs (Ghysels &
                    // Vanroose; Cools et al.): p.Ap formed from them can turn negative while
                    // the operator is SPD. Restart from the current iterate, which recomputes
                    // every vector from scratch; a breakdown right after a restart is real.
                    restarts += 1;
                    report.notes.push(format!(
                        "restart {restarts} at iteration {}: recurrence p.Ap = {:e} (lost accuracy) at residual {recurrence:.3e}",
                        report.iterations + 1,
                        pap.as_f64()
                    ));
                    continue 'restart;
                }
                if !pap.as_f64().is_finite() || pap <= T::zero() {
                    return Err(CoreError::Solver(format!(
                        "pipelined CG breakdown at iteration {}: p.Ap = {:e} (the operator or the preconditioner is not positive definite)",
                        report.iterations + 1,
                        pap.as_f64()
                    )));
                }
                // z = n + beta z, q = m + beta q, s = w + beta s, p = u + beta p.
                backend.xpby(&st.n, beta, &mut st.z)?;
                backend.xpby(&st.m, beta, &mut st.q)?;
                backend.xpby(&st.w, beta, &mut st.s)?;
                backend.xpby(&st.u, beta, &mut st.p)?;
                // x += alpha p, r -= alpha s, u -= alpha q, w -= alpha z.
                backend.axpy(alpha, &st.p, x)?;
                backend.axpy(-alpha, &st.s, &mut st.r)?;
                backend.axpy(-alpha, &st.q, &mut st.u)?;
                backend.axpy(-alpha, &st.z, &mut st.w)?;
                gamma_old = gamma;
                alpha_old = alpha;
                first = false;
                report.iterations += 1;
            };
            // The recurrence says converged (or the cap is hit): confirm with the true residual.
            report.relative_residual =
                true_residual(backend, operator, rhs, x, &mut check, b_norm, &mut report)?;
            if recurrence <= self.tolerance
                && report.relative_residual > self.tolerance
                && restarts < MAX_GAP_RESTARTS
                && report.iterations < self.max_iterations
            {
                restarts += 1;
                report.notes.push(format!(
                    "restart {restarts} at iteration {}: recurrence {recurrence:.3e}, true residual {:.3e}",
                    report.iterations, report.relative_residual
                ));
                // Fresh recurrences from the current iterate (p, s, q, z restart at zero since
                // beta = 0 on the first step).
                continue 'restart;
            }
            report.converged = recurrence <= self.tolerance && report.relative_residual.is_finite();
            return Ok(report);
        }
        // Ended by a periodic true-residual check below the tolerance: that check is the final
        // true residual (x has not moved since).
        report.converged = true;
        Ok(report)
    }
}
