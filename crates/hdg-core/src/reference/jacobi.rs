//! Orthogonal polynomials: Jacobi polynomials, orthonormal Legendre polynomials on `[-1,1]`
//! and the orthonormal Dubiner (Proriol-Koornwinder-Dubiner) basis on the reference triangle.
//!
//! Everything is evaluated by three-term recurrences, which are stable for the orders used here
//! (up to a few tens).

/// Jacobi polynomial `P_n^{(a,b)}(x)` in the standard normalisation
/// (`P_n^{(a,b)}(1) = binom(n+a, n)`), by the three-term recurrence.
///
/// Valid for `a, b > -1` (the orthogonality range).
pub fn jacobi(n: usize, a: f64, b: f64, x: f64) -> f64 {
    let mut p_prev = 1.0;
    if n == 0 {
        return p_prev;
    }
    let mut p = 0.5 * ((a - b) + (a + b + 2.0) * x);
    for k in 1..n {
        let (alpha, beta, gamma) = recurrence_coefficients(k, a, b);
        let p_next = (alpha * x + beta) * p - gamma * p_prev;
        p_prev = p;
        p = p_next;
    }
    p
}

/// Derivative `d/dx P_n^{(a,b)}(x)`, from the identity
/// `d/dx P_n^{(a,b)} = (n+a+b+1)/2 P_{n-1}^{(a+1,b+1)}`.
pub fn jacobi_derivative(n: usize, a: f64, b: f64, x: f64) -> f64 {
    if n == 0 {
        0.0
    } else {
        0.5 * (n as f64 + a + b + 1.0) * jacobi(n - 1, a + 1.0, b + 1.0, x)
    }
}

/// Coefficients of `P_{k+1} = (alpha x + beta) P_k - gamma P_{k-1}` for `k >= 1`.
///
/// For `k >= 1` and `a, b > -1` none of the denominators vanish (unlike the `k = 0` step, which is
/// therefore written out separately by the callers).
#[inline]
fn recurrence_coefficients(k: usize, a: f64, b: f64) -> (f64, f64, f64) {
    let k = k as f64;
    let s = 2.0 * k + a + b;
    let d = 2.0 * (k + 1.0) * (k + a + b + 1.0) * s;
    let alpha = (s + 1.0) * (s + 2.0) * s / d;
    let beta = (s + 1.0) * (a * a - b * b) / d;
    let gamma = 2.0 * (k + a) * (k + b) * (s + 2.0) / d;
    (alpha, beta, gamma)
}

/// All `P_k^{(a,b)}(x)` and their derivatives for `k = 0..values.len()`.
fn jacobi_all(a: f64, b: f64, x: f64, values: &mut [f64], derivatives: &mut [f64]) {
    let len = values.len();
    debug_assert_eq!(derivatives.len(), len);
    if len == 0 {
        return;
    }
    values[0] = 1.0;
    derivatives[0] = 0.0;
    if len == 1 {
        return;
    }
    values[1] = 0.5 * ((a - b) + (a + b + 2.0) * x);
    derivatives[1] = 0.5 * (a + b + 2.0);
    for k in 1..len - 1 {
        let (alpha, beta, gamma) = recurrence_coefficients(k, a, b);
        let factor = alpha * x + beta;
        values[k + 1] = factor * values[k] - gamma * values[k - 1];
        derivatives[k + 1] =
            factor * derivatives[k] + alpha * values[k] - gamma * derivatives[k - 1];
    }
}

/// Orthonormal Legendre polynomials on `[-1,1]`: `values[m] = sqrt((2m+1)/2) P_m(s)` for
/// `m = 0..=order`, so that `int_{-1}^{1} values[m] values[l] ds = delta_{ml}`.
///
/// These are the trace (face) basis functions of the triangle: orthonormality makes the face mass
/// matrix the identity.
pub fn legendre_orthonormal(order: usize, s: f64, values: &mut [f64]) {
    assert!(values.len() > order, "legendre_orthonormal: values too short");
    values[0] = 1.0;
    if order >= 1 {
        values[1] = s;
    }
    for m in 1..order {
        let mf = m as f64;
        values[m + 1] = ((2.0 * mf + 1.0) * s * values[m] - mf * values[m - 1]) / (mf + 1.0);
    }
    for (m, v) in values[..=order].iter_mut().enumerate() {
        *v *= ((2 * m + 1) as f64 / 2.0).sqrt();
    }
}

