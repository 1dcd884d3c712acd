//! The manufactured solutions, written once: u, grad u and the Laplacian of u of each, and the
//! source `f = -kappa lap u + c u` they give, as code generic over the arithmetic it runs on.
//!
//! The host evaluates them with `f64` ([`Manufactured::evaluate`], [`Manufactured::source`]);
//! the CUDA backend's build script evaluates the same functions with an [`Arithmetic`] that
//! records every operation and prints the record as CUDA source, so the device code of the
//! element loads and the error norms is generated from this file and never written by hand.
//! The device then performs the host's floating-point operations in the host's order (the
//! generated code forbids fused multiply-adds), and only the device's transcendental functions
//! (sin, cos, exp, sinh, cosh) may round differently.
//!
//! This file uses nothing outside `core`: the build script includes it with `#[path]`. Two
//! rules keep the generated code faithful to the host: a formula branches only on what the
//! generator knows (the dimension, the polynomial degree), never on a coordinate; and a value
//! is computed once and reused, in the operation order the host should round in.
use core::f64::consts::PI;
use core::ops::{Add, Mul, Neg, Sub};

/// The operations a manufactured solution is written in: `f64` on the host, a recorder in
/// the CUDA build script.
pub trait Arithmetic:
    Copy + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> + Neg<Output = Self>
{
    /// A number known when the formula is written (or generated).
    fn constant(value: f64) -> Self;
    /// sin
    fn sin(self) -> Self;
    /// cos
    fn cos(self) -> Self;
    /// (sin, cos) of one argument, each rounded as [`Arithmetic::sin`] and [`Arithmetic::cos`]
    /// round it; an arithmetic that computes both at once overrides it.
    #[inline]
    fn sin_cos(self) -> (Self, Self) {
        (self.sin(), self.cos())
    }
    /// The exponential.
    fn exp(self) -> Self;
    /// sinh
    fn sinh(self) -> Self;
    /// cosh
    fn cosh(self) -> Self;
    /// `self^exponent` by binary powering (the rounding of `f64::powi`).
    fn powi(self, exponent: u32) -> Self;
}

impl Arithmetic for f64 {
    #[inline]
    fn constant(value: f64) -> f64 {
        value
    }
    #[inline]
    fn sin(self) -> f64 {
        f64::sin(self)
    }
    #[inline]
    fn cos(self) -> f64 {
        f64::cos(self)
    }
    #[inline]
    fn exp(self) -> f64 {
        f64::exp(self)
    }
    #[inline]
    fn sinh(self) -> f64 {
        f64::sinh(self)
    }
    #[inline]
    fn cosh(self) -> f64 {
        f64::cosh(self)
    }
    #[inline]
    fn powi(self, exponent: u32) -> f64 {
        // The exponents are polynomial degrees (small): the conversion cannot fail.
        f64::powi(self, exponent as i32)
    }
}

/// u, grad u and the Laplacian of u at one point; `grad` has the point's dimension.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fields<A, const D: usize> {
    /// u
    pub u: A,
    /// grad u
    pub grad: [A; D],
    /// The Laplacian of u.
    pub laplacian: A,
}

/// Known solutions for verification, on the unit square or cube (they are defined everywhere).
///
/// Every solution is defined in 2D and 3D, so the same [`crate::Problem`] serves triangle and
/// tetrahedron meshes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Manufactured {
    /// u = sin(pi x) sin(pi y) (times sin(pi z) in 3D): symmetric, zero on the boundary of the
    /// unit square (cube).
    Sine,
    /// u = exp(x) sin(2 y) (times cosh(z) in 3D): not symmetric, non-zero boundary data.
    ExpSin,
    /// A full polynomial of the given degree (two powers of oblique linear forms and a mixed
    /// monomial, plus a second one in 3D), which a method of that order must reproduce to
    /// round-off.
    Polynomial(usize),
}

