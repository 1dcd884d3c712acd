//! The precision trait: every numeric kernel is generic over `T: Real` (f32 or f64).
use std::fmt::{Debug, Display};
use std::iter::Sum;

use num_traits::{Float, NumAssign};

/// The precision of a run, a kernel or a value: the one name for f32 and f64 across the crates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Precision {
    /// f32.
    F32,
    /// f64.
    F64,
}

impl Precision {
    /// Both, f64 first (the default everywhere).
    pub const ALL: [Precision; 2] = [Precision::F64, Precision::F32];

    /// The precision of `T`.
    pub fn of<T: Real>() -> Precision {
        T::PRECISION
    }

    /// "f32" or "f64": in reports, kernel names and on command lines.
    pub const fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F64 => "f64",
        }
    }

    /// Bytes per value.
    pub const fn bytes(self) -> usize {
        match self {
            Precision::F32 => 4,
            Precision::F64 => 8,
        }
    }
}

impl Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Precision {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown precision '{s}' (known: f64, f32)"))
    }
}

/// A floating-point precision the pipeline can run in.
///
/// Reference data is computed once in f64 and converted with [`Real::from_f64_lossy`]; results
/// are reported back in f64 with [`Real::as_f64`]. Built on `num_traits::Float` so that generic
/// kernels read like scalar code.
pub trait Real:
    Float + NumAssign + Sum + Copy + Send + Sync + Debug + Display + Default + 'static
{
    /// Which one it is.
    const PRECISION: Precision;
    /// "f32" or "f64", for reports.
    const NAME: &'static str = Self::PRECISION.name();
    /// Unit round-off (half the machine epsilon).
    const UNIT_ROUNDOFF: f64;
    /// Several elements' values, one per SIMD lane ([`crate::lanes`]).
    type Lanes: crate::lanes::Batch<Self>;

    /// Converts from f64, rounding to nearest.
    fn from_f64_lossy(x: f64) -> Self;
    /// Converts to f64 (exact).
    fn as_f64(self) -> f64;
}

impl Real for f64 {
    const PRECISION: Precision = Precision::F64;
    const UNIT_ROUNDOFF: f64 = f64::EPSILON / 2.0;
    type Lanes = crate::lanes::Lanes<wide::f64x4>;
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
    const PRECISION: Precision = Precision::F32;
    const UNIT_ROUNDOFF: f64 = f32::EPSILON as f64 / 2.0;
    type Lanes = crate::lanes::Lanes<wide::f32x8>;
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

#[cfg(test)]
mod precision_tests {
    use super::{Precision, Real};

    #[test]
    fn names_and_sizes_match_the_types() {
        assert_eq!(Precision::of::<f64>(), Precision::F64);
        assert_eq!(Precision::of::<f32>(), Precision::F32);
        assert_eq!((f64::NAME, f32::NAME), ("f64", "f32"));
        assert_eq!(Precision::F64.bytes(), std::mem::size_of::<f64>());
        assert_eq!(Precision::F32.bytes(), std::mem::size_of::<f32>());
        for p in Precision::ALL {
            assert_eq!(p.name().parse::<Precision>(), Ok(p));
            assert_eq!(p.to_string(), p.name());
        }
        assert!("f16".parse::<Precision>().unwrap_err().contains("f16"));
    }
}
