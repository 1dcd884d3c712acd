//! Preconditioners: identity, Jacobi, block Jacobi on the DBF diagonal blocks.
use hdg_core::{Preconditioner, Real, Result, TraceOperator, VectorOps};

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
    pub fn new<T: Real, B: VectorOps<T, Vector = V>>(
        backend: &B,
        operator: &dyn TraceOperator<T, Vector = V>,
    ) -> Result<Self> {
        let block_size = operator.block_size();
        let mut factors = operator.diagonal_blocks()?;
        backend.factor_blocks(&mut factors, block_size)?;
        Ok(BlockJacobi { factors, block_size })
    }
}

impl<T: Real, B: VectorOps<T>> Preconditioner<T, B> for BlockJacobi<B::Vector> {
    fn name(&self) -> String {
        "block-jacobi".into()
    }
    fn apply(&self, backend: &B, r: &B::Vector, z: &mut B::Vector) -> Result<()> {
        backend.solve_blocks(&self.factors, self.block_size, r, z)
    }
}
