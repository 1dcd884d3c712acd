//! Restarted GMRES(m) with right preconditioning, for operators that are not symmetric.
//!
//! Right preconditioning (solve A M^-1 y = b, x = M^-1 y) keeps the residual that GMRES
//! minimises the true residual b - A x, so the stopping test and the report speak of the same
//! quantity for every preconditioner.
//!
//! Orthogonalisation is classical Gram-Schmidt with one full reorthogonalisation (CGS2,
//! "twice is enough": Giraud, Langou & Rozložník 2005), not modified Gram-Schmidt: MGS takes
//! its j + 1 dots one after the other (j + 2 reduction phases at step j), CGS2 takes them in two
//! fused [`VectorOps::dot_many`] phases whatever j, and is as accurate as MGS for the basis.
//! The norm of the new basis vector rides in the second phase (Pythagoras on the tiny
//! reorthogonalisation coefficients); only when that subtraction would lose digits is a third,
//! explicit norm taken. The Hessenberg matrix, the Givens rotations and the small triangular
//! solve live on the host in f64; the basis vectors stay on the backend.
use hdg_core::{
    CoreError, FusedOps, KrylovSolver, Preconditioner, Real, Result, SolveReport, TraceOperator,
};

use crate::cg::{check_tolerance, rhs_norm, true_residual};

/// A restart cycle that did not reduce the true residual by this factor, measured over two
/// full cycles, counts as stagnation.
const STAGNATION_FACTOR: f64 = 1.0 - 1e-12;

/// A new Hessenberg column whose part outside the current basis is below this fraction of
/// ||A M^-1 v_j|| counts as lying in the basis (exactly or to rounding).
const DEPENDENCE_THRESHOLD: f64 = 1e-13;

/// Restarted GMRES(m) with right preconditioning.
///
/// Each cycle starts from the true residual r = b - A x (recorded in
/// `true_residual_checks`), builds up to `restart` Arnoldi vectors and minimises the residual
/// over them; the per-iteration `residual_history` is the estimate the Givens rotations give.
/// The solve stops when a true residual meets the tolerance (`converged`), when
/// `max_iterations` Arnoldi steps are spent, or when two full cycles in a row failed to reduce
/// the true residual by a factor (1 - 1e-12) (stagnation: a singular or inconsistent system,
/// or a restart length too short for the operator; `converged` is false and a note says why).
///
/// Cost per Arnoldi step: one operator and one preconditioner application, two fused
/// reduction phases (three when the second Gram-Schmidt pass removed much); per cycle, one
/// more of each for the true residual and one preconditioner application for the update.
#[derive(Clone, Debug)]
pub struct Gmres<P> {
    /// Krylov basis size before a restart (m >= 1; memory: m + 2 backend vectors).
    pub restart: usize,
    /// Stop when the true ||b - A x|| / ||b|| <= tolerance (in (0, 1)).
    pub tolerance: f64,
    /// Give up after this many Arnoldi steps in total (the report then says not converged).
    pub max_iterations: usize,
    /// The right preconditioner M (any nonsingular operator; it need not be symmetric).
    pub preconditioner: P,
}

impl<P> Gmres<P> {
    /// GMRES(`restart`) with the given tolerance, iteration cap and right preconditioner.
    pub fn new(restart: usize, tolerance: f64, max_iterations: usize, preconditioner: P) -> Self {
        Gmres { restart, tolerance, max_iterations, preconditioner }
    }
}

/// The Givens rotation (c, s) with [c s; -s c] [a; b] = [r; 0], r = hypot(a, b) >= 0.
fn givens(a: f64, b: f64) -> (f64, f64, f64) {
    if b == 0.0 {
        // Still a sign flip if a < 0: the diagonal of R stays nonnegative, so its size is a
        // plain comparison.
        (if a < 0.0 { -1.0 } else { 1.0 }, 0.0, a.abs())
    } else {
        let r = a.hypot(b);
        (a / r, b / r, r)
    }
}

