//! Estimates of the extreme eigenvalues of a (preconditioned) trace operator, for Chebyshev
//! iteration and polynomial preconditioners.
//!
//! Three sources, with different costs and guarantees:
//! - [`lanczos_estimate`]: Ritz values of the Lanczos tridiagonal hidden in the CG coefficients
//!   ([`lanczos_from_cg`]). A few tens of CG steps give both ends of the spectrum of M^-1 A;
//!   the Ritz values lie *inside* the spectrum (lambda_max under-estimated, lambda_min
//!   over-estimated), so a user multiplies them by safety factors.
//! - [`gershgorin_estimate`]: guaranteed enclosing bounds from one pass over the matrix, no
//!   operator application; the upper bound is usually within a small factor, the lower bound is
//!   useless (often negative) for trace matrices.
//! - [`power_iteration`]: lambda_max of M^-1 A from below by a Rayleigh quotient.
//!
//! Everything runs through [`VectorOps`]: only scalars come back to the host.
use hdg_core::{CoreError, FusedOps, Preconditioner, Real, Result, TraceOperator};
use rayon::prelude::*;

use crate::cg::{run_cg, CgSettings, CgStep, Flow};

/// Extreme eigenvalues of an operator (or of M^-1 A), with how they were obtained and what
/// they cost.
#[derive(Clone, Debug, PartialEq)]
pub struct SpectrumEstimate {
    /// Estimate of the smallest eigenvalue (NaN where the method gives none).
    pub lambda_min: f64,
    /// Estimate of the largest eigenvalue.
    pub lambda_max: f64,
    /// How the numbers were obtained, and whether they bound the spectrum from inside or outside.
    pub method: String,
    /// Operator applications spent (preconditioner applications that apply the operator
    /// included).
    pub operator_applications: usize,
    /// Global reductions spent.
    pub reductions: usize,
}

/// Number of eigenvalues of the symmetric tridiagonal matrix that are `< x` (Sturm count via
/// the LDL^T pivots).
fn sturm_count(diagonal: &[f64], off_diagonal: &[f64], x: f64) -> usize {
    let mut count = 0;
    let mut q = 1.0;
    for i in 0..diagonal.len() {
        let e2 = if i == 0 { 0.0 } else { off_diagonal[i - 1] * off_diagonal[i - 1] };
        q = diagonal[i] - x - if i == 0 { 0.0 } else { e2 / q };
        if q == 0.0 {
            // A zero pivot: perturb it (the standard guard; it changes the count only for an
            // x that is an eigenvalue to the last bit).
            q = -f64::EPSILON * (diagonal[i].abs() + x.abs() + f64::MIN_POSITIVE);
        }
        if q < 0.0 {
            count += 1;
        }
    }
    count
}

/// All eigenvalues of the symmetric tridiagonal matrix with the given diagonal (n entries) and
/// off-diagonal (n - 1 entries), ascending.
///
/// Bisection with Sturm counts inside the Gershgorin interval: slower than implicit QL but
/// simple and accurate to a few ulps of the matrix norm for every eigenvalue, which is what
/// a spectrum estimate from a few tens of Lanczos steps needs. Non-finite input gives NaNs.
pub fn symmetric_tridiagonal_eigenvalues(diagonal: &[f64], off_diagonal: &[f64]) -> Vec<f64> {
    let n = diagonal.len();
    if n == 0 {
        return Vec::new();
    }
    assert!(off_diagonal.len() + 1 >= n, "the off-diagonal needs n - 1 entries");
    if diagonal.iter().chain(&off_diagonal[..n - 1]).any(|v| !v.is_finite()) {
        return vec![f64::NAN; n];
    }
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for i in 0..n {
        let left = if i > 0 { off_diagonal[i - 1].abs() } else { 0.0 };
        let right = if i + 1 < n { off_diagonal[i].abs() } else { 0.0 };
        lo = lo.min(diagonal[i] - left - right);
        hi = hi.max(diagonal[i] + left + right);
    }
    let scale = lo.abs().max(hi.abs()).max(f64::MIN_POSITIVE);
    lo -= 4.0 * f64::EPSILON * scale;
    hi += 4.0 * f64::EPSILON * scale;
    let off = &off_diagonal[..n - 1];
    (0..n)
        .map(|k| {
            // The (k+1)-th smallest eigenvalue: the smallest x with count(x) > k.
            let (mut a, mut b) = (lo, hi);
            for _ in 0..200 {
                let mid = 0.5 * (a + b);
                if mid <= a || mid >= b || b - a <= 2.0 * f64::EPSILON * scale {
                    break;
                }
                if sturm_count(diagonal, off, mid) > k {
                    b = mid;
                } else {
                    a = mid;
                }
            }
            0.5 * (a + b)
        })
        .collect()
}

