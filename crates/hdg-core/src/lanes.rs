//! SIMD lanes, one point or one element per lane.
//!
//! **Elements as lanes** ([`Batch`], [`Real::Lanes`]): the small dense kernels of one element
//! (the CPU backend's Cholesky and triangular solves) also run on [`Lanes`] values, one
//! element per lane, so that several elements' factorisations proceed together. One element
//! alone is a chain of dependent operations (a Cholesky pivot waits for the sums before it);
//! four or eight independent chains keep the arithmetic units busy (a 14 x 14 Cholesky runs
//! several times the scalar throughput; BENCHMARKS.md, section 'Element kernels: condensation,
//! recovery, postprocessing'). Every lane performs the scalar kernel's
//! operations in the same order, and addition, subtraction, multiplication, division and the
//! square root are the IEEE operations of each lane (wide's, which fuses no multiply-add): a
//! batched element's results equal the scalar path's to the bit.
//!
//! **Points as lanes** ([`for_each_point`], [`source_at`]): the manufactured solutions
//! evaluated four points at a time. The loads and the error norms evaluate them at every
//! quadrature point of every cell, and libm's scalar `sin`/`cos` were most of that time.
//! `Lanes<f64x4>` is an [`Arithmetic`], so the formulas of
//! [`crate::manufactured`] run unchanged on it. Addition, subtraction, multiplication and
//! negation are the IEEE operations of each lane, so every formula rounds as it does in f64;
//! `sin` and `cos` are wide's vectorised ones (within 2 ulp of libm's on the arguments the
//! manufactured solutions meet); `exp`, `sinh`, `cosh` and `powi` call the f64 functions lane by
//! lane (wide's `exp` returns 0 out of range, and these are not where the time goes). A chunk
//! with an argument of `sin`/`cos` that is large or not finite is evaluated by the scalar
//! functions instead (the vectorised argument reduction is exact only for moderate arguments).
use core::fmt::Debug;
use core::ops::{Add, AddAssign, Div, Mul, MulAssign, Neg, Sub, SubAssign};

use wide::{f32x8, f64x4, CmpGt};

use crate::manufactured::{Arithmetic, Fields, Manufactured};
use crate::Real;

/// Points per chunk.
pub const LANES: usize = 4;

/// Above this |argument| the chunk's sin and cos are libm's (wide's reduction by pi/2 in three
/// parts keeps full accuracy well beyond it).
const LARGEST_VECTOR_ARGUMENT: f64 = 1e5;

/// Values of several points or elements, one per lane: `Lanes<f64x4>` (four f64) and
/// `Lanes<f32x8>` (eight f32).
#[derive(Clone, Copy, Debug)]
pub struct Lanes<V>(V);

impl Lanes<f64x4> {
    fn map(self, f: impl Fn(f64) -> f64) -> Self {
        Lanes(f64x4::new(self.0.to_array().map(f)))
    }

    /// Whether wide's sin and cos may be used on every lane.
    fn moderate(self) -> bool {
        self.0.to_array().iter().all(|v| v.abs() <= LARGEST_VECTOR_ARGUMENT)
    }

    /// The four values.
    pub fn to_array(self) -> [f64; LANES] {
        self.0.to_array()
    }
}

/// The arithmetic of the small dense kernels (Cholesky, triangular solves): f32 and f64, and
/// lanes of them.
pub trait Dense:
    Copy
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + AddAssign
    + SubAssign
    + MulAssign
{
    /// 0
    fn zero() -> Self;
    /// 1
    fn one() -> Self;
    /// The square root.
    fn sqrt(self) -> Self;
    /// Whether the value (any lane of it) is NaN or not above zero.
    fn not_positive(self) -> bool;
}

impl<T: Real> Dense for T {
    #[inline(always)]
    fn zero() -> T {
        T::zero()
    }
    #[inline(always)]
    fn one() -> T {
        T::one()
    }
    #[inline(always)]
    fn sqrt(self) -> T {
        num_traits::Float::sqrt(self)
    }
    #[inline(always)]
    fn not_positive(self) -> bool {
        self.is_nan() || self <= T::zero()
    }
}

/// Lanes of elements in precision `T` ([`Real::Lanes`]).
pub trait Batch<T>: Dense + Debug + Send + Sync {
    /// Elements per batch.
    const WIDTH: usize;
    /// The lanes holding `values` (its first WIDTH).
    fn pack(values: &[T]) -> Self;
    /// The lanes holding `value(0)`, ..., `value(WIDTH - 1)`.
    fn gather(value: impl Fn(usize) -> T) -> Self;
    /// Every lane holding `value`.
    fn splat(value: T) -> Self;
    /// Lane `lane`.
    fn lane(self, lane: usize) -> T;
}

