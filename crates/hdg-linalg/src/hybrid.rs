//! CG, then Chebyshev: a few CG steps both make progress and, through their coefficients,
//! estimate the spectrum of M^-1 A (the Lanczos connection); Chebyshev iteration then goes on
//! from the CG iterate with those bounds and needs no inner product between residual checks.
use hdg_core::{
    CoreError, FusedOps, KrylovSolver, Preconditioner, Real, Result, SolveReport, TraceOperator,
};

use crate::cg::{check_tolerance, run_cg, CgSettings, Flow};
use crate::chebyshev::{chebyshev_iteration, Chebyshev, Outcome};
use crate::spectrum::lanczos_from_cg;

/// CG for `cg_iterations` steps, then preconditioned Chebyshev iteration from the CG iterate
/// with bounds from the CG coefficients.
///
/// The Ritz values of the CG phase lie inside the spectrum of M^-1 A: lambda_max is
/// under-estimated (dangerous: Chebyshev diverges once the true lambda_max exceeds
/// lambda_max + lambda_min of the bounds used) and lambda_min over-estimated (harmless, only
/// slower). Hence `safety_max > 1` and `safety_min < 1`. Should Chebyshev diverge anyway, the
/// solver restores the CG iterate, doubles lambda_max and tries again, at most
/// `divergence_retries` times; every attempt's cost is in the report.
pub struct CgThenChebyshev<P> {
    /// CG steps of the first phase (>= 2; 20-30 resolve the extremes of trace systems of a few
    /// thousand unknowns well enough).
    pub cg_iterations: usize,
    /// Multiplies the Ritz lambda_max (e.g. 1.1; a factor below 1 is accepted but invites
    /// divergence, which the retries then repair at a cost).
    pub safety_max: f64,
    /// Multiplies the Ritz lambda_min (e.g. 0.8; must keep it positive and below lambda_max).
    pub safety_min: f64,
    /// Stop when ||r|| / ||b|| <= tolerance (both phases).
    pub tolerance: f64,
    /// Iterations of both phases together.
    pub max_iterations: usize,
    /// Residual check period of the Chebyshev phase.
    pub check_every: usize,
    /// How many times a diverging Chebyshev phase is restarted with lambda_max doubled.
    pub divergence_retries: usize,
    /// The preconditioner M of both phases.
    pub preconditioner: P,
}

impl<P> CgThenChebyshev<P> {
    /// The usual settings: 25 CG steps, safety factors 1.1 and 0.8, residual check every 10
    /// Chebyshev iterations, 2 retries.
    pub fn new(tolerance: f64, max_iterations: usize, preconditioner: P) -> Self {
        CgThenChebyshev {
            cg_iterations: 25,
            safety_max: 1.1,
            safety_min: 0.8,
            tolerance,
            max_iterations,
            check_every: 10,
            divergence_retries: 2,
            preconditioner,
        }
    }

    fn validate(&self) -> Result<()> {
        check_tolerance(self.tolerance)?;
        if self.cg_iterations < 2 {
            return Err(CoreError::InvalidParameter {
                name: "cg_iterations",
                reason: format!(
                    "{}: at least 2 CG steps are needed to estimate two bounds",
                    self.cg_iterations
                ),
            });
        }
        if !(self.safety_max.is_finite() && self.safety_max > 0.0) {
            return Err(CoreError::InvalidParameter {
                name: "safety_max",
                reason: format!("{} is not a finite positive factor", self.safety_max),
            });
        }
        if !(self.safety_min > 0.0 && self.safety_min <= 1.0) {
            return Err(CoreError::InvalidParameter {
                name: "safety_min",
                reason: format!("{} is not in (0, 1]", self.safety_min),
            });
        }
        Ok(())
    }
}

/// Adds the costs and histories of a later phase to `total`.
fn accumulate(total: &mut SolveReport, phase: &SolveReport) {
    let offset = total.iterations;
    total.iterations += phase.iterations;
    total.operator_applications += phase.operator_applications;
    total.reductions += phase.reductions;
    total.residual_history.extend_from_slice(&phase.residual_history);
    total
        .true_residual_checks
        .extend(phase.true_residual_checks.iter().map(|&(k, t)| (k + offset, t)));
    total.notes.extend(phase.notes.iter().cloned());
}

impl<T: Real, B: FusedOps<T>, P: Preconditioner<T, B>> KrylovSolver<T, B> for CgThenChebyshev<P> {
    fn name(&self) -> String {
        format!("cg{}-chebyshev-{}", self.cg_iterations, self.preconditioner.name())
    }

    fn solve(
        &self,
        backend: &B,
        operator: &dyn TraceOperator<T, Vector = B::Vector>,
        rhs: &B::Vector,
        x: &mut B::Vector,
    ) -> Result<SolveReport> {
        self.validate()?;
        let cg_settings = CgSettings {
            tolerance: self.tolerance,
            max_iterations: self.cg_iterations.min(self.max_iterations),
            true_residual_every: 0,
        };
        let mut steps = Vec::with_capacity(self.cg_iterations);
        let cg = run_cg(backend, operator, &self.preconditioner, rhs, x, &cg_settings, &mut |s| {
            steps.push(*s);
            Flow::Continue
        })?;
        let mut report = SolveReport::default();
        accumulate(&mut report, &cg);
        report.notes.push(format!(
            "phase 1: {} CG steps, relative residual {:e}",
            cg.iterations, cg.relative_residual
        ));
        report.relative_residual = cg.relative_residual;
        if cg.converged || report.iterations >= self.max_iterations || steps.len() < 2 {
            report.converged = cg.converged;
            report.notes.push("no Chebyshev phase (CG converged or no iterations left)".into());
            return Ok(report);
        }
        let (ritz_min, ritz_max) = lanczos_from_cg(&steps);
        let lambda_min = ritz_min * self.safety_min;
        let mut lambda_max = ritz_max * self.safety_max;
        report.notes.push(format!(
            "Ritz values of M^-1 A from CG: [{ritz_min:e}, {ritz_max:e}]; bounds used: [{lambda_min:e}, {lambda_max:e}] (safety {} / {})",
            self.safety_min, self.safety_max
        ));
        // The CG iterate, to restart from should Chebyshev diverge.
        let mut start = backend.zeros(operator.dim())?;
        backend.copy(x, &mut start)?;
        let mut attempt = 0;
        loop {
            let chebyshev = Chebyshev {
                lambda_min,
                lambda_max,
                tolerance: self.tolerance,
                max_iterations: self.max_iterations - report.iterations,
                check_every: self.check_every,
            };
            match chebyshev_iteration(backend, operator, &self.preconditioner, rhs, x, &chebyshev)?
            {
                Outcome::Done(phase) => {
                    accumulate(&mut report, &phase);
                    report.relative_residual = phase.relative_residual;
                    report.converged = phase.converged;
                    return Ok(report);
                }
                Outcome::Diverged(phase, message) => {
                    accumulate(&mut report, &phase);
                    if attempt >= self.divergence_retries
                        || report.iterations >= self.max_iterations
                    {
                        return Err(CoreError::Solver(format!(
                            "{message} (after {attempt} retr{} with lambda_max doubled)",
                            if attempt == 1 { "y" } else { "ies" }
                        )));
                    }
                    attempt += 1;
                    lambda_max *= 2.0;
                    backend.copy(&start, x)?;
                    report.notes.push(format!(
                        "retry {attempt}: restarted from the CG iterate with lambda_max = {lambda_max:e}"
                    ));
                }
            }
        }
    }
}
