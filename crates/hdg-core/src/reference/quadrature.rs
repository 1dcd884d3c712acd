//! Gauss quadrature: Gauss-Jacobi rules on `[-1,1]` (Golub-Welsch, polished by Newton) and the
//! collapsed (Duffy) tensor rules on the reference triangle and tetrahedron built from them, and
//! the choice between those and the fully symmetric rules of `reference::symmetric_rules`.

use super::jacobi::{jacobi, jacobi_derivative};

/// Points and weights of a quadrature rule on a reference domain.
///
/// `points` holds `n_points * dim` coordinates, point-major (`points[i*dim + s]` is coordinate `s`
/// of point `i`); `weights[i]` is the weight of point `i`.
#[derive(Clone, Debug)]
pub struct QuadratureRule {
    /// Dimension of the domain (1 for a segment, 2 for a triangle, 3 for a tetrahedron).
    pub dim: usize,
    /// Coordinates, point-major.
    pub points: Vec<f64>,
    /// Weights, one per point.
    pub weights: Vec<f64>,
}

impl QuadratureRule {
    /// Number of points.
    pub fn n_points(&self) -> usize {
        self.weights.len()
    }

    /// The coordinates of point `i` (a slice of length `dim`).
    pub fn point(&self, i: usize) -> &[f64] {
        &self.points[i * self.dim..(i + 1) * self.dim]
    }
}

/// The `n`-point Gauss-Jacobi rule on `[-1,1]` for the weight `(1-x)^alpha (1+x)^beta`
/// (`alpha, beta > -1`): nodes in increasing order and weights. Exact for polynomials of degree
/// up to `2n-1` (times the weight).
///
/// Nodes are the eigenvalues of the symmetric tridiagonal Jacobi matrix of the orthonormal
/// recurrence (Golub-Welsch), computed by implicit QL; each is then polished by Newton steps on
/// `P_n^{(alpha,beta)}`, and the weights come from the Christoffel function
/// `w_i = 1 / sum_{k<n} p_k(x_i)^2` of the orthonormal polynomials `p_k`. Sums of squares have no
/// cancellation, so the weights keep full relative accuracy, small ones included (unlike the
/// squared first eigenvector components). Accuracy is about 1e-15 for `n` up to 40 and beyond.
///
/// # Panics
/// If `alpha <= -1` or `beta <= -1` (the weight is not integrable).
pub fn gauss_jacobi(n: usize, alpha: f64, beta: f64) -> (Vec<f64>, Vec<f64>) {
    assert!(alpha > -1.0 && beta > -1.0, "gauss_jacobi: need alpha, beta > -1");
    if n == 0 {
        return (Vec::new(), Vec::new());
    }
    let (a, b) = (alpha, beta);
    // Jacobi matrix: diagonal alpha_k, off-diagonal sqrt(beta_k).
    let diag: Vec<f64> = (0..n).map(|k| recurrence_alpha(k, a, b)).collect();
    let off: Vec<f64> = (1..n).map(|k| recurrence_beta(k, a, b).sqrt()).collect();
    let mut nodes = diag.clone();
    let mut e = off.clone();
    e.push(0.0);
    tridiagonal_eigenvalues(&mut nodes, &mut e);
    nodes.sort_by(f64::total_cmp);

    // Newton polish on P_n (simple roots, quadratic convergence from ~1e-15 away).
    for x in nodes.iter_mut() {
        for _ in 0..3 {
            let p = jacobi(n, a, b, *x);
            let dp = jacobi_derivative(n, a, b, *x);
            if dp == 0.0 || !dp.is_finite() {
                break;
            }
            let dx = p / dp;
            // Only accept a step that stays a correction (guards against a wild step).
            if dx.abs() > 1e-8 {
                break;
            }
            *x -= dx;
            if dx.abs() <= 1e-17 {
                break;
            }
        }
    }

    // Weights from the Christoffel function of the orthonormal polynomials.
    let mu0 = 2f64.powf(a + b + 1.0) * gamma(a + 1.0) * gamma(b + 1.0) / gamma(a + b + 2.0);
    let p0 = 1.0 / mu0.sqrt();
    let mut weights: Vec<f64> = nodes
        .iter()
        .map(|&x| {
            let mut prev = 0.0;
            let mut cur = p0;
            let mut sum = cur * cur;
            for k in 0..n - 1 {
                let prev_off = if k == 0 { 0.0 } else { off[k - 1] };
                let next = ((x - diag[k]) * cur - prev_off * prev) / off[k];
                prev = cur;
                cur = next;
                sum += cur * cur;
            }
            1.0 / sum
        })
        .collect();

    // Symmetric weight: make the rule exactly symmetric.
    if a == b {
        for i in 0..n / 2 {
            let j = n - 1 - i;
            let x = 0.5 * (nodes[j] - nodes[i]);
            nodes[i] = -x;
            nodes[j] = x;
            let w = 0.5 * (weights[i] + weights[j]);
            weights[i] = w;
            weights[j] = w;
        }
        if n & 1 == 1 {
            nodes[n / 2] = 0.0;
        }
    }
    (nodes, weights)
}