/// One element in a batch of its own: the scalar kernels are the batched ones at width 1.
impl<T: Real> Batch<T> for T {
    const WIDTH: usize = 1;
    #[inline(always)]
    fn pack(values: &[T]) -> Self {
        values[0]
    }
    #[inline(always)]
    fn gather(value: impl Fn(usize) -> T) -> Self {
        value(0)
    }
    #[inline(always)]
    fn splat(value: T) -> Self {
        value
    }
    #[inline(always)]
    fn lane(self, _: usize) -> T {
        self
    }
}

macro_rules! lanes {
    ($t:ty, $v:ty, $width:expr) => {
        impl Batch<$t> for Lanes<$v> {
            const WIDTH: usize = $width;
            #[inline(always)]
            fn pack(values: &[$t]) -> Self {
                let array: [$t; $width] = values[..$width].try_into().expect("WIDTH values");
                Lanes(<$v>::new(array))
            }
            #[inline(always)]
            fn gather(value: impl Fn(usize) -> $t) -> Self {
                Lanes(<$v>::new(core::array::from_fn(value)))
            }
            #[inline(always)]
            fn splat(value: $t) -> Self {
                Lanes(<$v>::splat(value))
            }
            #[inline(always)]
            fn lane(self, lane: usize) -> $t {
                self.0.to_array()[lane]
            }
        }
        impl Add for Lanes<$v> {
            type Output = Self;
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                Lanes(self.0 + o.0)
            }
        }
        impl Sub for Lanes<$v> {
            type Output = Self;
            #[inline(always)]
            fn sub(self, o: Self) -> Self {
                Lanes(self.0 - o.0)
            }
        }
        impl Mul for Lanes<$v> {
            type Output = Self;
            #[inline(always)]
            fn mul(self, o: Self) -> Self {
                Lanes(self.0 * o.0)
            }
        }
        impl Div for Lanes<$v> {
            type Output = Self;
            #[inline(always)]
            fn div(self, o: Self) -> Self {
                Lanes(self.0 / o.0)
            }
        }
        impl Neg for Lanes<$v> {
            type Output = Self;
            #[inline(always)]
            fn neg(self) -> Self {
                Lanes(-self.0)
            }
        }
        impl AddAssign for Lanes<$v> {
            #[inline(always)]
            fn add_assign(&mut self, o: Self) {
                self.0 = self.0 + o.0;
            }
        }
        impl SubAssign for Lanes<$v> {
            #[inline(always)]
            fn sub_assign(&mut self, o: Self) {
                self.0 = self.0 - o.0;
            }
        }
        impl MulAssign for Lanes<$v> {
            #[inline(always)]
            fn mul_assign(&mut self, o: Self) {
                self.0 = self.0 * o.0;
            }
        }
        impl Dense for Lanes<$v> {
            #[inline(always)]
            fn zero() -> Self {
                Lanes(<$v>::splat(0.0))
            }
            #[inline(always)]
            fn one() -> Self {
                Lanes(<$v>::splat(1.0))
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                Lanes(self.0.sqrt())
            }
            #[inline(always)]
            fn not_positive(self) -> bool {
                // NaN compares false: a lane that is not > 0 is NaN or <= 0.
                !self.0.cmp_gt(<$v>::splat(0.0)).all()
            }
        }
    };
}

lanes!(f64, f64x4, 4);
lanes!(f32, f32x8, 8);

impl Arithmetic for Lanes<f64x4> {
    #[inline]
    fn constant(value: f64) -> Self {
        Lanes(f64x4::splat(value))
    }
    #[inline]
    fn sin(self) -> Self {
        match self.moderate() {
            true => Lanes(self.0.sin()),
            false => self.map(f64::sin),
        }
    }
    #[inline]
    fn cos(self) -> Self {
        match self.moderate() {
            true => Lanes(self.0.cos()),
            false => self.map(f64::cos),
        }
    }
    /// wide computes sin and cos together (its `sin` and `cos` are the halves of `sin_cos`):
    /// one call gives both with the bits of the two.
    #[inline]
    fn sin_cos(self) -> (Self, Self) {
        match self.moderate() {
            true => {
                let (sin, cos) = self.0.sin_cos();
                (Lanes(sin), Lanes(cos))
            }
            false => (self.map(f64::sin), self.map(f64::cos)),
        }
    }
    fn exp(self) -> Self {
        self.map(f64::exp)
    }
    fn sinh(self) -> Self {
        self.map(f64::sinh)
    }
    fn cosh(self) -> Self {
        self.map(f64::cosh)
    }
    fn powi(self, exponent: u32) -> Self {
        self.map(|v| Arithmetic::powi(v, exponent))
    }
}