/// Number of Dubiner functions of total degree at most `order`: `(order+1)(order+2)/2`.
#[inline]
pub(crate) const fn dubiner_count(order: usize) -> usize {
    (order + 1) * (order + 2) / 2
}

/// Orthonormal Dubiner (PKD) basis on the reference triangle `(-1,-1), (1,-1), (-1,1)`:
/// values and `d/dx`, `d/dy` of all `(order+1)(order+2)/2` functions at `(x, y)`.
///
/// The function with indices `(p, q)` is
/// `phi_pq = sqrt((2p+1)(p+q+1)/2) P_p(a) ((1-b)/2)^p P_q^{(2p+1,0)}(b)` in the collapsed
/// coordinates `a = 2(1+x)/(1-y) - 1`, `b = y`; it has total degree `p+q` and the family is
/// orthonormal for the plain integral over the triangle (area 2).
///
/// Ordering is hierarchical by total degree: for `d = 0..=order`, for `q = 0..=d` (`p = d-q`), the
/// index increases by one. Hence index(p, q) = `d(d+1)/2 + q` with `d = p+q`, and the first
/// `(k+1)(k+2)/2` functions of any higher-order basis are exactly the order-`k` basis.
///
/// The collapsed coordinate `a` is singular at the top vertex `(-1,1)`, but
/// `((1-b)/2)^p P_p(a)` is a homogeneous polynomial `Q_p(u, t) = t^p P_p(u/t)` of
/// `u = x + (1+y)/2` and `t = (1-y)/2`; it and its derivatives are evaluated by the Legendre
/// recurrence in homogeneous form, so no division by `1-y` ever happens and values and
/// derivatives are exact (to rounding) everywhere, the top vertex included.
///
/// # Panics
/// If any of the three slices is shorter than the number of functions.
pub fn dubiner_triangle(
    order: usize,
    x: f64,
    y: f64,
    values: &mut [f64],
    dx: &mut [f64],
    dy: &mut [f64],
) {
    dubiner_triangle_impl(order, x, y, values, Some((dx, dy)));
}

