//! Orthogonal polynomials: Jacobi polynomials, orthonormal Legendre polynomials on `[-1,1]`
//! and the orthonormal Dubiner (Proriol-Koornwinder-Dubiner) bases on the reference triangle and
//! the reference tetrahedron.
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

/// All homogeneous Jacobi polynomials `R_k(u, t) = t^k P_k^{(a,b)}(u/t)`, `k = 0..values.len()`,
/// with `dR_k/du` and `dR_k/dt`.
///
/// `R_k` is a polynomial in `(u, t)` (homogeneous of degree `k`), so it and its derivatives are
/// finite for `t = 0`, where the collapsed coordinate `u/t` of a Dubiner basis is singular. The
/// recurrence is the three-term recurrence of [`jacobi`] multiplied by `t^{k+1}`:
/// `R_{k+1} = (alpha u + beta t) R_k - gamma t^2 R_{k-1}`.
fn homogeneous_jacobi_all(
    a: f64,
    b: f64,
    u: f64,
    t: f64,
    values: &mut [f64],
    du: &mut [f64],
    dt: &mut [f64],
) {
    let len = values.len();
    debug_assert!(du.len() == len && dt.len() == len);
    if len == 0 {
        return;
    }
    values[0] = 1.0;
    du[0] = 0.0;
    dt[0] = 0.0;
    if len == 1 {
        return;
    }
    values[1] = 0.5 * ((a - b) * t + (a + b + 2.0) * u);
    du[1] = 0.5 * (a + b + 2.0);
    dt[1] = 0.5 * (a - b);
    let t2 = t * t;
    for k in 1..len - 1 {
        let (alpha, beta, gamma) = recurrence_coefficients(k, a, b);
        let factor = alpha * u + beta * t;
        values[k + 1] = factor * values[k] - gamma * t2 * values[k - 1];
        du[k + 1] = alpha * values[k] + factor * du[k] - gamma * t2 * du[k - 1];
        dt[k + 1] =
            beta * values[k] + factor * dt[k] - gamma * (2.0 * t * values[k - 1] + t2 * dt[k - 1]);
    }
}

/// Number of tetrahedral Dubiner functions of total degree at most `order`:
/// `(order+1)(order+2)(order+3)/6`.
#[inline]
pub(crate) const fn dubiner_tetrahedron_count(order: usize) -> usize {
    (order + 1) * (order + 2) * (order + 3) / 6
}

/// Index of the tetrahedral Dubiner function `(p, q, r)` (see [`dubiner_tetrahedron`]).
#[inline]
pub(crate) const fn dubiner_tetrahedron_index(p: usize, q: usize, r: usize) -> usize {
    let m = q + r;
    let d = p + m;
    d * (d + 1) * (d + 2) / 6 + m * (m + 1) / 2 + r
}