/// The `n`-point Gauss-Legendre rule on `[-1,1]` (weight 1), exact to degree `2n-1`.
pub fn gauss_legendre(n: usize) -> (Vec<f64>, Vec<f64>) {
    gauss_jacobi(n, 0.0, 0.0)
}

/// Gauss-Legendre rule on the segment `[-1,1]` exact for polynomials of degree `degree`
/// (`degree/2 + 1` points).
pub fn segment_rule(degree: usize) -> QuadratureRule {
    let (points, weights) = gauss_legendre(degree / 2 + 1);
    QuadratureRule { dim: 1, points, weights }
}

/// Collapsed (Duffy) Gauss rule on the reference triangle `(-1,-1), (1,-1), (-1,1)`, exact for
/// polynomials of total degree `degree`.
///
/// With `x = (1+a)(1-b)/2 - 1`, `y = b` the square `[-1,1]^2` maps onto the triangle with
/// Jacobian `(1-b)/2`; a polynomial of total degree `d` in `(x, y)` becomes one of degree at most
/// `d` in each of `a` and `b`. Gauss-Legendre in `a` and Gauss-Jacobi `(1,0)` in `b` (which absorbs
/// the factor `1-b` of the Jacobian) with `degree/2 + 1` points each are therefore exact.
/// No point lies on the boundary of the triangle.
pub fn triangle_rule(degree: usize) -> QuadratureRule {
    let n = degree / 2 + 1;
    let (xa, wa) = gauss_legendre(n);
    let (xb, wb) = gauss_jacobi(n, 1.0, 0.0);
    let mut points = Vec::with_capacity(2 * n * n);
    let mut weights = Vec::with_capacity(n * n);
    for (b, w_b) in xb.iter().zip(&wb) {
        for (a, w_a) in xa.iter().zip(&wa) {
            points.push(0.5 * (1.0 + a) * (1.0 - b) - 1.0);
            points.push(*b);
            weights.push(0.5 * w_a * w_b);
        }
    }
    QuadratureRule { dim: 2, points, weights }
}

/// Collapsed (Duffy) Gauss rule on the reference tetrahedron `(-1,-1,-1), (1,-1,-1), (-1,1,-1),
/// (-1,-1,1)`, exact for polynomials of total degree `degree`; the weights sum to the volume 4/3.
///
/// With `x = (1+a)(1-b)(1-c)/4 - 1`, `y = (1+b)(1-c)/2 - 1`, `z = c` the cube `[-1,1]^3` maps onto
/// the tetrahedron with Jacobian `(1-b)(1-c)^2/8`. The monomial `(1+x)^i (1+y)^j (1+z)^l` becomes
/// one of degree `i` in `a`, `i+j` in `b` and at most `i+j+l` in `c`, so a polynomial of total
/// degree `d` has degree at most `d` in each collapsed coordinate. Gauss-Legendre in `a`,
/// Gauss-Jacobi `(1,0)` in `b` and `(2,0)` in `c` (which absorb the Jacobian's factors `1-b` and
/// `(1-c)^2`) with `degree/2 + 1` points each are therefore exact. No point lies on the boundary.
pub fn tetrahedron_rule(degree: usize) -> QuadratureRule {
    let n = degree / 2 + 1;
    let (xa, wa) = gauss_legendre(n);
    let (xb, wb) = gauss_jacobi(n, 1.0, 0.0);
    let (xc, wc) = gauss_jacobi(n, 2.0, 0.0);
    let mut points = Vec::with_capacity(3 * n * n * n);
    let mut weights = Vec::with_capacity(n * n * n);
    for (c, w_c) in xc.iter().zip(&wc) {
        for (b, w_b) in xb.iter().zip(&wb) {
            for (a, w_a) in xa.iter().zip(&wa) {
                points.push(0.25 * (1.0 + a) * (1.0 - b) * (1.0 - c) - 1.0);
                points.push(0.5 * (1.0 + b) * (1.0 - c) - 1.0);
                points.push(*c);
                weights.push(0.125 * w_a * w_b * w_c);
            }
        }
    }
    QuadratureRule { dim: 3, points, weights }
}