/// The Lanczos tridiagonal hidden in CG's coefficients, and its extreme eigenvalues
/// (lambda_min, lambda_max).
///
/// With j steps alpha_1..alpha_j and beta_1..beta_j (beta_i the coefficient of the direction
/// after step i), T_ii = 1/alpha_i + beta_{i-1}/alpha_{i-1} and T_{i,i+1} = sqrt(beta_i)/alpha_i
/// (Saad, *Iterative Methods*, 6.7.3). Its eigenvalues are the Ritz values of M^-1 A on the
/// Krylov space CG built: they lie inside the spectrum and the extreme ones converge first.
/// No steps give (NaN, NaN).
pub fn lanczos_from_cg(steps: &[CgStep]) -> (f64, f64) {
    let j = steps.len();
    if j == 0 {
        return (f64::NAN, f64::NAN);
    }
    let mut diagonal = Vec::with_capacity(j);
    let mut off = Vec::with_capacity(j.saturating_sub(1));
    for i in 0..j {
        let mut t = 1.0 / steps[i].alpha;
        if i > 0 {
            t += steps[i - 1].beta / steps[i - 1].alpha;
        }
        diagonal.push(t);
        if i + 1 < j {
            off.push(steps[i].beta.sqrt() / steps[i].alpha);
        }
    }
    let ev = symmetric_tridiagonal_eigenvalues(&diagonal, &off);
    (ev[0], ev[j - 1])
}

/// Extreme eigenvalues of M^-1 A from `iterations` CG steps on A x = rhs from x = 0
/// ([`lanczos_from_cg`]).
///
/// The estimates lie inside the spectrum: lambda_max from below, lambda_min from above, so a
/// Chebyshev method should widen them. The quality depends on `rhs` having components along
/// the extreme eigenvectors (a smooth right-hand side resolves lambda_max more slowly than a
/// random one). CG stops early, with the steps taken so far, once its residual falls below
/// 1e-13 relative: by then the Krylov space holds the extreme eigenvectors, and going on would
/// only feed rounding noise into the tridiagonal. Cost: the CG run's operator applications and
/// reductions (about one application and two reductions a step).
pub fn lanczos_estimate<T: Real, B: FusedOps<T>>(
    backend: &B,
    operator: &dyn TraceOperator<T, Vector = B::Vector>,
    preconditioner: &dyn Preconditioner<T, B>,
    rhs: &B::Vector,
    iterations: usize,
) -> Result<SpectrumEstimate> {
    if iterations < 2 {
        return Err(CoreError::InvalidParameter {
            name: "Lanczos iterations",
            reason: format!("{iterations}: at least 2 CG steps are needed for two Ritz values"),
        });
    }
    let mut x = backend.zeros(operator.dim())?;
    let settings =
        CgSettings { tolerance: 1e-13, max_iterations: iterations, true_residual_every: 0 };
    let mut steps = Vec::with_capacity(iterations);
    let report = run_cg(backend, operator, preconditioner, rhs, &mut x, &settings, &mut |s| {
        steps.push(*s);
        Flow::Continue
    })?;
    if steps.len() < 2 {
        return Err(CoreError::Solver(format!(
            "Lanczos estimate: CG took {} step(s) (right-hand side zero or an eigenvector?), too few for a spectrum estimate",
            steps.len()
        )));
    }
    let (lambda_min, lambda_max) = lanczos_from_cg(&steps);
    if !(lambda_min.is_finite() && lambda_max.is_finite()) {
        return Err(CoreError::Solver("Lanczos estimate: non-finite Ritz values".into()));
    }
    Ok(SpectrumEstimate {
        lambda_min,
        lambda_max,
        method: format!(
            "lanczos from {} CG steps with preconditioner {} (Ritz values: inside the spectrum of M^-1 A)",
            steps.len(),
            preconditioner.name()
        ),
        operator_applications: report.operator_applications,
        reductions: report.reductions,
    })
}

/// Gershgorin bounds of A (`scaled = false`) or of D^-1 A (`scaled = true`, the Jacobi
/// preconditioned operator) through [`TraceOperator::gershgorin_bounds`].
///
/// The interval is guaranteed to contain the spectrum; the upper end is a safe lambda_max for
/// Chebyshev, the lower end is usually <= 0 for trace matrices and then useless. Cost: no
/// operator application and no reduction, one pass over the stored matrix.
pub fn gershgorin_estimate<T: Real, O: TraceOperator<T> + ?Sized>(
    operator: &O,
    scaled: bool,
) -> Result<SpectrumEstimate> {
    let (lambda_min, lambda_max) = operator.gershgorin_bounds(scaled)?;
    Ok(SpectrumEstimate {
        lambda_min,
        lambda_max,
        method: format!(
            "gershgorin discs of {} (encloses the spectrum; 0 operator applications, 1 pass over the matrix)",
            if scaled { "D^-1 A" } else { "A" }
        ),
        operator_applications: 0,
        reductions: 0,
    })
}