impl Manufactured {
    /// u, grad u and the Laplacian of u at `x` (2 or 3 coordinates).
    #[inline]
    pub fn evaluate<A: Arithmetic, const D: usize>(self, x: &[A; D]) -> Fields<A, D> {
        match self {
            Manufactured::Sine => sine(x),
            Manufactured::ExpSin => exp_sin(x),
            Manufactured::Polynomial(k) => polynomial(k, x),
        }
    }

    /// The source `f = -kappa lap u + c u` at `x`, for constant kappa and c.
    #[inline]
    pub fn source<A: Arithmetic, const D: usize>(self, x: &[A; D], kappa: A, reaction: A) -> A {
        let fields = self.evaluate(x);
        -kappa * fields.laplacian + reaction * fields.u
    }

    /// The polynomial degree of the Laplacian (and so of the source), when u is a polynomial.
    pub fn laplacian_degree(self) -> Option<usize> {
        match self {
            Manufactured::Polynomial(k) => Some(k.saturating_sub(2)),
            Manufactured::Sine | Manufactured::ExpSin => None,
        }
    }
}

/// The product of the factors, left to right.
fn product<A: Arithmetic>(factors: impl IntoIterator<Item = A>) -> A {
    factors.into_iter().reduce(|a, b| a * b).expect("a point has coordinates")
}

/// [`Manufactured::Sine`].
#[inline]
fn sine<A: Arithmetic, const D: usize>(x: &[A; D]) -> Fields<A, D> {
    let sin_cos = x.map(|xd| (A::constant(PI) * xd).sin_cos());
    let (sin, cos) = (sin_cos.map(|(s, _)| s), sin_cos.map(|(_, c)| c));
    let u = product(sin);
    let grad = core::array::from_fn(|d| {
        product((0..D).map(|e| if e == d { A::constant(PI) * cos[e] } else { sin[e] }))
    });
    let laplacian = A::constant(-(D as f64)) * A::constant(PI) * A::constant(PI) * u;
    Fields { u, grad, laplacian }
}

/// [`Manufactured::ExpSin`]: exp(x) sin(2 y), times cosh(z) in 3D.
#[inline]
fn exp_sin<A: Arithmetic, const D: usize>(x: &[A; D]) -> Fields<A, D> {
    let (ex, y2) = (x[0].exp(), A::constant(2.0) * x[1]);
    let (sin_2y, cos_2y) = y2.sin_cos();
    // exp(x) sin(2 y): the 2D solution, and the 3D one's first two factors.
    let plane = ex * sin_2y;
    let mut grad = [A::constant(0.0); D];
    // (1 - 4) u in 2D, (1 - 4 + 1) u in 3D.
    let (u, laplacian) = if D == 3 {
        let cosh_z = x[2].cosh();
        grad[0] = plane * cosh_z;
        grad[1] = A::constant(2.0) * ex * cos_2y * cosh_z;
        grad[2] = plane * x[2].sinh();
        (plane * cosh_z, A::constant(-2.0) * ex * sin_2y * cosh_z)
    } else {
        grad[0] = plane;
        grad[1] = A::constant(2.0) * ex * cos_2y;
        (plane, A::constant(-3.0) * ex * sin_2y)
    };
    Fields { u, grad, laplacian }
}