/// Points `first..first + LANES` of `points` (D coordinates each) as D lane values; past the
/// last point the last point is repeated.
fn chunk_of_points<const D: usize>(points: &[f64], first: usize) -> [Lanes<f64x4>; D] {
    let n = points.len() / D;
    core::array::from_fn(|r| {
        Lanes(f64x4::new(core::array::from_fn(|l| points[(first + l).min(n - 1) * D + r])))
    })
}

/// Calls `each(p, fields)` for every point p of `points` (D coordinates each, point-major),
/// the fields of `m` evaluated four points at a time (a last partial chunk repeats its last
/// point in the unused lanes).
pub fn for_each_point<const D: usize>(
    m: Manufactured,
    points: &[f64],
    mut each: impl FnMut(usize, Fields<f64, D>),
) {
    let n = points.len() / D;
    for first in (0..n).step_by(LANES) {
        let x = chunk_of_points::<D>(points, first);
        let fields = m.evaluate(&x);
        let (u, laplacian) = (fields.u.to_array(), fields.laplacian.to_array());
        let grad = fields.grad.map(Lanes::<f64x4>::to_array);
        for l in 0..LANES.min(n - first) {
            let grad = core::array::from_fn(|r| grad[r][l]);
            each(first + l, Fields { u: u[l], grad, laplacian: laplacian[l] });
        }
    }
}

/// The source `-kappa lap u + c u` of `m` at every point of `points` (D coordinates each),
/// into `out`, with the operations of [`Manufactured::source`].
pub fn source_at<const D: usize>(
    m: Manufactured,
    kappa: f64,
    reaction: f64,
    points: &[f64],
    out: &mut [f64],
) {
    let (kappa, reaction) = (Lanes::<f64x4>::constant(kappa), Lanes::constant(reaction));
    let n = points.len() / D;
    for first in (0..n).step_by(LANES) {
        let x = chunk_of_points::<D>(points, first);
        let f = m.source(&x, kappa, reaction).to_array();
        let count = LANES.min(n - first);
        out[first..first + count].copy_from_slice(&f[..count]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every manufactured solution on lanes against the f64 evaluation, point by point: the
    /// polynomial to the bit (no transcendental function), the others within a few ulp.
    #[test]
    fn lanes_evaluate_what_f64_evaluates() {
        let points: Vec<f64> = (0..7 * 3).map(|i| 0.13 + 0.37 * (i as f64 * 0.71).sin()).collect();
        for m in [Manufactured::Sine, Manufactured::ExpSin, Manufactured::Polynomial(5)] {
            let mut seen = 0;
            for_each_point::<3>(m, &points, |p, lanes| {
                let x = [points[3 * p], points[3 * p + 1], points[3 * p + 2]];
                let scalar = m.evaluate(&x);
                let close = |a: f64, b: f64| match m {
                    Manufactured::Polynomial(_) => a.to_bits() == b.to_bits(),
                    _ => (a - b).abs() <= 4.0 * f64::EPSILON * b.abs().max(1.0),
                };
                assert!(close(lanes.u, scalar.u), "{m:?} at {x:?}: u");
                assert!(close(lanes.laplacian, scalar.laplacian), "{m:?} at {x:?}: lap u");
                for r in 0..3 {
                    assert!(close(lanes.grad[r], scalar.grad[r]), "{m:?} at {x:?}: grad");
                }
                seen += 1;
            });
            assert_eq!(seen, 7);
            let mut f = vec![0.0; 7];
            source_at::<3>(m, 2.0, 0.5, &points, &mut f);
            for (p, &fp) in f.iter().enumerate() {
                let want =
                    m.source(&[points[3 * p], points[3 * p + 1], points[3 * p + 2]], 2.0, 0.5);
                assert!((fp - want).abs() <= 1e-14 * want.abs().max(1.0), "{m:?}: source");
            }
        }
    }

    /// Large and non-finite arguments take libm's functions: the same values as f64.
    #[test]
    fn large_arguments_use_the_scalar_functions() {
        let points = [3e7, 0.25, f64::NAN, 1.5];
        for_each_point::<2>(Manufactured::Sine, &points, |p, lanes| {
            let scalar = Manufactured::Sine.evaluate(&[points[2 * p], points[2 * p + 1]]);
            assert_eq!(lanes.u.to_bits(), scalar.u.to_bits());
        });
    }
}