/// Orthonormal Dubiner (PKD) basis on the reference tetrahedron `(-1,-1,-1), (1,-1,-1),
/// (-1,1,-1), (-1,-1,1)`: values and `d/dx`, `d/dy`, `d/dz` of all
/// `(order+1)(order+2)(order+3)/6` functions at `(x, y, z)`.
///
/// The function with indices `(p, q, r)` is, in the collapsed coordinates
/// `a = 2(1+x)/(-y-z) - 1`, `b = 2(1+y)/(1-z) - 1`, `c = z`,
/// `phi_pqr = C_pqr P_p(a) ((1-b)/2)^p P_q^{(2p+1,0)}(b) ((1-c)/2)^{p+q} P_r^{(2p+2q+2,0)}(c)`
/// with `C_pqr = sqrt((2p+1)(p+q+1)(2(p+q+r)+3)/4)`; it has total degree `p+q+r` and the family is
/// orthonormal for the plain integral over the tetrahedron (volume 4/3).
///
/// Ordering is hierarchical by total degree, as for [`dubiner_triangle`]: the functions of degree
/// `d` start at `d(d+1)(d+2)/6`; inside a degree, with `m = q+r` (`p = d-m`), the index is
/// `d(d+1)(d+2)/6 + m(m+1)/2 + r`. So the first `(k+1)(k+2)(k+3)/6` functions of any higher-order
/// basis are exactly the order-`k` basis, and index 0 is the constant `sqrt(3)/2`.
///
/// The collapsed map is singular on the edge `y + z = 0` (from `(-1,1,-1)` to `(-1,-1,1)`) and at
/// the top vertex `z = 1`, but every factor is a polynomial: `((1-b)/2)^p ((1-c)/2)^p P_p(a)` is
/// the homogeneous Legendre polynomial `t1^p P_p(u1/t1)` of `u1 = 1 + x + (y+z)/2`,
/// `t1 = -(y+z)/2`, and `((1-c)/2)^q P_q^{(2p+1,0)}(b)` is `t2^q P_q^{(2p+1,0)}(u2/t2)`
/// with `u2 = y + (1+z)/2`, `t2 = (1-z)/2`. Both are evaluated by their recurrences in
/// homogeneous form, so no division ever happens and values and gradients are exact (to
/// rounding) everywhere in the closed tetrahedron.
///
/// # Panics
/// If any of the four slices is shorter than the number of functions.
pub fn dubiner_tetrahedron(
    order: usize,
    x: f64,
    y: f64,
    z: f64,
    values: &mut [f64],
    dx: &mut [f64],
    dy: &mut [f64],
    dz: &mut [f64],
) {
    dubiner_tetrahedron_impl(order, [x, y, z], values, Some([dx, dy, dz]));
}