/// The rule on the reference triangle exact for polynomials of total degree `degree` with the
/// fewest points: the symmetric rule of `reference::symmetric_rules` (degree up to 20, about two
/// thirds of the points) where it has fewer points than [`triangle_rule`], else that one. Both
/// have positive weights and no point on the boundary.
pub fn smallest_triangle_rule(degree: usize) -> QuadratureRule {
    smallest(triangle_rule(degree), super::symmetric_rules::symmetric_rule(2, degree))
}

/// The rule on the reference tetrahedron exact for polynomials of total degree `degree` with the
/// fewest points: the symmetric rule of `reference::symmetric_rules` (degree up to 18, under half
/// the points) where it has fewer points than [`tetrahedron_rule`], else that one.
pub fn smallest_tetrahedron_rule(degree: usize) -> QuadratureRule {
    smallest(tetrahedron_rule(degree), super::symmetric_rules::symmetric_rule(3, degree))
}

fn smallest(collapsed: QuadratureRule, symmetric: Option<QuadratureRule>) -> QuadratureRule {
    match symmetric {
        Some(rule) if rule.n_points() < collapsed.n_points() => rule,
        _ => collapsed,
    }
}

/// Diagonal entry `alpha_k` of the Jacobi matrix of the weight `(1-x)^a (1+x)^b`.
fn recurrence_alpha(k: usize, a: f64, b: f64) -> f64 {
    if k == 0 {
        // (b^2 - a^2) / ((a+b)(a+b+2)) with the factor a+b cancelled (it may vanish).
        (b - a) / (a + b + 2.0)
    } else {
        let s = 2.0 * k as f64 + a + b;
        (b * b - a * a) / (s * (s + 2.0))
    }
}

/// Squared off-diagonal entry `beta_k` (`k >= 1`) of the Jacobi matrix of the weight
/// `(1-x)^a (1+x)^b`.
fn recurrence_beta(k: usize, a: f64, b: f64) -> f64 {
    let kf = k as f64;
    let s = 2.0 * kf + a + b;
    if k == 1 {
        // The factor (k+a+b) / (2k+a+b-1) = (1+a+b)/(1+a+b) cancelled (it may be 0/0).
        4.0 * (1.0 + a) * (1.0 + b) / ((s * s) * (s + 1.0))
    } else {
        4.0 * kf * (kf + a) * (kf + b) * (kf + a + b) / ((s * s) * (s + 1.0) * (s - 1.0))
    }
}

/// Eigenvalues of the symmetric tridiagonal matrix with diagonal `d` and off-diagonal `e`
/// (`e[i]` couples `i` and `i+1`; `e[n-1]` is ignored), by the implicit QL algorithm with Wilkinson
/// shifts. On return `d` holds the eigenvalues (unordered); `e` is destroyed.
fn tridiagonal_eigenvalues(d: &mut [f64], e: &mut [f64]) {
    let n = d.len();
    if n == 0 {
        return;
    }
    e[n - 1] = 0.0;
    for l in 0..n {
        let mut iterations = 0;
        loop {
            // Find a negligible off-diagonal element to split the matrix.
            let mut m = l;
            while m < n - 1 {
                let dd = d[m].abs() + d[m + 1].abs();
                if e[m].abs() <= f64::EPSILON * dd {
                    break;
                }
                m += 1;
            }
            if m == l {
                break;
            }
            iterations += 1;
            assert!(iterations < 100, "tridiagonal QL did not converge");
            let mut g = (d[l + 1] - d[l]) / (2.0 * e[l]);
            let mut r = g.hypot(1.0);
            g = d[m] - d[l] + e[l] / (g + r.copysign(g));
            let (mut s, mut c, mut p) = (1.0, 1.0, 0.0);
            let mut i = m;
            let mut deflated = false;
            while i > l {
                i -= 1;
                let f = s * e[i];
                let bb = c * e[i];
                r = f.hypot(g);
                e[i + 1] = r;
                if r == 0.0 {
                    // Underflow: recover and restart this block.
                    d[i + 1] -= p;
                    e[m] = 0.0;
                    deflated = true;
                    break;
                }
                s = f / r;
                c = g / r;
                g = d[i + 1] - p;
                r = (d[i] - g) * s + 2.0 * c * bb;
                p = s * r;
                d[i + 1] = g + p;
                g = c * r - bb;
            }
            if deflated {
                continue;
            }
            d[l] -= p;
            e[l] = g;
            e[m] = 0.0;
        }
    }
}

