//! The precision trait: every numeric kernel is generic over `T: Real` (f32 or f64).
use std::fmt::{Debug, Display};
use std::iter::Sum;

use num_traits::{Float, NumAssign};

/// A floating-point precision the pipeline can run in.
///
/// Reference data is computed once in f64 and converted with [`Real::from_f64_lossy`]; results
/// are reported back in f64 with [`Real::as_f64`]. Built on `num_traits::Float` so that generic
/// kernels read like scalar code.
pub trait Real:
    Float + NumAssign + Sum + Copy + Send + Sync + Debug + Display + Default + 'static
{
    /// "f32" or "f64", for reports.
    const NAME: &'static str;
    /// Unit round-off (half the machine epsilon).
    const UNIT_ROUNDOFF: f64;

    /// Converts from f64, rounding to nearest.
    fn from_f64_lossy(x: f64) -> Self;
    /// Converts to f64 (exact).
    fn as_f64(self) -> f64;
}

impl Real for f64 {
    const NAME: &'static str = "f64";
    const UNIT_ROUNDOFF: f64 = f64::EPSILON / 2.0;
    #[inline(always)]
    fn from_f64_lossy(x: f64) -> Self {
        x
    }
    #[inline(always)]
    fn as_f64(self) -> f64 {
        self
    }
}

impl Real for f32 {
    const NAME: &'static str = "f32";
    const UNIT_ROUNDOFF: f64 = f32::EPSILON as f64 / 2.0;
    #[inline(always)]
    fn from_f64_lossy(x: f64) -> Self {
        x as f32
    }
    #[inline(always)]
    fn as_f64(self) -> f64 {
        self as f64
    }
}

/// Converts a slice of f64 to the working precision.
pub fn convert_slice<T: Real>(values: &[f64]) -> Vec<T> {
    values.iter().map(|&v| T::from_f64_lossy(v)).collect()
}