/// Values only, or values and derivatives, of the tetrahedral Dubiner basis (see
/// [`dubiner_tetrahedron`]).
pub(crate) fn dubiner_tetrahedron_impl(
    order: usize,
    xi: [f64; 3],
    values: &mut [f64],
    mut derivatives: Option<[&mut [f64]; 3]>,
) {
    let n = dubiner_tetrahedron_count(order);
    assert!(values.len() >= n, "dubiner_tetrahedron: values too short");
    if let Some(d) = &derivatives {
        assert!(d.iter().all(|s| s.len() >= n), "dubiner_tetrahedron: derivatives too short");
    }
    let [x, y, z] = xi;
    let len = order + 1;
    // Scratch, index p, q or r: the first factor and its u1/t1 derivatives, the second factor and
    // its u2/t2 derivatives, the third factor and its derivative. Stack storage for the usual
    // orders, heap for exotic ones.
    const STACK: usize = 32;
    let mut stack = [0.0f64; 8 * STACK];
    let mut heap;
    let scratch: &mut [f64] = if len <= STACK {
        &mut stack[..8 * len]
    } else {
        heap = vec![0.0; 8 * len];
        &mut heap
    };
    let (a_val, rest) = scratch.split_at_mut(len);
    let (a_u, rest) = rest.split_at_mut(len);
    let (a_t, rest) = rest.split_at_mut(len);
    let (b_val, rest) = rest.split_at_mut(len);
    let (b_u, rest) = rest.split_at_mut(len);
    let (b_t, rest) = rest.split_at_mut(len);
    let (c_val, c_der) = rest.split_at_mut(len);

    let u1 = 1.0 + x + 0.5 * (y + z);
    let t1 = -0.5 * (y + z);
    let u2 = y + 0.5 * (1.0 + z);
    let t2 = 0.5 * (1.0 - z);
    homogeneous_jacobi_all(0.0, 0.0, u1, t1, a_val, a_u, a_t);

    for p in 0..=order {
        let nq = order - p + 1;
        let alpha_b = (2 * p + 1) as f64;
        homogeneous_jacobi_all(
            alpha_b,
            0.0,
            u2,
            t2,
            &mut b_val[..nq],
            &mut b_u[..nq],
            &mut b_t[..nq],
        );
        // Chain rule for the first factor: du1 = (1, 1/2, 1/2), dt1 = (0, -1/2, -1/2).
        let fa = a_val[p];
        let fa_x = a_u[p];
        let fa_yz = 0.5 * (a_u[p] - a_t[p]);
        for q in 0..nq {
            let nr = order - p - q + 1;
            let alpha_c = (2 * (p + q) + 2) as f64;
            jacobi_all(alpha_c, 0.0, z, &mut c_val[..nr], &mut c_der[..nr]);
            // Second factor: du2 = (0, 1, 1/2), dt2 = (0, 0, -1/2).
            let fb = b_val[q];
            let fb_y = b_u[q];
            let fb_z = 0.5 * (b_u[q] - b_t[q]);
            for r in 0..nr {
                let idx = dubiner_tetrahedron_index(p, q, r);
                let d = p + q + r;
                let c = ((2 * p + 1) as f64 * (p + q + 1) as f64 * (2 * d + 3) as f64 / 4.0).sqrt();
                let fc = c_val[r];
                values[idx] = c * fa * fb * fc;
                if let Some([dx, dy, dz]) = &mut derivatives {
                    dx[idx] = c * fa_x * fb * fc;
                    dy[idx] = c * (fa_yz * fb + fa * fb_y) * fc;
                    dz[idx] = c * ((fa_yz * fb + fa * fb_z) * fc + fa * fb * c_der[r]);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::quadrature::{gauss_legendre, tetrahedron_rule, triangle_rule};
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

    /// Reads the tetrahedral basis at a point into fresh vectors: values and the three gradients.
    fn tet_basis(order: usize, p: [f64; 3]) -> [Vec<f64>; 4] {
        let n = dubiner_tetrahedron_count(order);
        let [mut v, mut dx, mut dy, mut dz] = [0, 1, 2, 3].map(|_| vec![0.0; n]);
        dubiner_tetrahedron(order, p[0], p[1], p[2], &mut v, &mut dx, &mut dy, &mut dz);
        [v, dx, dy, dz]
    }

    #[test]
    fn dubiner_tetrahedron_index_is_a_bijection_graded_by_degree() {
        let order = 9;
        let n = dubiner_tetrahedron_count(order);
        let mut seen = vec![false; n];
        for p in 0..=order {
            for q in 0..=order - p {
                for r in 0..=order - p - q {
                    let d = p + q + r;
                    let idx = dubiner_tetrahedron_index(p, q, r);
                    // Degree d occupies [count(d-1), count(d)).
                    let lo = if d == 0 { 0 } else { dubiner_tetrahedron_count(d - 1) };
                    assert!((lo..dubiner_tetrahedron_count(d)).contains(&idx), "({p},{q},{r})");
                    assert!(!seen[idx], "index {idx} used twice");
                    seen[idx] = true;
                }
            }
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!([0, 1, 2, 3, 4].map(dubiner_tetrahedron_count), [1, 4, 10, 20, 35]);
    }

    #[test]
    fn dubiner_tetrahedron_mass_matrix_is_identity_orders_0_to_9() {
        for order in 0..=9 {
            let n = dubiner_tetrahedron_count(order);
            let rule = tetrahedron_rule(2 * order);
            let mut v = vec![0.0; n];
            let mut mass = vec![0.0; n * n];
            for q in 0..rule.n_points() {
                let pt = rule.point(q);
                dubiner_tetrahedron_impl(order, [pt[0], pt[1], pt[2]], &mut v, None);
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
            assert!(err < 1e-12, "order {order}: max |M - I| = {err:e}");
        }
    }

    #[test]
    fn dubiner_tetrahedron_is_hierarchical_and_graded_by_degree() {
        let mut rng = Rng::new(5);
        for k in 0..11 {
            let n_k = dubiner_tetrahedron_count(k);
            for _ in 0..3 {
                let p = rng.tetrahedron_point(0.0);
                let low = tet_basis(k, p);
                let high = tet_basis(k + 1, p);
                for (a, b) in low.iter().zip(&high) {
                    assert_eq!(&a[..], &b[..n_k]);
                }
            }
        }
        // The functions of index >= n(k) are orthogonal to every monomial x^a y^b z^c of total
        // degree <= k (graded by total degree).
        let order = 5;
        let n = dubiner_tetrahedron_count(order);
        let rule = tetrahedron_rule(2 * order);
        let mut v = vec![0.0; n];
        for k in 0..order {
            for a in 0..=k {
                for b in 0..=k - a {
                    let c = k - a - b;
                    let mut proj = vec![0.0; n];
                    for q in 0..rule.n_points() {
                        let pt = rule.point(q);
                        dubiner_tetrahedron_impl(order, [pt[0], pt[1], pt[2]], &mut v, None);
                        let m = pt[0].powi(a as i32) * pt[1].powi(b as i32) * pt[2].powi(c as i32);
                        for i in 0..n {
                            proj[i] += rule.weights[q] * m * v[i];
                        }
                    }
                    for (i, pi) in proj.iter().enumerate().skip(dubiner_tetrahedron_count(k)) {
                        assert!(pi.abs() < 1e-13, "x^{a} y^{b} z^{c} vs phi_{i}: {pi:e}");
                    }
                    // And it is not orthogonal to everything: the degree-k part is reached.
                    let lo = if k == 0 { 0 } else { dubiner_tetrahedron_count(k - 1) };
                    assert!(proj[lo..dubiner_tetrahedron_count(k)].iter().any(|x| x.abs() > 1e-3));
                }
            }
        }
    }

    #[test]
    fn dubiner_tetrahedron_ordering_matches_closed_forms() {
        // Degrees 0 and 1 written out from the collapsed-coordinate definition (with the
        // division, fine inside): index 0 is the constant, 1 is (1,0,0) with
        // t1 P_1(a) = 1 + x + (y+z)/2, 2 is (0,1,0) with ((1-z)/2) P_1^{(1,0)}(b),
        // P_1^{(1,0)}(b) = (1 + 3b)/2, 3 is (0,0,1) with P_1^{(2,0)}(z) = 1 + 2z.
        let mut rng = Rng::new(13);
        for _ in 0..10 {
            let p = rng.tetrahedron_point(0.0);
            let [x, y, z] = p;
            let [v, dx, dy, dz] = tet_basis(2, p);
            let t2 = 0.5 * (1.0 - z);
            let b = (1.0 + 2.0 * y + z) / (1.0 - z);
            let want = [
                0.75f64.sqrt(),
                7.5f64.sqrt() * (1.0 + x + 0.5 * (y + z)),
                2.5f64.sqrt() * t2 * 0.5 * (1.0 + 3.0 * b),
                1.25f64.sqrt() * (1.0 + 2.0 * z),
            ];
            for i in 0..4 {
                assert!((v[i] - want[i]).abs() < 1e-14, "phi_{i}: {} vs {}", v[i], want[i]);
            }
            // Gradients of the linear functions.
            let g1 = [1.0, 0.5, 0.5].map(|c| c * 7.5f64.sqrt());
            let g2 = [0.0, 1.5, 0.5].map(|c| c * 2.5f64.sqrt());
            let g3 = [0.0, 0.0, 2.0].map(|c| c * 1.25f64.sqrt());
            for (i, g) in [(1, g1), (2, g2), (3, g3)] {
                let got = [dx[i], dy[i], dz[i]];
                for s in 0..3 {
                    assert!((got[s] - g[s]).abs() < 1e-14, "d_{s} phi_{i}");
                }
            }
            // (0, q, r) functions do not depend on x; (0, 0, r) only on z.
            for (i, d) in dx.iter().enumerate() {
                let (pp, _, _) = tet_indices(2, i);
                if pp == 0 {
                    assert_eq!(*d, 0.0, "phi_{i}");
                }
            }
            assert_eq!((dx[9], dy[9]), (0.0, 0.0));
            // (0,0,2) = sqrt(7/4) P_2^{(2,0)}(z).
            assert!((v[9] - (7.0f64 / 4.0).sqrt() * jacobi(2, 2.0, 0.0, z)).abs() < 1e-14);
        }
    }

    /// `(p, q, r)` of index `i` at order `order`.
    fn tet_indices(order: usize, i: usize) -> (usize, usize, usize) {
        for p in 0..=order {
            for q in 0..=order - p {
                for r in 0..=order - p - q {
                    if dubiner_tetrahedron_index(p, q, r) == i {
                        return (p, q, r);
                    }
                }
            }
        }
        unreachable!("index {i} out of range")
    }

    #[test]
    fn dubiner_tetrahedron_gradients_match_finite_differences() {
        let mut rng = Rng::new(99);
        let h = 1e-6;
        for order in [1, 3, 6, 10] {
            let n = dubiner_tetrahedron_count(order);
            for _ in 0..15 {
                let p = rng.tetrahedron_point(1e-3);
                let [v, dx, dy, dz] = tet_basis(order, p);
                let scale = v.iter().fold(1.0f64, |m, a| m.max(a.abs()));
                for (s, grad) in [dx, dy, dz].iter().enumerate() {
                    let mut pp = p;
                    let mut pm = p;
                    pp[s] += h;
                    pm[s] -= h;
                    let vp = &tet_basis(order, pp)[0];
                    let vm = &tet_basis(order, pm)[0];
                    for i in 0..n {
                        let fd = (vp[i] - vm[i]) / (2.0 * h);
                        let tol = 1e-6 * grad[i].abs().max(scale);
                        assert!(
                            (fd - grad[i]).abs() < tol,
                            "order {order} d_{s} phi_{i} at {p:?}: {fd} vs {}",
                            grad[i]
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn dubiner_tetrahedron_is_regular_where_the_collapse_is_singular() {
        // The collapsed map is singular on the edge x = -1, y + z = 0 (from v2 to v3) and at the
        // top vertex v3 = (-1,-1,1). Values and gradients must be finite there and equal to the
        // limit from inside the tetrahedron (approached towards the centroid). The tolerance is
        // relative to the largest entry of each array: high-degree functions have large
        // derivatives there (P_r^{(a,0)}(1) = binom(r+a, r)), so an entry that vanishes at the
        // point moves by ~1e-5 over the step.
        let order = 8;
        let n = dubiner_tetrahedron_count(order);
        let eps = 1e-9;
        let singular = [[-1.0, 1.0, -1.0], [-1.0, 0.3, -0.3], [-1.0, -0.6, 0.6], [-1.0, -1.0, 1.0]];
        for p in singular {
            let at = tet_basis(order, p);
            let inside = tet_basis(order, p.map(|c| c + eps * (-0.5 - c)));
            for (a, b) in at.iter().zip(&inside) {
                let scale = a.iter().fold(1.0f64, |m, x| m.max(x.abs()));
                for i in 0..n {
                    assert!(a[i].is_finite(), "{p:?} phi_{i}");
                    assert!(
                        (a[i] - b[i]).abs() < 1e-6 * scale,
                        "{p:?} phi_{i}: {} vs {} (scale {scale})",
                        a[i],
                        b[i]
                    );
                }
            }
            // On the singular edge u1 = t1 = 0: every function with p >= 1 vanishes.
            for i in 0..n {
                let (pp, qq, _) = tet_indices(order, i);
                if pp >= 1 {
                    assert!(at[0][i].abs() < 1e-14, "{p:?} phi_{i}");
                }
                // At the top vertex also u2 = t2 = 0: q >= 1 vanishes too.
                if p[2] == 1.0 && qq >= 1 {
                    assert!(at[0][i].abs() < 1e-14, "{p:?} phi_{i}");
                }
            }
        }
        // phi_000 = sqrt(3)/2 everywhere.
        assert!((tet_basis(order, [-1.0, -1.0, 1.0])[0][0] - 0.75f64.sqrt()).abs() < 1e-15);
    }
}
