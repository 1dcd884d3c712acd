//! The global trace operator as the trace solvers see it ([`TraceOperator`]), its copy in the
//! other precision ([`DemoteOperator`]), and which operator a backend's assembly builds
//! ([`TraceOperatorKind`]).
use std::fmt;
use std::str::FromStr;

use crate::csr::HostCsr;
use crate::error::{CoreError, Result};
use crate::real::Real;

use super::VectorOps;

/// Stage "trace solve": the assembled (or matrix-free) global trace operator, Dirichlet unknowns
/// eliminated, applied to a backend vector.
pub trait TraceOperator<T: Real>: Sync {
    /// The backend vector type it acts on.
    type Vector;
    /// Number of unknowns (rows).
    fn dim(&self) -> usize;
    /// y = A x.
    fn apply(&self, x: &Self::Vector, y: &mut Self::Vector) -> Result<()>;
    /// Whether [`TraceOperator::apply_update`] is implemented (one pass instead of a product
    /// and a vector update); false by default.
    fn fuses_update(&self) -> bool {
        false
    }
    /// y = b + alpha A x, or y += alpha A x without `b`, in one pass, with the bits of
    /// [`TraceOperator::apply`] into a scratch vector s followed by y = b + alpha s (resp.
    /// y += alpha s). Only where [`TraceOperator::fuses_update`] says so: the default is an
    /// error, and callers that cannot know compose `apply` with vector operations instead.
    fn apply_update(
        &self,
        alpha: T,
        x: &Self::Vector,
        b: Option<&Self::Vector>,
        y: &mut Self::Vector,
    ) -> Result<()> {
        let _ = (alpha, x, b, y);
        Err(CoreError::InvalidParameter {
            name: "trace operator",
            reason: "this operator has no fused product and update (fuses_update is false)".into(),
        })
    }
    /// The diagonal of A (for Jacobi preconditioning).
    fn diagonal(&self) -> Result<Self::Vector>;
    /// Size of the natural diagonal blocks (n_f: one face's unknowns).
    fn block_size(&self) -> usize;
    /// The diagonal blocks, `dim / block_size` dense row-major blocks (for block Jacobi).
    fn diagonal_blocks(&self) -> Result<Self::Vector>;
    /// Gershgorin bounds (lower, upper) on the spectrum, optionally of D^-1 A (`scaled`: the
    /// Jacobi-preconditioned operator, rows scaled by their diagonal entry).
    fn gershgorin_bounds(&self, scaled: bool) -> Result<(f64, f64)>;
    /// The matrix on the host (for direct solvers and checks).
    fn to_host_csr(&self) -> Result<HostCsr>;
}

/// An operator that can give a copy of itself in f32 on the same backend (mixed precision).
pub trait DemoteOperator<B: VectorOps<f32>>: TraceOperator<f64> {
    /// The f32 operator.
    type Low: TraceOperator<f32, Vector = <B as VectorOps<f32>>::Vector>;
    /// Rounds the operator to f32.
    fn demote(&self) -> Result<Self::Low>;
}

/// Which trace operator a backend's assembly builds: the assembled matrix in the dense block
/// format (every backend), or the element trace matrices applied element by element without
/// assembling (the CUDA backend).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TraceOperatorKind {
    /// The assembled trace matrix in the dense block format ([`crate::topology`]).
    #[default]
    Dbf,
    /// The matrix-free operator: element trace matrices, per-element products and a per-face
    /// gather.
    MatrixFree,
}

impl TraceOperatorKind {
    /// Both kinds.
    pub const ALL: [TraceOperatorKind; 2] = [TraceOperatorKind::Dbf, TraceOperatorKind::MatrixFree];

    /// The name in reports and settings: "dbf", "matrix-free".
    pub fn name(self) -> &'static str {
        match self {
            TraceOperatorKind::Dbf => "dbf",
            TraceOperatorKind::MatrixFree => "matrix-free",
        }
    }
}

impl fmt::Display for TraceOperatorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TraceOperatorKind {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| format!("unknown trace operator '{s}' (known: dbf, matrix-free)"))
    }
}

#[cfg(test)]
mod tests {
    use super::TraceOperatorKind;

    #[test]
    fn trace_operator_names_round_trip() {
        for kind in TraceOperatorKind::ALL {
            assert_eq!(kind.name().parse::<TraceOperatorKind>(), Ok(kind));
            assert_eq!(kind.to_string(), kind.name());
        }
        assert_eq!(TraceOperatorKind::default(), TraceOperatorKind::Dbf);
        assert!("csr".parse::<TraceOperatorKind>().unwrap_err().contains("matrix-free"));
    }
}