/// [`Manufactured::Polynomial`]: u = (a0 + a.x)^k + (b0 + b.x)^k + x y^(k-1) (+ y z^(k-1) in
/// 3D), degree exactly k, no symmetry.
#[inline]
fn polynomial<A: Arithmetic, const D: usize>(k: usize, x: &[A; D]) -> Fields<A, D> {
    // Coefficients keep |u| = O(1) on the unit square and cube for every k, so absolute error
    // thresholds mean the same at k = 1 and k = 8.
    const A_COEF: [f64; 4] = [0.2, 0.5, 0.3, 0.2];
    const B_COEF: [f64; 4] = [0.6, -0.5, 0.4, -0.3];
    let ki = k as i64;
    let kf = k as f64;
    // base^e, and 0 for a negative e (the derivative of a constant).
    let pow = |base: A, e: i64| match u32::try_from(e) {
        Ok(e) => base.powi(e),
        Err(_) => A::constant(0.0),
    };
    let c = A::constant;
    // c0 + c1 x + c2 y (+ c3 z): the 2D numbers do not depend on the 3D extension.
    let linear = |coef: &[f64; 4]| {
        let v = c(coef[0]) + c(coef[1]) * x[0] + c(coef[2]) * x[1];
        if D == 3 {
            v + c(coef[3]) * x[2]
        } else {
            v
        }
    };
    let grad_squared = |coef: &[f64; 4]| coef[1..=D].iter().map(|a| a * a).sum::<f64>();
    let (la, lb) = (linear(&A_COEF), linear(&B_COEF));

    let mut u = pow(la, ki) + pow(lb, ki) + x[0] * pow(x[1], ki - 1);
    let (da, db) = (c(kf) * pow(la, ki - 1), c(kf) * pow(lb, ki - 1));
    let mut grad = [A::constant(0.0); D];
    grad[0] = da * c(A_COEF[1]) + db * c(B_COEF[1]) + pow(x[1], ki - 1);
    grad[1] = da * c(A_COEF[2]) + db * c(B_COEF[2]) + x[0] * c(kf - 1.0) * pow(x[1], ki - 2);
    let c2 = kf * (kf - 1.0);
    let mut laplacian = c(c2 * grad_squared(&A_COEF)) * pow(la, ki - 2)
        + c(c2 * grad_squared(&B_COEF)) * pow(lb, ki - 2)
        + x[0] * c(kf - 1.0) * c(kf - 2.0) * pow(x[1], ki - 3);
    if D == 3 {
        u = u + x[1] * pow(x[2], ki - 1);
        grad[1] = grad[1] + pow(x[2], ki - 1);
        grad[2] = da * c(A_COEF[3]) + db * c(B_COEF[3]) + x[1] * c(kf - 1.0) * pow(x[2], ki - 2);
        laplacian = laplacian + x[1] * c(kf - 1.0) * c(kf - 2.0) * pow(x[2], ki - 3);
    }
    Fields { u, grad, laplacian }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOLUTIONS: [Manufactured; 7] = [
        Manufactured::Sine,
        Manufactured::ExpSin,
        Manufactured::Polynomial(0),
        Manufactured::Polynomial(1),
        Manufactured::Polynomial(2),
        Manufactured::Polynomial(3),
        Manufactured::Polynomial(5),
    ];

    /// The derivatives of one solution at `x` against central differences of its u: a wrong
    /// derivative would make every convergence test meaningless.
    fn check_derivatives<const D: usize>(m: Manufactured, x: [f64; D]) {
        let u = |x: [f64; D]| m.evaluate(&x).u;
        let fields = m.evaluate(&x);
        let h = 1e-4;
        for d in 0..D {
            let (mut xp, mut xm) = (x, x);
            xp[d] += h;
            xm[d] -= h;
            let fd = (u(xp) - u(xm)) / (2.0 * h);
            let g = fields.grad[d];
            assert!((fd - g).abs() < 1e-6 * (1.0 + g.abs()), "{m:?} at {x:?}: d{d} {fd} {g}");
        }
        let h = 1e-3;
        let mut fd_laplacian = 0.0;
        for d in 0..D {
            let (mut xp, mut xm) = (x, x);
            xp[d] += h;
            xm[d] -= h;
            fd_laplacian += (u(xp) - 2.0 * u(x) + u(xm)) / (h * h);
        }
        let l = fields.laplacian;
        assert!(
            (fd_laplacian - l).abs() < 1e-4 * (1.0 + l.abs()),
            "{m:?} at {x:?}: {fd_laplacian} {l}"
        );
    }

    #[test]
    fn derivatives_match_finite_differences() {
        for m in SOLUTIONS {
            for x in [[0.3, 0.7], [0.91, 0.15], [0.5, 0.5]] {
                check_derivatives(m, x);
            }
            for x in [[0.3, 0.7, 0.45], [0.8, 0.1, 0.95]] {
                check_derivatives(m, x);
            }
        }
    }

    /// Values worked out by hand, so a formula and its derivative cannot be wrong together.
    #[test]
    fn hand_checked_values() {
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-14 * (1.0 + b.abs());
        // sin(pi/2)^2 = 1, a maximum: grad u = 0, lap u = -2 pi^2 u.
        let f = Manufactured::Sine.evaluate(&[0.5, 0.5]);
        assert!(close(f.u, 1.0) && close(f.grad[0], 0.0) && close(f.laplacian, -2.0 * PI * PI));
        // At (0.5, 0.5, 1/6): u = 1/2, du/dz = pi cos(pi/6) = pi sqrt(3)/2.
        let f = Manufactured::Sine.evaluate(&[0.5, 0.5, 1.0 / 6.0]);
        assert!(close(f.u, 0.5) && close(f.grad[2], PI * 3f64.sqrt() / 2.0));
        assert!(close(f.laplacian, -1.5 * PI * PI));
        // exp(0) sin(pi/2) = 1; du/dy = 2 cos(pi/2) = 0; lap = (1 - 4) u.
        let f = Manufactured::ExpSin.evaluate(&[0.0, PI / 4.0]);
        assert!(close(f.u, 1.0) && close(f.grad[0], 1.0) && close(f.grad[1], 0.0));
        assert!(close(f.laplacian, -3.0));
        // In 3D at z = 0: cosh 0 = 1, sinh 0 = 0, lap = (1 - 4 + 1) u.
        let f = Manufactured::ExpSin.evaluate(&[0.0, PI / 4.0, 0.0]);
        assert!(close(f.u, 1.0) && close(f.grad[2], 0.0) && close(f.laplacian, -2.0));
        // Degree 2 at the origin: u = 0.2^2 + 0.6^2, grad u = 2 (0.2 a + 0.6 b) + (y, x),
        // lap u = 2 |a|^2 + 2 |b|^2 (the monomial x y is harmonic).
        let f = Manufactured::Polynomial(2).evaluate(&[0.0, 0.0]);
        assert!(close(f.u, 0.4) && close(f.grad[0], 0.2 - 0.6) && close(f.grad[1], 0.6));
        assert!(close(f.laplacian, 2.0 * 0.34 + 2.0 * 0.41));
        // Degree 1 at (1, 1): u = 0.2 + 0.5 + 0.3 + 0.6 - 0.5 + 0.4 + 1, grad u = a + b + (1, 0).
        let f = Manufactured::Polynomial(1).evaluate(&[1.0, 1.0]);
        assert!(close(f.u, 2.5) && close(f.grad[0], 1.0) && close(f.grad[1], 0.7));
        assert!(close(f.laplacian, 0.0));
        // Degree 3 in 3D at (0, 1, 1): both linear forms are 0.7, then x y^2 + y z^2 = 1.
        let f = Manufactured::Polynomial(3).evaluate(&[0.0, 1.0, 1.0]);
        assert!(close(f.u, 2.0 * 0.343 + 1.0));
    }

    /// The source is -kappa lap u + c u of the same evaluation, and the degrees are those of
    /// the Laplacians.
    #[test]
    fn source_and_degree() {
        for m in SOLUTIONS {
            let x = [0.3, 0.6, 0.8];
            let f = m.evaluate(&x);
            assert_eq!(m.source(&x, 1.5, 0.25), -1.5 * f.laplacian + 0.25 * f.u, "{m:?}");
        }
        assert_eq!(Manufactured::Polynomial(5).laplacian_degree(), Some(3));
        assert_eq!(Manufactured::Polynomial(1).laplacian_degree(), Some(0));
        assert_eq!(Manufactured::Sine.laplacian_degree(), None);
    }
}