/// Gamma function for positive arguments: exact products for integers (the common case: the
/// weights of the Legendre and `(1,0)` rules) and half-integers, Lanczos approximation (`g = 7`, 9 terms,
/// relative error ~1e-15) otherwise, with the reflection formula below 1/2.
pub(crate) fn gamma(x: f64) -> f64 {
    if x == x.round() && (1.0..=171.0).contains(&x) {
        return (1..x as usize).map(|k| k as f64).product();
    }
    if x - 0.5 == (x - 0.5).round() && (0.5..=170.5).contains(&x) {
        // Gamma(k + 1/2) = sqrt(pi) prod_{j<k} (j + 1/2).
        let k = (x - 0.5) as usize;
        return std::f64::consts::PI.sqrt() * (0..k).map(|j| j as f64 + 0.5).product::<f64>();
    }
    if x < 0.5 {
        return std::f64::consts::PI / ((std::f64::consts::PI * x).sin() * gamma(1.0 - x));
    }
    // Lanczos is most accurate near 1 (small powers of t): shift down with the recurrence
    // Gamma(x) = (x-1) Gamma(x-1), which costs one rounding per step.
    let mut y = x;
    let mut factor = 1.0;
    while y > 1.5 && factor < 1e300 {
        y -= 1.0;
        factor *= y;
    }
    factor * lanczos_gamma(y)
}