/// `[w . v_0, ..., w . v_j, w . w]` in one reduction phase.
fn fused_dots<T: Real, B: FusedOps<T>>(
    backend: &B,
    basis: &[B::Vector],
    w: &B::Vector,
) -> Result<Vec<T>> {
    let mut pairs: Vec<(&B::Vector, &B::Vector)> = basis.iter().map(|v| (w, v)).collect();
    pairs.push((w, w));
    backend.dot_many(&pairs)
}

impl<T: Real, B: FusedOps<T>, P: Preconditioner<T, B>> KrylovSolver<T, B> for Gmres<P> {
    fn name(&self) -> String {
        format!("gmres({})-{}", self.restart, self.preconditioner.name())
    }

    fn solve(
        &self,
        backend: &B,
        operator: &dyn TraceOperator<T, Vector = B::Vector>,
        rhs: &B::Vector,
        x: &mut B::Vector,
    ) -> Result<SolveReport> {
        check_tolerance(self.tolerance)?;
        if self.restart == 0 {
            return Err(CoreError::InvalidParameter {
                name: "restart",
                reason: "GMRES needs a basis of at least one vector".into(),
            });
        }
        let dim = operator.dim();
        let m = self.restart;
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
        let basis: Result<Vec<B::Vector>> = (0..m).map(|_| backend.zeros(dim)).collect();
        let mut basis = basis?;
        let mut w = backend.zeros(dim)?;
        let mut z = backend.zeros(dim)?;
        // Column-major Hessenberg, after rotation: r[j] holds column j (j + 2 entries).
        let mut hess: Vec<Vec<f64>> = vec![Vec::new(); m];
        let mut rotations: Vec<(f64, f64)> = vec![(1.0, 0.0); m];
        let mut g = vec![0.0; m + 1];
        // True residual at the start of each cycle (the last one is the final residual).
        let mut cycle_residuals: Vec<f64> = Vec::new();
        let mut cycles = 0usize;
        loop {
            let residual =
                true_residual(backend, operator, rhs, x, &mut basis[0], b_norm, &mut report)?;
            if !residual.is_finite() {
                return Err(CoreError::Solver(format!(
                    "GMRES diverged at iteration {} (residual is not finite)",
                    report.iterations
                )));
            }
            report.true_residual_checks.push((report.iterations, residual));
            report.relative_residual = residual;
            cycle_residuals.push(residual);
            if residual <= self.tolerance {
                report.converged = true;
                break;
            }
            if report.iterations >= self.max_iterations {
                break;
            }
            let c = cycle_residuals.len();
            if c >= 3 && residual > STAGNATION_FACTOR * cycle_residuals[c - 3] {
                report.notes.push(format!(
                    "stagnation: the true residual went from {:.6e} to {:.6e} over the last two restart cycles (singular or inconsistent system, or restart length {m} too short)",
                    cycle_residuals[c - 3], residual
                ));
                break;
            }
            cycles += 1;
            // v_0 = r / ||r||.
            let beta = residual * b_norm;
            backend.scale(T::from_f64_lossy(1.0 / beta), &mut basis[0])?;
            g.iter_mut().for_each(|v| *v = 0.0);
            g[0] = beta;
            let mut k = 0; // columns of the least-squares problem
            let mut estimate = residual;
            for j in 0..m {
                // w = A M^-1 v_j.
                precond.apply(backend, &basis[j], &mut z)?;
                count_precond(&mut report);
                operator.apply(&z, &mut w)?;
                report.operator_applications += 1;
                report.iterations += 1;
                // First Gram-Schmidt pass, with ||w||^2 (the scale of the column) fused in.
                let dots = fused_dots(backend, &basis[..=j], &w)?;
                report.reductions += 1;
                let scale = dots[j + 1].as_f64().max(0.0).sqrt();
                let mut h: Vec<f64> = dots[..=j].iter().map(|d| d.as_f64()).collect();
                for (i, v) in basis[..=j].iter().enumerate() {
                    backend.axpy(T::from_f64_lossy(-h[i]), v, &mut w)?;
                }
                // Second pass (reorthogonalisation), with ||w||^2 after the first pass.
                let dots = fused_dots(backend, &basis[..=j], &w)?;
                report.reductions += 1;
                let w1_sq = dots[j + 1].as_f64();
                let mut h2_sq = 0.0;
                for (i, v) in basis[..=j].iter().enumerate() {
                    let c = dots[i].as_f64();
                    h[i] += c;
                    h2_sq += c * c;
                    backend.axpy(T::from_f64_lossy(-c), v, &mut w)?;
                }
                let mut next_sq = w1_sq - h2_sq;
                if next_sq < 0.25 * w1_sq {
                    // The second pass removed a large part: Pythagoras would cancel, measure.
                    next_sq = backend.dot(&w, &w)?.as_f64();
                    report.reductions += 1;
                }
                let h_next = next_sq.max(0.0).sqrt();
                if !(scale.is_finite() && h_next.is_finite() && h.iter().all(|v| v.is_finite())) {
                    return Err(CoreError::Solver(format!(
                        "GMRES diverged at iteration {} (Hessenberg entry is not finite)",
                        report.iterations
                    )));
                }
                // Apply the previous rotations, then one that zeroes h_next.
                for (i, &(cs, sn)) in rotations[..j].iter().enumerate() {
                    let (a, b) = (h[i], h[i + 1]);
                    h[i] = cs * a + sn * b;
                    h[i + 1] = -sn * a + cs * b;
                }
                let (cs, sn, diag) = givens(h[j], h_next);
                if diag <= DEPENDENCE_THRESHOLD * scale {
                    // A M^-1 v_j lies in span(A M^-1 v_0..j-1): the projected operator is
                    // singular and the column adds nothing to the minimisation; end the cycle
                    // with the columns so far.
                    report.residual_history.push(estimate);
                    report.notes.push(format!(
                        "cycle {cycles}: Krylov space became singular at step {} (dependent column dropped)",
                        j + 1
                    ));
                    break;
                }
                h[j] = diag;
                rotations[j] = (cs, sn);
                hess[j] = h;
                g[j + 1] = -sn * g[j];
                g[j] *= cs;
                k = j + 1;
                estimate = g[j + 1].abs() / b_norm;
                report.residual_history.push(estimate);
                hdg_core::pipeline::iteration(report.iterations, estimate);
                if h_next <= DEPENDENCE_THRESHOLD * scale {
                    // Happy breakdown: the Krylov space is invariant, the solution over it
                    // is exact (up to the singular case above).
                    break;
                }
                if estimate <= self.tolerance || report.iterations >= self.max_iterations {
                    break;
                }
                if j + 1 < m {
                    // v_{j+1} = w / h_next.
                    backend.copy(&w, &mut basis[j + 1])?;
                    backend.scale(T::from_f64_lossy(1.0 / h_next), &mut basis[j + 1])?;
                }
            }
            if k == 0 {
                report.notes.push(format!(
                    "cycle {cycles}: A M^-1 r is dependent on r's own span (A M^-1 r = 0 to rounding): no progress is possible (singular, inconsistent system)"
                ));
                // x is unchanged: the residual computed at the top of this cycle is final.
                break;
            }
            // y = R^-1 g (upper triangular, host), x += M^-1 (V y).
            let mut y = g[..k].to_vec();
            for i in (0..k).rev() {
                let mut s = y[i];
                for l in i + 1..k {
                    s -= hess[l][i] * y[l];
                }
                y[i] = s / hess[i][i];
            }
            backend.scale(T::zero(), &mut w)?;
            for (i, &yi) in y.iter().enumerate() {
                backend.axpy(T::from_f64_lossy(yi), &basis[i], &mut w)?;
            }
            precond.apply(backend, &w, &mut z)?;
            count_precond(&mut report);
            backend.axpy(T::one(), &z, x)?;
        }
        report.notes.push(format!("restart cycles: {cycles}; orthogonalisation: CGS2"));
        Ok(report)
    }
}
