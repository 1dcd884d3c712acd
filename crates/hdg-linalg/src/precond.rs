//! Preconditioners: identity, Jacobi, block Jacobi on the DBF diagonal blocks, and any f32
//! preconditioner inside an f64 method.
use std::sync::Mutex;

use hdg_core::{
    BlockOps, CoreError, MixedPrecisionOps, Preconditioner, Real, RecurrenceStep, Result,
    TraceOperator, VectorOps,
};

/// No preconditioning: z = r.
pub struct Identity;

impl<T: Real, B: VectorOps<T>> Preconditioner<T, B> for Identity {
    fn name(&self) -> String {
        "none".into()
    }
    fn apply(&self, backend: &B, r: &B::Vector, z: &mut B::Vector) -> Result<()> {
        backend.copy(r, z)
    }
}

/// Jacobi: z = D^-1 r, D the diagonal of the operator (inverted once, on the backend).
pub struct Jacobi<V> {
    inverse_diagonal: V,
}

impl<V> Jacobi<V> {
    /// Builds the preconditioner of `operator`.
    pub fn new<T: Real, B: VectorOps<T, Vector = V>>(
        backend: &B,
        operator: &dyn TraceOperator<T, Vector = V>,
    ) -> Result<Self> {
        let mut inverse_diagonal = operator.diagonal()?;
        backend.reciprocal(&mut inverse_diagonal)?;
        Ok(Jacobi { inverse_diagonal })
    }
}

impl<T: Real, B: VectorOps<T>> Preconditioner<T, B> for Jacobi<B::Vector> {
    fn name(&self) -> String {
        "jacobi".into()
    }
    fn apply(&self, backend: &B, r: &B::Vector, z: &mut B::Vector) -> Result<()> {
        backend.pointwise_mul(&self.inverse_diagonal, r, z)
    }
}

/// Block Jacobi: z = blockdiag(A)^-1 r with one n_f x n_f block per face (the DBF diagonal
/// blocks), each Cholesky-factorised once on the backend.
pub struct BlockJacobi<V> {
    factors: V,
    block_size: usize,
}

impl<V> BlockJacobi<V> {
    /// Builds the preconditioner of `operator`. Errors if a diagonal block is not SPD.
    pub fn new<T: Real, B: BlockOps<T, Vector = V>>(
        backend: &B,
        operator: &dyn TraceOperator<T, Vector = V>,
    ) -> Result<Self> {
        let block_size = operator.block_size();
        let mut factors = operator.diagonal_blocks()?;
        backend.factor_blocks(&mut factors, block_size)?;
        Ok(BlockJacobi { factors, block_size })
    }
}

impl<T: Real, B: BlockOps<T>> Preconditioner<T, B> for BlockJacobi<B::Vector> {
    fn name(&self) -> String {
        "block-jacobi".into()
    }
    fn apply(&self, backend: &B, r: &B::Vector, z: &mut B::Vector) -> Result<()> {
        backend.solve_blocks(&self.factors, self.block_size, r, z)
    }
    fn apply_step(
        &self,
        backend: &B,
        r: &B::Vector,
        w: &mut B::Vector,
        step: RecurrenceStep<T>,
        p: &mut B::Vector,
        x: &mut B::Vector,
    ) -> Result<()> {
        backend.solve_blocks_step(&self.factors, self.block_size, r, w, step, p, x)
    }
}

/// An f32 preconditioner inside an f64 Krylov method: z = M32^-1 r with r rounded to f32 and
/// the result widened back. Half the memory traffic of the preconditioner's own products; the
/// rounding perturbs M^-1 by about the f32 unit round-off, which CG tolerates (the outer
/// residual and the Krylov recurrences stay in f64).
pub struct SinglePrecision<P, V> {
    /// The f32 preconditioner.
    pub inner: P,
    work: Mutex<Option<(V, V)>>,
}

impl<P, V> SinglePrecision<P, V> {
    /// Wraps an f32 preconditioner.
    pub fn new(inner: P) -> Self {
        SinglePrecision { inner, work: Mutex::new(None) }
    }
}

impl<B, P> Preconditioner<f64, B> for SinglePrecision<P, <B as VectorOps<f32>>::Vector>
where
    B: MixedPrecisionOps,
    P: Preconditioner<f32, B>,
{
    fn name(&self) -> String {
        format!("{}-f32", self.inner.name())
    }

    fn apply(
        &self,
        backend: &B,
        r: &<B as VectorOps<f64>>::Vector,
        z: &mut <B as VectorOps<f64>>::Vector,
    ) -> Result<()> {
        let n = VectorOps::<f64>::len(backend, r);
        let poisoned = || CoreError::Solver("single-precision workspace poisoned".into());
        let taken = self.work.lock().map_err(|_| poisoned())?.take();
        let (mut r32, mut z32) = match taken {
            Some(w) if VectorOps::<f32>::len(backend, &w.0) == n => w,
            _ => (VectorOps::<f32>::zeros(backend, n)?, VectorOps::<f32>::zeros(backend, n)?),
        };
        backend.demote(r, &mut r32)?;
        self.inner.apply(backend, &r32, &mut z32)?;
        backend.promote(&z32, z)?;
        *self.work.lock().map_err(|_| poisoned())? = Some((r32, z32));
        Ok(())
    }

    fn operator_applications(&self) -> usize {
        self.inner.operator_applications()
    }

    fn reductions(&self) -> usize {
        self.inner.reductions()
    }
}

/// A preconditioner followed by the projection onto the complement of a null vector of the
/// operator: z = P (M^-1 r) with P = I - n n^T / (n^T n). For a singular positive
/// semi-definite operator whose null space is known (the constants of a pure Neumann problem
/// with c = 0, `Discretization::constant_trace`) and a consistent right-hand side, CG then
/// works in the complement: without the projection, rounding in M^-1 puts components along n
/// into the search directions, and p^T A p, which they do not change, goes to rounding and
/// below zero as the residual shrinks (a breakdown measured at k = 3 on square:64).
pub struct ProjectOut<'a, T, P, V> {
    inner: &'a P,
    null: V,
    /// n^T n.
    norm2: T,
}

impl<'a, T: Real, P, V> ProjectOut<'a, T, P, V> {
    /// Wraps `inner` with the projection along `null` (a vector of `backend`).
    pub fn new<B: VectorOps<T, Vector = V>>(backend: &B, inner: &'a P, null: V) -> Result<Self> {
        let norm2 = backend.dot(&null, &null)?;
        Ok(ProjectOut { inner, null, norm2 })
    }
}

impl<T: Real, B: VectorOps<T>, P: Preconditioner<T, B>> Preconditioner<T, B>
    for ProjectOut<'_, T, P, B::Vector>
{
    fn name(&self) -> String {
        format!("{}, constants projected out", self.inner.name())
    }

    fn apply(&self, backend: &B, r: &B::Vector, z: &mut B::Vector) -> Result<()> {
        self.inner.apply(backend, r, z)?;
        let along = backend.dot(&self.null, z)?;
        backend.axpy(-(along / self.norm2), &self.null, z)
    }

    fn operator_applications(&self) -> usize {
        self.inner.operator_applications()
    }

    fn reductions(&self) -> usize {
        self.inner.reductions() + 1
    }
}
