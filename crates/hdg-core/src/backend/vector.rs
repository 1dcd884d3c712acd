//! Vector storage and the operations on it that every solver is built from, in layers: the
//! level-1 operations ([`VectorOps`]), their fusions ([`FusedOps`], all with defaults),
//! batched dense blocks ([`BlockOps`], for block Jacobi) and the two precisions of one backend
//! ([`MixedPrecisionOps`]).
use crate::error::{CoreError, Result};
use crate::real::Real;

/// Vector storage and the level-1 operations (BLAS-1 and elementwise) every solver is built
/// from: what a new backend implements first. Fusions of them that solvers use are
/// [`FusedOps`], batched dense blocks [`BlockOps`].
///
/// Every operation returns a `Result` because on a device any launch may fail. Scalars (dot
/// products) come back to the host: a solver decides when it needs them.
pub trait VectorOps<T: Real>: Sync {
    /// A vector resident on the backend.
    type Vector: Send + Sync + 'static;
    /// A vector of zeros.
    fn zeros(&self, len: usize) -> Result<Self::Vector>;
    /// A copy of host data.
    fn copy_from_host(&self, data: &[T]) -> Result<Self::Vector>;
    /// A host copy.
    fn to_host(&self, v: &Self::Vector) -> Result<Vec<T>>;
    /// Length.
    fn len(&self, v: &Self::Vector) -> usize;
    /// dst = src.
    fn copy(&self, src: &Self::Vector, dst: &mut Self::Vector) -> Result<()>;
    /// y += alpha x.
    fn axpy(&self, alpha: T, x: &Self::Vector, y: &mut Self::Vector) -> Result<()>;
    /// y = x + beta y. The default scales, then adds (the same roundings as the fused form
    /// without a fused multiply-add); a backend overrides it to touch y once.
    fn xpby(&self, x: &Self::Vector, beta: T, y: &mut Self::Vector) -> Result<()> {
        self.scale(beta, y)?;
        self.axpy(T::one(), x, y)
    }
    /// y = alpha x + beta y. The default scales, then adds, as [`VectorOps::xpby`].
    fn axpby(&self, alpha: T, x: &Self::Vector, beta: T, y: &mut Self::Vector) -> Result<()> {
        self.scale(beta, y)?;
        self.axpy(alpha, x, y)
    }
    /// x = alpha x.
    fn scale(&self, alpha: T, x: &mut Self::Vector) -> Result<()>;
    /// x . y (one global reduction).
    fn dot(&self, x: &Self::Vector, y: &Self::Vector) -> Result<T>;
    /// y = a .* x (elementwise).
    fn pointwise_mul(&self, a: &Self::Vector, x: &Self::Vector, y: &mut Self::Vector)
        -> Result<()>;
    /// v = 1 ./ v (elementwise).
    fn reciprocal(&self, v: &mut Self::Vector) -> Result<()>;
}

/// Fusions of level-1 operations that Krylov solvers use. Each has a default that composes
/// [`VectorOps`], so a new backend works with `impl FusedOps<T> for MyBackend {}`; a tuned one
/// overrides them to touch memory once, launch one kernel and synchronise once.
pub trait FusedOps<T: Real>: VectorOps<T> {
    /// Several dot products in one global reduction phase: `[x_i . y_i]`.
    fn dot_many(&self, pairs: &[(&Self::Vector, &Self::Vector)]) -> Result<Vec<T>> {
        pairs.iter().map(|(x, y)| self.dot(x, y)).collect()
    }
    /// The CG update: x += alpha p, r -= alpha ap, and returns r . r (one pass, one reduction).
    fn cg_update(
        &self,
        alpha: T,
        p: &Self::Vector,
        ap: &Self::Vector,
        x: &mut Self::Vector,
        r: &mut Self::Vector,
    ) -> Result<T> {
        self.axpy(alpha, p, x)?;
        self.axpy(-alpha, ap, r)?;
        self.dot(r, r)
    }
}

/// Selected entries of a vector to and from the host: what a halo exchange between processes
/// needs (the distributed pipeline, `crate::distributed`). The indices are uploaded once and
/// used at every exchange.
pub trait HaloOps<T: Real>: VectorOps<T> {
    /// A list of vector indices resident on the backend.
    type Indices: Send + Sync;
    /// Uploads `indices` (entries of a vector, in the order of the exchange's buffers).
    fn upload_indices(&self, indices: &[u32]) -> Result<Self::Indices>;
    /// `out[i] = v[indices[i]]`.
    fn gather(&self, v: &Self::Vector, indices: &Self::Indices, out: &mut [T]) -> Result<()>;
    /// `v[indices[i]] = values[i]`.
    fn scatter(&self, values: &[T], indices: &Self::Indices, v: &mut Self::Vector) -> Result<()>;
    /// `v[indices[i]] = 0`.
    fn clear(&self, indices: &Self::Indices, v: &mut Self::Vector) -> Result<()>;
}