/// Lanczos approximation of Gamma (`g = 7`, 9 terms), with the reflection formula below 1/2.
fn lanczos_gamma(x: f64) -> f64 {
    if x < 0.5 {
        return std::f64::consts::PI / ((std::f64::consts::PI * x).sin() * lanczos_gamma(1.0 - x));
    }
    const G: f64 = 7.0;
    const COEFFICIENTS: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    let x = x - 1.0;
    let mut acc = COEFFICIENTS[0];
    for (i, c) in COEFFICIENTS.iter().enumerate().skip(1) {
        acc += c / (x + i as f64);
    }
    let t = x + G + 0.5;
    (2.0 * std::f64::consts::PI).sqrt() * t.powf(x + 0.5) * (-t).exp() * acc
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::f64::consts::PI;

    fn binom(n: usize, k: usize) -> f64 {
        (0..k).map(|i| (n - i) as f64 / (i + 1) as f64).product()
    }

    /// Exact `int_{-1}^{1} (1-x)^a (1+x)^b x^p dx` for integer `a, b`, by expanding the integrand
    /// into monomials (integer coefficients, exact in f64) and `int x^k = 2/(k+1)` (k even).
    fn exact_integer_moment(a: usize, b: usize, p: usize) -> f64 {
        let mut coeffs = vec![0.0; a + b + p + 1];
        for i in 0..=a {
            for j in 0..=b {
                let sign = if i & 1 == 0 { 1.0 } else { -1.0 };
                coeffs[i + j + p] += sign * binom(a, i) * binom(b, j);
            }
        }
        coeffs
            .iter()
            .enumerate()
            .filter(|(k, _)| k & 1 == 0)
            .map(|(k, c)| c * 2.0 / (k as f64 + 1.0))
            .sum()
    }

    /// `int_{-1}^{1} (1-x)^a (1+x)^b x^p dx` for real `a, b`, from
    /// `x^p = sum_k binom(p,k) (-1)^{p-k} (1+x)^k` and Beta integrals; also returns the sum of
    /// absolute values of the terms (the scale of the cancellation).
    fn beta_moment(a: f64, b: f64, p: usize) -> (f64, f64) {
        let beta = |x: f64, y: f64| gamma(x) * gamma(y) / gamma(x + y);
        let mut sum = 0.0;
        let mut scale = 0.0;
        for k in 0..=p {
            let sign = if (p - k) & 1 == 0 { 1.0 } else { -1.0 };
            let term =
                binom(p, k) * 2f64.powf(a + b + k as f64 + 1.0) * beta(a + 1.0, b + k as f64 + 1.0);
            sum += sign * term;
            scale += term;
        }
        (sum, scale)
    }

    fn quad(x: &[f64], w: &[f64], f: impl Fn(f64) -> f64) -> f64 {
        x.iter().zip(w).map(|(x, w)| w * f(*x)).sum()
    }

    #[test]
    fn gamma_known_values() {
        assert_eq!(gamma(1.0), 1.0);
        assert_eq!(gamma(5.0), 24.0);
        assert!((gamma(0.5) - PI.sqrt()).abs() < 1e-15);
        assert!((gamma(1.5) - 0.5 * PI.sqrt()).abs() < 1e-15);
        assert!((gamma(3.5) - 3.323_350_970_447_842_6).abs() < 1e-14);
        // The Lanczos branch on its working range [0.5, 1.5] against the exact values.
        for &x in &[0.5, 1.0, 1.5] {
            assert!((lanczos_gamma(x) - gamma(x)).abs() < 2e-15 * gamma(x), "x = {x}");
        }
        // Gamma(x+1) = x Gamma(x) across the Lanczos branch, and the shifted evaluation agrees
        // with the exact values at half-integers to a few ulps.
        for &x in &[0.1, 0.73, 1.3, 2.9, 7.25, 15.75] {
            assert!((gamma(x + 1.0) - x * gamma(x)).abs() < 1e-14 * gamma(x + 1.0));
        }
        for k in 0..20 {
            let x = k as f64 + 0.5;
            let shifted = (1..=k).map(|j| j as f64 - 0.5).product::<f64>() * lanczos_gamma(0.5);
            assert!((shifted - gamma(x)).abs() < 4e-15 * gamma(x), "x = {x}");
        }
    }

    #[test]
    fn gauss_legendre_exact_to_degree_2n_minus_1() {
        for n in 1..=40 {
            let (x, w) = gauss_legendre(n);
            assert_eq!(x.len(), n);
            assert!(x.windows(2).all(|p| p[0] < p[1]));
            assert!(x.iter().all(|x| x.abs() < 1.0) && w.iter().all(|w| *w > 0.0));
            for p in 0..2 * n {
                let exact = if p & 1 == 0 { 2.0 / (p as f64 + 1.0) } else { 0.0 };
                let got = quad(&x, &w, |x| x.powi(p as i32));
                assert!((got - exact).abs() < 2e-15, "n={n} p={p}: {got} vs {exact}");
            }
            // The first degree past 2n-1 is not integrated exactly: the error on x^{2n} is the
            // Gauss error constant 2^{2n+1} (n!)^4 / ((2n+1) ((2n)!)^2).
            if n <= 12 {
                let fact = |k: usize| -> f64 { (1..=k).map(|j| j as f64).product() };
                let constant = 2f64.powi(2 * n as i32 + 1) * fact(n).powi(4)
                    / ((2 * n + 1) as f64 * fact(2 * n).powi(2));
                let p = 2 * n;
                let err = 2.0 / (p as f64 + 1.0) - quad(&x, &w, |x| x.powi(p as i32));
                assert!((err - constant).abs() < 1e-6 * constant, "n={n}: {err:e} vs {constant:e}");
            }
        }
    }

    #[test]
    fn gauss_legendre_matches_known_nodes() {
        let (x, w) = gauss_legendre(3);
        let r = (0.6f64).sqrt();
        assert!((x[0] + r).abs() < 1e-16 && x[1] == 0.0 && (x[2] - r).abs() < 1e-16);
        assert!((w[0] - 5.0 / 9.0).abs() < 1e-15 && (w[1] - 8.0 / 9.0).abs() < 1e-15);
    }

    #[test]
    fn gauss_jacobi_exact_for_integer_weights() {
        for (a, b) in [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (2, 1), (3, 2)] {
            for n in 1..=20 {
                let (x, w) = gauss_jacobi(n, a as f64, b as f64);
                assert!(x.windows(2).all(|p| p[0] < p[1]));
                for p in 0..2 * n {
                    let exact = exact_integer_moment(a, b, p);
                    let got = quad(&x, &w, |x| x.powi(p as i32));
                    assert!(
                        (got - exact).abs() < 1e-14 * exact.abs().max(1.0),
                        "a={a} b={b} n={n} p={p}: {got} vs {exact}"
                    );
                }
            }
        }
    }

    #[test]
    fn gauss_jacobi_exact_for_real_weights() {
        for (a, b) in [(0.5, -0.5), (-0.3, 0.7), (1.5, 2.25), (3.0, 0.5)] {
            for n in 1..=6 {
                let (x, w) = gauss_jacobi(n, a, b);
                for p in 0..2 * n {
                    let (exact, scale) = beta_moment(a, b, p);
                    let got = quad(&x, &w, |x| x.powi(p as i32));
                    assert!(
                        (got - exact).abs() < 1e-14 * scale,
                        "a={a} b={b} n={n} p={p}: {got} vs {exact}"
                    );
                }
            }
        }
    }

    #[test]
    fn gauss_jacobi_chebyshev_closed_forms_up_to_40_points() {
        for n in 1..=40 {
            // First kind: (1-x^2)^(-1/2): x_i = cos((2i-1) pi / 2n), w_i = pi / n.
            let (x, w) = gauss_jacobi(n, -0.5, -0.5);
            for i in 0..n {
                let xi = -((2 * i + 1) as f64 * PI / (2 * n) as f64).cos();
                assert!((x[i] - xi).abs() < 1e-15, "T n={n} i={i}: {} vs {xi}", x[i]);
                assert!((w[i] - PI / n as f64).abs() < 1e-14, "T n={n} i={i}");
            }
            // Second kind: (1-x^2)^(1/2): x_i = cos(i pi/(n+1)), w_i = pi/(n+1) sin^2(i pi/(n+1)).
            let (x, w) = gauss_jacobi(n, 0.5, 0.5);
            for i in 0..n {
                let theta = (n - i) as f64 * PI / (n + 1) as f64;
                let wi = PI / (n + 1) as f64 * theta.sin().powi(2);
                assert!((x[i] - theta.cos()).abs() < 1e-15, "U n={n} i={i}");
                assert!((w[i] - wi).abs() < 1e-15, "U n={n} i={i}: {} vs {wi}", w[i]);
            }
        }
    }

    #[test]
    fn gauss_jacobi_1_0_at_40_points() {
        // The rule the triangle uses, at its largest size: moments of (1-x) x^p.
        let n = 40;
        let (x, w) = gauss_jacobi(n, 1.0, 0.0);
        for p in 0..2 * n {
            let exact = exact_integer_moment(1, 0, p);
            let got = quad(&x, &w, |x| x.powi(p as i32));
            assert!((got - exact).abs() < 1e-14, "p={p}: {got} vs {exact}");
        }
    }

    #[test]
    fn segment_rule_exact_to_degree() {
        for degree in 0..=30 {
            let rule = segment_rule(degree);
            assert_eq!(rule.dim, 1);
            for p in 0..=degree {
                let exact = if p & 1 == 0 { 2.0 / (p as f64 + 1.0) } else { 0.0 };
                let got: f64 = (0..rule.n_points())
                    .map(|i| rule.weights[i] * rule.point(i)[0].powi(p as i32))
                    .sum();
                assert!((got - exact).abs() < 1e-14);
            }
        }
    }

    /// Exact integral of `x^a y^b` over the reference triangle `(-1,-1),(1,-1),(-1,1)` as an
    /// iterated integral: `int_{-1}^{1} y^b int_{-1}^{-y} x^a dx dy
    /// = (-1)^{a+1}/(a+1) (M(a+b+1) - M(b))` with `M(k) = int_{-1}^{1} y^k dy` (no cancellation).
    fn exact_triangle_monomial(a: usize, b: usize) -> f64 {
        let moment = |k: usize| {
            if k & 1 == 0 {
                2.0 / (k as f64 + 1.0)
            } else {
                0.0
            }
        };
        let sign = if (a + 1) & 1 == 0 { 1.0 } else { -1.0 };
        sign / (a as f64 + 1.0) * (moment(a + b + 1) - moment(b))
    }

    /// The same integral by the change of variables to the unit triangle: `x = 2r-1`,
    /// `y = 2s-1`, `dx dy = 4 dr ds`, `int r^i s^j = i! j! / (i+j+2)!` (alternating sum: only for
    /// small degrees).
    fn unit_triangle_monomial(a: usize, b: usize) -> f64 {
        let fact = |n: usize| -> f64 { (1..=n).map(|k| k as f64).product() };
        let mut sum = 0.0;
        for i in 0..=a {
            for j in 0..=b {
                let sign = if (a - i + b - j) & 1 == 0 { 1.0 } else { -1.0 };
                let coeff = binom(a, i) * binom(b, j) * 2f64.powi((i + j) as i32);
                sum += sign * coeff * fact(i) * fact(j) / fact(i + j + 2);
            }
        }
        4.0 * sum
    }

    fn triangle_integral(rule: &QuadratureRule, a: usize, b: usize) -> f64 {
        (0..rule.n_points())
            .map(|q| {
                let p = rule.point(q);
                rule.weights[q] * p[0].powi(a as i32) * p[1].powi(b as i32)
            })
            .sum()
    }

    #[test]
    fn triangle_rule_exact_for_monomials() {
        // Sanity of the closed form: area 2, int x = int y = -2/3 (centroid (-1/3, -1/3)).
        assert!((exact_triangle_monomial(0, 0) - 2.0).abs() < 1e-15);
        assert!((exact_triangle_monomial(1, 0) + 2.0 / 3.0).abs() < 1e-15);
        assert!((exact_triangle_monomial(0, 1) + 2.0 / 3.0).abs() < 1e-15);
        for d in 0..=8 {
            for a in 0..=d {
                let (e1, e2) =
                    (exact_triangle_monomial(a, d - a), unit_triangle_monomial(a, d - a));
                assert!((e1 - e2).abs() < 1e-13, "x^{a} y^{}: {e1} vs {e2}", d - a);
            }
        }
        for degree in 0..=24 {
            for rule in [triangle_rule(degree), smallest_triangle_rule(degree)] {
                check_triangle_rule(&rule, degree);
            }
        }
        // The symmetric rules are the ones chosen where they are smaller (the counts of
        // Witherden and Vincent's paper), the collapsed rule beyond the table.
        for (degree, points) in [(3, 4), (6, 12), (10, 25), (12, 33), (16, 60), (20, 79), (22, 144)]
        {
            assert_eq!(smallest_triangle_rule(degree).n_points(), points, "degree {degree}");
        }
    }

    /// Checks that `rule` is a rule on the reference triangle with positive weights, points
    /// strictly inside and exact for every monomial of total degree up to `degree`.
    fn check_triangle_rule(rule: &QuadratureRule, degree: usize) {
        assert_eq!(rule.dim, 2);
        assert_eq!(rule.points.len(), 2 * rule.n_points());
        for q in 0..rule.n_points() {
            let p = rule.point(q);
            assert!(rule.weights[q] > 0.0, "degree {degree}: weight {}", rule.weights[q]);
            assert!(p[0] > -1.0 && p[1] > -1.0 && p[0] + p[1] < 0.0, "point outside");
        }
        for d in 0..=degree {
            for a in 0..=d {
                let b = d - a;
                let exact = exact_triangle_monomial(a, b);
                let got = triangle_integral(rule, a, b);
                assert!(
                    (got - exact).abs() < 1e-13,
                    "degree {degree}: x^{a} y^{b}: {got} vs {exact}"
                );
            }
        }
    }

    #[test]
    fn triangle_rule_is_not_over_claimed() {
        // With n = degree/2 + 1 points per direction the rule is exact to 2n-1 >= degree, but
        // y^{2n} (degree 2n in b) is not integrated exactly.
        for degree in 0..=20 {
            let rule = triangle_rule(degree);
            let n = degree / 2 + 1;
            let got = triangle_integral(&rule, 0, 2 * n);
            let exact = exact_triangle_monomial(0, 2 * n);
            assert!((got - exact).abs() > 1e-10, "degree {degree}");
        }
    }

    fn factorial(n: usize) -> f64 {
        (1..=n).map(|k| k as f64).product()
    }

    /// Exact integral of `(1+x)^i (1+y)^j (1+z)^l` over the reference tetrahedron: with
    /// `x = 2r - 1` etc. it is `2^{i+j+l+3} int_{unit simplex} r^i s^j t^l
    /// = 2^{i+j+l+3} i! j! l! / (i+j+l+3)!` (Dirichlet's formula; no cancellation). These shifted
    /// monomials span the polynomials of each total degree, so exactness on them is exactness.
    fn exact_tetrahedron_shifted_monomial(i: usize, j: usize, l: usize) -> f64 {
        let d = i + j + l;
        2f64.powi(d as i32 + 3) * factorial(i) * factorial(j) * factorial(l) / factorial(d + 3)
    }

    /// Exact integral of the plain monomial `x^a y^b z^c` over the reference tetrahedron by
    /// expanding `x = (1+x) - 1` into shifted monomials (an alternating sum: small degrees only);
    /// also returns the sum of the absolute values of the terms (the scale of the cancellation).
    fn exact_tetrahedron_monomial(a: usize, b: usize, c: usize) -> (f64, f64) {
        let (mut sum, mut scale) = (0.0, 0.0);
        for i in 0..=a {
            for j in 0..=b {
                for l in 0..=c {
                    let sign = if (a - i + b - j + c - l) & 1 == 0 { 1.0 } else { -1.0 };
                    let term = binom(a, i)
                        * binom(b, j)
                        * binom(c, l)
                        * exact_tetrahedron_shifted_monomial(i, j, l);
                    sum += sign * term;
                    scale += term;
                }
            }
        }
        (sum, scale)
    }

    fn tetrahedron_integral(rule: &QuadratureRule, f: impl Fn(&[f64]) -> f64) -> f64 {
        (0..rule.n_points()).map(|q| rule.weights[q] * f(rule.point(q))).sum()
    }

    #[test]
    fn tetrahedron_rule_exact_for_monomials() {
        // Sanity of the closed forms: volume 4/3, centroid (-1/2, -1/2, -1/2), and an integral
        // done by hand: int (1+x)(1+y) = 2^5 1! 1! / 5! = 4/15.
        assert!((exact_tetrahedron_shifted_monomial(0, 0, 0) - 4.0 / 3.0).abs() < 1e-15);
        assert!((exact_tetrahedron_shifted_monomial(1, 1, 0) - 4.0 / 15.0).abs() < 1e-15);
        for (a, b, c) in [(1, 0, 0), (0, 1, 0), (0, 0, 1)] {
            assert!((exact_tetrahedron_monomial(a, b, c).0 + 2.0 / 3.0).abs() < 1e-15);
        }
        for degree in 0..=20 {
            assert_eq!(tetrahedron_rule(degree).n_points(), (degree / 2 + 1).pow(3));
            for rule in [tetrahedron_rule(degree), smallest_tetrahedron_rule(degree)] {
                check_tetrahedron_rule(&rule, degree);
            }
        }
        for (degree, points) in
            [(3, 8), (4, 14), (6, 24), (9, 81), (12, 145), (14, 213), (18, 352), (19, 1000)]
        {
            assert_eq!(smallest_tetrahedron_rule(degree).n_points(), points, "degree {degree}");
        }
    }

    /// Checks that `rule` is a rule on the reference tetrahedron with positive weights, points
    /// strictly inside and exact for every polynomial of total degree up to `degree`.
    fn check_tetrahedron_rule(rule: &QuadratureRule, degree: usize) {
        assert_eq!(rule.dim, 3);
        assert_eq!(rule.points.len(), 3 * rule.n_points());
        let volume: f64 = rule.weights.iter().sum();
        assert!((volume - 4.0 / 3.0).abs() < 1e-14, "degree {degree}: volume {volume}");
        for q in 0..rule.n_points() {
            let p = rule.point(q);
            assert!(rule.weights[q] > 0.0);
            assert!(p.iter().all(|c| *c > -1.0) && p[0] + p[1] + p[2] < -1.0, "outside");
        }
        // Every shifted monomial of total degree <= degree (a basis of P_degree).
        for d in 0..=degree {
            for i in 0..=d {
                for j in 0..=d - i {
                    let l = d - i - j;
                    let exact = exact_tetrahedron_shifted_monomial(i, j, l);
                    let got = tetrahedron_integral(rule, |p| {
                        (1.0 + p[0]).powi(i as i32)
                            * (1.0 + p[1]).powi(j as i32)
                            * (1.0 + p[2]).powi(l as i32)
                    });
                    assert!(
                        (got - exact).abs() < 1e-13 * exact,
                        "degree {degree}: (1+x)^{i} (1+y)^{j} (1+z)^{l}: {got} vs {exact}"
                    );
                }
            }
        }
        // Plain monomials x^a y^b z^c, for the degrees where the closed form is accurate.
        for d in 0..=degree.min(10) {
            for a in 0..=d {
                for b in 0..=d - a {
                    let c = d - a - b;
                    let (exact, scale) = exact_tetrahedron_monomial(a, b, c);
                    let got = tetrahedron_integral(rule, |p| {
                        p[0].powi(a as i32) * p[1].powi(b as i32) * p[2].powi(c as i32)
                    });
                    assert!(
                        (got - exact).abs() < 1e-14 * scale,
                        "degree {degree}: x^{a} y^{b} z^{c}: {got} vs {exact}"
                    );
                }
            }
        }
    }

    #[test]
    fn tetrahedron_rule_is_not_over_claimed() {
        // With n = degree/2 + 1 points per direction the rule is exact to 2n-1 >= degree, but
        // (1+z)^{2n} (degree 2n in c) is not integrated exactly.
        for degree in 0..=16 {
            let rule = tetrahedron_rule(degree);
            let n = degree / 2 + 1;
            let got = tetrahedron_integral(&rule, |p| (1.0 + p[2]).powi(2 * n as i32));
            let exact = exact_tetrahedron_shifted_monomial(0, 0, 2 * n);
            assert!((got - exact).abs() > 1e-10 * exact, "degree {degree}");
        }
    }
}