/// Values only, or values and derivatives, of the Dubiner basis (see [`dubiner_triangle`]).
pub(crate) fn dubiner_triangle_impl(
    order: usize,
    x: f64,
    y: f64,
    values: &mut [f64],
    mut derivatives: Option<(&mut [f64], &mut [f64])>,
) {
    let n = dubiner_count(order);
    assert!(values.len() >= n, "dubiner_triangle: values too short");
    if let Some((dx, dy)) = &derivatives {
        assert!(dx.len() >= n && dy.len() >= n, "dubiner_triangle: derivatives too short");
    }
    let len = order + 1;
    // Scratch: Q, dQ/du, dQ/dt (index p) and the Jacobi values / derivatives (index q).
    // Stack storage for the usual orders, heap for exotic ones.
    const STACK: usize = 32;
    let mut stack = [0.0f64; 5 * STACK];
    let mut heap;
    let scratch: &mut [f64] = if len <= STACK {
        &mut stack[..5 * len]
    } else {
        heap = vec![0.0; 5 * len];
        &mut heap
    };
    let (q_val, rest) = scratch.split_at_mut(len);
    let (q_u, rest) = rest.split_at_mut(len);
    let (q_t, rest) = rest.split_at_mut(len);
    let (r_val, r_der) = rest.split_at_mut(len);

    let u = x + 0.5 * (1.0 + y);
    let t = 0.5 * (1.0 - y);
    let t2 = t * t;
    q_val[0] = 1.0;
    q_u[0] = 0.0;
    q_t[0] = 0.0;
    if order >= 1 {
        q_val[1] = u;
        q_u[1] = 1.0;
        q_t[1] = 0.0;
    }
    // (m+1) Q_{m+1} = (2m+1) u Q_m - m t^2 Q_{m-1}: Legendre's recurrence times t^{m+1}.
    for m in 1..order {
        let mf = m as f64;
        let c1 = (2.0 * mf + 1.0) / (mf + 1.0);
        let c2 = mf / (mf + 1.0);
        q_val[m + 1] = c1 * u * q_val[m] - c2 * t2 * q_val[m - 1];
        q_u[m + 1] = c1 * (q_val[m] + u * q_u[m]) - c2 * t2 * q_u[m - 1];
        q_t[m + 1] = c1 * u * q_t[m] - c2 * (2.0 * t * q_val[m - 1] + t2 * q_t[m - 1]);
    }

    for p in 0..=order {
        let nq = order - p + 1;
        jacobi_all((2 * p + 1) as f64, 0.0, y, &mut r_val[..nq], &mut r_der[..nq]);
        for q in 0..nq {
            let d = p + q;
            let idx = d * (d + 1) / 2 + q;
            let c = ((2 * p + 1) as f64 * (d + 1) as f64 / 2.0).sqrt();
            values[idx] = c * q_val[p] * r_val[q];
            if let Some((dx, dy)) = &mut derivatives {
                // du/dx = 1, du/dy = 1/2, dt/dx = 0, dt/dy = -1/2.
                dx[idx] = c * q_u[p] * r_val[q];
                dy[idx] = c * (0.5 * (q_u[p] - q_t[p]) * r_val[q] + q_val[p] * r_der[q]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::quadrature::{gauss_legendre, triangle_rule};
    use crate::reference::test_util::Rng;

    fn binom(n: f64, k: usize) -> f64 {
        (0..k).map(|i| (n - i as f64) / (i as f64 + 1.0)).product()
    }

    #[test]
    fn jacobi_known_values() {
        // Legendre P_2, P_3.
        for &x in &[-0.9, -0.3, 0.0, 0.4, 1.0] {
            assert!((jacobi(2, 0.0, 0.0, x) - 0.5 * (3.0 * x * x - 1.0)).abs() < 1e-15);
            assert!((jacobi(3, 0.0, 0.0, x) - 0.5 * (5.0 * x * x * x - 3.0 * x)).abs() < 1e-15);
            // P_1^{(a,b)} and P_2^{(1,0)} written out.
            let (a, b) = (1.5, 0.25);
            let p1 = 0.5 * (a - b) + 0.5 * (a + b + 2.0) * x;
            assert!((jacobi(1, a, b, x) - p1).abs() < 1e-15);
            // P_2^{(1,0)}(x) = (10 x^2 + 4 x - 2) / 4... from the hypergeometric form:
            // P_n^{(a,b)}(x) = sum_s binom(n+a, n-s) binom(n+b, s) ((x-1)/2)^s ((x+1)/2)^{n-s}.
            let direct = |n: usize, a: f64, b: f64| -> f64 {
                (0..=n)
                    .map(|s| {
                        binom(n as f64 + a, n - s)
                            * binom(n as f64 + b, s)
                            * ((x - 1.0) / 2.0).powi(s as i32)
                            * ((x + 1.0) / 2.0).powi((n - s) as i32)
                    })
                    .sum()
            };
            for n in 0..8 {
                for &(a, b) in &[(0.0, 0.0), (1.0, 0.0), (3.0, 0.0), (0.5, -0.5), (2.5, 1.25)] {
                    let got = jacobi(n, a, b, x);
                    let want = direct(n, a, b);
                    assert!(
                        (got - want).abs() < 1e-12 * want.abs().max(1.0),
                        "P_{n}^({a},{b})({x}) = {got}, want {want}"
                    );
                }
            }
        }
        // P_n^{(a,b)}(1) = binom(n+a, n).
        for n in 0..15 {
            let want = binom(n as f64 + 2.5, n);
            assert!((jacobi(n, 2.5, 0.5, 1.0) - want).abs() < 1e-12 * want);
        }
    }

    #[test]
    fn jacobi_derivative_matches_finite_differences() {
        let h = 1e-6;
        for n in 0..12 {
            for &(a, b) in &[(0.0, 0.0), (1.0, 0.0), (5.0, 0.0), (0.5, 1.5)] {
                for &x in &[-0.95, -0.2, 0.33, 0.9] {
                    let fd = (jacobi(n, a, b, x + h) - jacobi(n, a, b, x - h)) / (2.0 * h);
                    let d = jacobi_derivative(n, a, b, x);
                    assert!((fd - d).abs() < 1e-6 * d.abs().max(1.0), "n={n} a={a} b={b}");
                }
            }
        }
        // And jacobi_all's derivative recurrence agrees with the closed form.
        let mut v = [0.0; 10];
        let mut d = [0.0; 10];
        jacobi_all(3.0, 0.0, 0.37, &mut v, &mut d);
        for k in 0..10 {
            assert!((v[k] - jacobi(k, 3.0, 0.0, 0.37)).abs() < 1e-13 * v[k].abs().max(1.0));
            let want = jacobi_derivative(k, 3.0, 0.0, 0.37);
            assert!((d[k] - want).abs() < 1e-12 * want.abs().max(1.0));
        }
    }

    #[test]
    fn legendre_orthonormal_is_orthonormal() {
        let order = 15;
        let (x, w) = gauss_legendre(order + 1);
        let mut vals = vec![0.0; order + 1];
        let mut mass = vec![0.0; (order + 1) * (order + 1)];
        for (xq, wq) in x.iter().zip(&w) {
            legendre_orthonormal(order, *xq, &mut vals);
            for i in 0..=order {
                for j in 0..=order {
                    mass[i * (order + 1) + j] += wq * vals[i] * vals[j];
                }
            }
        }
        for i in 0..=order {
            for j in 0..=order {
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((mass[i * (order + 1) + j] - want).abs() < 1e-13);
            }
        }
        // Parity: mu_m(-s) = (-1)^m mu_m(s).
        let mut a = vec![0.0; order + 1];
        let mut b = vec![0.0; order + 1];
        legendre_orthonormal(order, 0.3, &mut a);
        legendre_orthonormal(order, -0.3, &mut b);
        for m in 0..=order {
            let sign = if m & 1 == 0 { 1.0 } else { -1.0 };
            assert!((a[m] - sign * b[m]).abs() < 1e-14);
        }
    }

    #[test]
    fn dubiner_mass_matrix_is_identity_orders_1_to_10() {
        for order in 1..=10 {
            let n = dubiner_count(order);
            let rule = triangle_rule(2 * order);
            let mut v = vec![0.0; n];
            let mut dx = vec![0.0; n];
            let mut dy = vec![0.0; n];
            let mut mass = vec![0.0; n * n];
            for q in 0..rule.n_points() {
                let pt = rule.point(q);
                dubiner_triangle(order, pt[0], pt[1], &mut v, &mut dx, &mut dy);
                for i in 0..n {
                    for j in 0..n {
                        mass[i * n + j] += rule.weights[q] * v[i] * v[j];
                    }
                }
            }
            let mut err: f64 = 0.0;
            for i in 0..n {
                for j in 0..n {
                    let want = if i == j { 1.0 } else { 0.0 };
                    err = err.max((mass[i * n + j] - want).abs());
                }
            }
            assert!(err < 1e-13, "order {order}: max |M - I| = {err:e}");
        }
    }

    #[test]
    fn dubiner_is_hierarchical_and_graded_by_degree() {
        let mut rng = Rng::new(7);
        for k in 0..12 {
            let n_k = dubiner_count(k);
            let n_k1 = dubiner_count(k + 1);
            for _ in 0..5 {
                let (x, y) = rng.triangle_point(0.0);
                let (mut v0, mut dx0, mut dy0) = (vec![0.0; n_k], vec![0.0; n_k], vec![0.0; n_k]);
                let (mut v1, mut dx1, mut dy1) =
                    (vec![0.0; n_k1], vec![0.0; n_k1], vec![0.0; n_k1]);
                dubiner_triangle(k, x, y, &mut v0, &mut dx0, &mut dy0);
                dubiner_triangle(k + 1, x, y, &mut v1, &mut dx1, &mut dy1);
                for i in 0..n_k {
                    assert_eq!(v0[i], v1[i]);
                    assert_eq!(dx0[i], dx1[i]);
                    assert_eq!(dy0[i], dy1[i]);
                }
            }
        }
        // The functions of index >= n(k) are orthogonal to all polynomials of degree <= k, in
        // particular to the monomials x^a y^b with a + b <= k (graded by total degree).
        let order = 6;
        let n = dubiner_count(order);
        let rule = triangle_rule(2 * order);
        let (mut v, mut dx, mut dy) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
        for k in 0..order {
            for a in 0..=k {
                let b = k - a;
                let mut proj = vec![0.0; n];
                for q in 0..rule.n_points() {
                    let pt = rule.point(q);
                    dubiner_triangle(order, pt[0], pt[1], &mut v, &mut dx, &mut dy);
                    let m = pt[0].powi(a as i32) * pt[1].powi(b as i32);
                    for i in 0..n {
                        proj[i] += rule.weights[q] * m * v[i];
                    }
                }
                for (i, pi) in proj.iter().enumerate().skip(dubiner_count(k)) {
                    assert!(pi.abs() < 1e-13, "x^{a} y^{b} vs phi_{i}: {pi:e}");
                }
            }
        }
    }

    #[test]
    fn dubiner_ordering_matches_closed_forms() {
        // Index d(d+1)/2 + q holds (p, q) = (d - q, q): index 1 is p = 1 (varies with x), index 2
        // is q = 1 (a function of y only), index 3..6 are (2,0), (1,1), (0,2).
        let order = 2;
        let n = dubiner_count(order);
        let (mut v, mut dx, mut dy) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
        let mut rng = Rng::new(11);
        for _ in 0..10 {
            let (x, y) = rng.triangle_point(0.0);
            dubiner_triangle(order, x, y, &mut v, &mut dx, &mut dy);
            let u = x + 0.5 * (1.0 + y);
            let t = 0.5 * (1.0 - y);
            let want = [
                std::f64::consts::FRAC_1_SQRT_2,
                3f64.sqrt() * u,
                0.5 * (1.0 + 3.0 * y),
                (15.0f64 / 2.0).sqrt() * 0.5 * (3.0 * u * u - t * t),
                (9.0f64 / 2.0).sqrt() * u * jacobi(1, 3.0, 0.0, y),
                (3.0f64 / 2.0).sqrt() * jacobi(2, 1.0, 0.0, y),
            ];
            for i in 0..n {
                assert!((v[i] - want[i]).abs() < 1e-14, "phi_{i}: {} vs {}", v[i], want[i]);
            }
            assert_eq!(dx[2], 0.0);
            assert_eq!(dx[5], 0.0);
        }
    }

    #[test]
    fn dubiner_gradients_match_finite_differences() {
        let mut rng = Rng::new(42);
        let h = 1e-6;
        for order in [1, 3, 6, 10] {
            let n = dubiner_count(order);
            let (mut v, mut dx, mut dy) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
            let (mut vp, mut vm) = (vec![0.0; n], vec![0.0; n]);
            let (mut sx, mut sy) = (vec![0.0; n], vec![0.0; n]);
            for _ in 0..20 {
                let (x, y) = rng.triangle_point(1e-3);
                dubiner_triangle(order, x, y, &mut v, &mut dx, &mut dy);
                let scale = v.iter().fold(1.0f64, |m, a| m.max(a.abs()));
                dubiner_triangle(order, x + h, y, &mut vp, &mut sx, &mut sy);
                dubiner_triangle(order, x - h, y, &mut vm, &mut sx, &mut sy);
                for i in 0..n {
                    let fd = (vp[i] - vm[i]) / (2.0 * h);
                    let tol = 1e-6 * dx[i].abs().max(scale);
                    assert!((fd - dx[i]).abs() < tol, "order {order} dx[{i}]: {fd} vs {}", dx[i]);
                }
                dubiner_triangle(order, x, y + h, &mut vp, &mut sx, &mut sy);
                dubiner_triangle(order, x, y - h, &mut vm, &mut sx, &mut sy);
                for i in 0..n {
                    let fd = (vp[i] - vm[i]) / (2.0 * h);
                    let tol = 1e-6 * dy[i].abs().max(scale);
                    assert!((fd - dy[i]).abs() < tol, "order {order} dy[{i}]: {fd} vs {}", dy[i]);
                }
            }
        }
    }

    #[test]
    fn dubiner_is_regular_at_the_top_vertex() {
        // At (-1, 1) the collapsed map is singular; values and gradients must be finite and equal
        // to the limit from inside the triangle.
        let order = 8;
        let n = dubiner_count(order);
        let (mut v, mut dx, mut dy) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
        let (mut v2, mut dx2, mut dy2) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
        dubiner_triangle(order, -1.0, 1.0, &mut v, &mut dx, &mut dy);
        let eps = 1e-9;
        dubiner_triangle(order, -1.0 + eps, 1.0 - 2.0 * eps, &mut v2, &mut dx2, &mut dy2);
        for i in 0..n {
            assert!(v[i].is_finite() && dx[i].is_finite() && dy[i].is_finite());
            assert!((v[i] - v2[i]).abs() < 1e-5 * v[i].abs().max(1.0));
            assert!((dx[i] - dx2[i]).abs() < 1e-5 * dx[i].abs().max(1.0));
            assert!((dy[i] - dy2[i]).abs() < 1e-5 * dy[i].abs().max(1.0));
        }
        // Functions with p >= 1 vanish at the top vertex (they carry the factor ((1-y)/2)^p).
        for d in 1..=order {
            for q in 0..d {
                assert!(v[d * (d + 1) / 2 + q].abs() < 1e-14);
            }
        }
        // phi_00 = 1/sqrt(2) everywhere.
        assert!((v[0] - std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-15);
    }
}