/// A deterministic pseudo-random vector in [-1, 1) for the start of a spectrum estimate, so
/// that it has components along every eigenvector with probability one and runs are
/// reproducible. Entry i is a hash of (`seed`, i) (SplitMix64's finalizer), not the i-th draw
/// of a sequence: the entries are computed in parallel (a serial generator took longer than
/// the Lanczos steps on a trace level of 1e7 unknowns), and entry i is the same for every
/// thread count and on every process of a split level. Built on the host and uploaded once.
pub(crate) fn pseudo_random<T: Real>(n: usize, seed: u64) -> Vec<T> {
    const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let key = mix(seed.wrapping_mul(GOLDEN));
    (0..n)
        .into_par_iter()
        .map(|i| {
            let bits = mix(key.wrapping_add((i as u64).wrapping_add(1).wrapping_mul(GOLDEN))) >> 11;
            T::from_f64_lossy(bits as f64 / (1u64 << 53) as f64 * 2.0 - 1.0)
        })
        .collect()
}

/// lambda_max of M^-1 A by power iteration.
///
/// Iterates v <- M^-1 A v / ||M^-1 A v|| from a fixed pseudo-random vector and estimates
/// lambda_max by the Rayleigh quotient of M^-1 A in the A inner product,
/// (A v . M^-1 A v) / (v . A v), which is a lower bound on lambda_max when A and M are SPD.
/// Stops when the estimate changes by less than `tolerance` (relative) between two steps or
/// after `iterations` steps. Each step costs one operator application, one preconditioner
/// application and one reduction phase (three fused dots). lambda_min is not estimated (NaN).
pub fn power_iteration<T: Real, B: FusedOps<T>>(
    backend: &B,
    operator: &dyn TraceOperator<T, Vector = B::Vector>,
    preconditioner: &dyn Preconditioner<T, B>,
    iterations: usize,
    tolerance: f64,
) -> Result<SpectrumEstimate> {
    if iterations == 0 {
        return Err(CoreError::InvalidParameter {
            name: "power iterations",
            reason: "at least one iteration is needed".into(),
        });
    }
    if !(tolerance.is_finite() && tolerance >= 0.0) {
        return Err(CoreError::InvalidParameter {
            name: "power iteration tolerance",
            reason: format!("{tolerance} is not a finite non-negative number"),
        });
    }
    let n = operator.dim();
    let mut v = backend.copy_from_host(&pseudo_random::<T>(n, 0))?;
    let mut y = backend.zeros(n)?;
    let mut w = backend.zeros(n)?;
    let (mut applications, mut reductions) = (0, 0);
    let mut lambda = f64::NAN;
    let mut taken = 0;
    for _ in 0..iterations {
        operator.apply(&v, &mut y)?;
        preconditioner.apply(backend, &y, &mut w)?;
        applications += 1 + preconditioner.operator_applications();
        reductions += 1 + preconditioner.reductions();
        let dots = backend.dot_many(&[(&y, &w), (&v, &y), (&w, &w)])?;
        taken += 1;
        let (ywd, vy, ww) = (dots[0].as_f64(), dots[1].as_f64(), dots[2].as_f64());
        if !(ywd.is_finite() && vy.is_finite() && ww.is_finite()) || vy <= 0.0 || ww <= 0.0 {
            return Err(CoreError::Solver(format!(
                "power iteration broke down at step {taken}: v.Av = {vy:e}, |M^-1 A v|^2 = {ww:e} (operator or preconditioner not SPD?)"
            )));
        }
        let next = ywd / vy;
        let change = (next - lambda).abs() / next.abs();
        lambda = next;
        // v = w / ||w||.
        backend.copy(&w, &mut v)?;
        backend.scale(T::from_f64_lossy(1.0 / ww.sqrt()), &mut v)?;
        if change <= tolerance {
            break;
        }
    }
    Ok(SpectrumEstimate {
        lambda_min: f64::NAN,
        lambda_max: lambda,
        method: format!(
            "power iteration, {taken} steps, preconditioner {} (Rayleigh quotient: lambda_max from below; lambda_min not estimated, NaN)",
            preconditioner.name()
        ),
        operator_applications: applications,
        reductions,
    })
}

#[cfg(test)]
mod tests {
    use super::pseudo_random;

    /// The start vectors: in [-1, 1), spread over it, different per seed, and the same entries
    /// whatever the thread count and the length (entry i depends on (seed, i) only).
    #[test]
    fn pseudo_random_entries_depend_on_seed_and_index_only() {
        let n = 100_003;
        let v = pseudo_random::<f64>(n, 7);
        assert!(v.iter().all(|x| (-1.0..1.0).contains(x)));
        let mean = v.iter().sum::<f64>() / n as f64;
        let below = v.iter().filter(|&&x| x < -0.5).count() as f64 / n as f64;
        assert!(mean.abs() < 0.01 && (below - 0.25).abs() < 0.01, "mean {mean}, below {below}");
        let one_thread = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        assert_eq!(one_thread.install(|| pseudo_random::<f64>(n, 7)), v);
        assert_eq!(pseudo_random::<f64>(1000, 7)[..], v[..1000]);
        let other = pseudo_random::<f64>(n, 8);
        assert!(v.iter().zip(&other).filter(|(a, b)| a == b).count() < 10);
        let single = pseudo_random::<f32>(1000, 7);
        assert!(single.iter().zip(&v).all(|(&s, &d)| s == d as f32));
    }
}