/// Batched small dense SPD blocks, for block Jacobi: `blocks` holds n_blocks dense b x b
/// blocks, row-major, b = `block_size`.
pub trait BlockOps<T: Real>: VectorOps<T> {
    /// Factorises every block in place for [`BlockOps::solve_blocks`]: a Cholesky
    /// factorisation (a block that is not SPD is an error), then each block is replaced by its
    /// inverse, so that a solve is one small matrix-vector product with no division.
    fn factor_blocks(&self, blocks: &mut Self::Vector, block_size: usize) -> Result<()>;
    /// z = blockdiag(B)^-1 r with the inverses of [`BlockOps::factor_blocks`].
    fn solve_blocks(
        &self,
        factors: &Self::Vector,
        block_size: usize,
        r: &Self::Vector,
        z: &mut Self::Vector,
    ) -> Result<()>;
    /// w = blockdiag(B)^-1 r followed by one step of a polynomial recurrence on (p, x)
    /// ([`RecurrenceStep::update`]). The default composes [`BlockOps::solve_blocks`] and the
    /// step's vector operations (w is written); a backend may fuse them into one pass that
    /// never stores w, with the same bits.
    fn solve_blocks_step(
        &self,
        factors: &Self::Vector,
        block_size: usize,
        r: &Self::Vector,
        w: &mut Self::Vector,
        step: RecurrenceStep<T>,
        p: &mut Self::Vector,
        x: &mut Self::Vector,
    ) -> Result<()> {
        self.solve_blocks(factors, block_size, r, w)?;
        step.update(self, w, p, x)
    }
}

/// One step of a polynomial recurrence (Chebyshev's) after w = M^-1 r: a search direction p
/// and an iterate x, both starting at zero.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RecurrenceStep<T> {
    /// p = w, x = alpha w (p and x are overwritten, whatever they held).
    First {
        /// Step length.
        alpha: T,
    },
    /// p = w + beta p, x += alpha p.
    Next {
        /// Step length.
        alpha: T,
        /// Weight of the previous direction.
        beta: T,
    },
}

impl<T: Real> RecurrenceStep<T> {
    /// The step through level-1 operations: `copy`, `copy`, `scale` for the first, `xpby`,
    /// `axpy` for the others (a fused version must round as these do).
    pub fn update<B: VectorOps<T> + ?Sized>(
        self,
        backend: &B,
        w: &B::Vector,
        p: &mut B::Vector,
        x: &mut B::Vector,
    ) -> Result<()> {
        match self {
            RecurrenceStep::First { alpha } => {
                backend.copy(w, p)?;
                backend.copy(p, x)?;
                backend.scale(alpha, x)
            }
            RecurrenceStep::Next { alpha, beta } => {
                backend.xpby(w, beta, p)?;
                backend.axpy(alpha, p, x)
            }
        }
    }
}

/// Conversions between the two precisions of one backend, for mixed-precision solvers.
pub trait MixedPrecisionOps: FusedOps<f64> + FusedOps<f32> {
    /// y = x rounded to f32.
    fn demote(
        &self,
        x: &<Self as VectorOps<f64>>::Vector,
        y: &mut <Self as VectorOps<f32>>::Vector,
    ) -> Result<()>;
    /// y += x (x widened to f64).
    fn promote_add(
        &self,
        x: &<Self as VectorOps<f32>>::Vector,
        y: &mut <Self as VectorOps<f64>>::Vector,
    ) -> Result<()>;
    /// y = x widened to f64 (the default clears y, then adds).
    fn promote(
        &self,
        x: &<Self as VectorOps<f32>>::Vector,
        y: &mut <Self as VectorOps<f64>>::Vector,
    ) -> Result<()> {
        VectorOps::<f64>::scale(self, 0.0, y)?;
        self.promote_add(x, y)
    }
}

/// The error of an operation given vectors of the wrong lengths: `expected` and `got` list the
/// lengths in the operation's argument order.
pub fn check_lengths(what: &str, expected: &[usize], got: &[usize]) -> Result<()> {
    if expected == got {
        return Ok(());
    }
    Err(CoreError::InvalidParameter {
        name: "vector length",
        reason: format!("{what}: expected lengths {expected:?}, got {got:?}"),
    })
}

/// The number of whole blocks of `block_len` entries in a vector of `len` entries ([`BlockOps`]),
/// or the error of a vector that is not whole blocks, or of an empty block.
pub fn whole_blocks(what: &str, len: usize, block_len: usize) -> Result<usize> {
    if block_len == 0 || !len.is_multiple_of(block_len) {
        return Err(CoreError::InvalidParameter {
            name: "block size",
            reason: format!("{what}: {len} entries are not whole blocks of {block_len} entries"),
        });
    }
    Ok(len / block_len)
}
