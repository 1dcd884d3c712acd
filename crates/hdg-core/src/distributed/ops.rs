//! A rank's backend as the Krylov solvers see it in a distributed solve: every vector
//! operation is the local backend's on the rank's rows, and every reduction is the local one
//! followed by one allreduce (a fused reduction of several dot products stays one allreduce).
//! Ghost rows of the solvers' vectors hold zeros ([`super::DistributedOperator`] keeps them
//! so), so a local dot product counts each row once: on its owner.
use super::{agree, Communicator};
use crate::backend::{BlockOps, FusedOps, RecurrenceStep, VectorOps};
use crate::error::Result;
use crate::real::Real;

/// The local backend `B` of one rank with global reductions over `comm`.
pub struct DistributedOps<'a, B> {
    /// The rank's own backend.
    pub local: &'a B,
    /// The ranks sharing the solve.
    pub comm: &'a Communicator,
}

impl<'a, B> DistributedOps<'a, B> {
    /// `local` reducing over `comm`.
    pub fn new(local: &'a B, comm: &'a Communicator) -> Self {
        DistributedOps { local, comm }
    }

    fn global<T: Real>(&self, local: &[T]) -> Vec<T> {
        let local: Vec<f64> = local.iter().map(|x| x.as_f64()).collect();
        agree::sum(self.comm, &local).into_iter().map(T::from_f64_lossy).collect()
    }
}

// SAFETY: `Sync` is asked of every backend because a backend's own kernels may run on worker
// threads; the communicator (an MPI handle, not `Sync`) is used only by the reductions, which
// the Krylov solver calls on its own thread, the thread that initialised MPI.
unsafe impl<B: Sync> Sync for DistributedOps<'_, B> {}

impl<T: Real, B: VectorOps<T>> VectorOps<T> for DistributedOps<'_, B> {
    type Vector = B::Vector;
    fn zeros(&self, len: usize) -> Result<Self::Vector> {
        self.local.zeros(len)
    }
    fn copy_from_host(&self, data: &[T]) -> Result<Self::Vector> {
        self.local.copy_from_host(data)
    }
    fn to_host(&self, v: &Self::Vector) -> Result<Vec<T>> {
        self.local.to_host(v)
    }
    fn len(&self, v: &Self::Vector) -> usize {
        self.local.len(v)
    }
    fn copy(&self, src: &Self::Vector, dst: &mut Self::Vector) -> Result<()> {
        self.local.copy(src, dst)
    }
    fn axpy(&self, alpha: T, x: &Self::Vector, y: &mut Self::Vector) -> Result<()> {
        self.local.axpy(alpha, x, y)
    }
    fn xpby(&self, x: &Self::Vector, beta: T, y: &mut Self::Vector) -> Result<()> {
        self.local.xpby(x, beta, y)
    }
    fn axpby(&self, alpha: T, x: &Self::Vector, beta: T, y: &mut Self::Vector) -> Result<()> {
        self.local.axpby(alpha, x, beta, y)
    }
    fn scale(&self, alpha: T, x: &mut Self::Vector) -> Result<()> {
        self.local.scale(alpha, x)
    }
    fn dot(&self, x: &Self::Vector, y: &Self::Vector) -> Result<T> {
        let local = self.local.dot(x, y)?;
        Ok(self.global(&[local])[0])
    }
    fn pointwise_mul(
        &self,
        a: &Self::Vector,
        x: &Self::Vector,
        y: &mut Self::Vector,
    ) -> Result<()> {
        self.local.pointwise_mul(a, x, y)
    }
    fn reciprocal(&self, v: &mut Self::Vector) -> Result<()> {
        self.local.reciprocal(v)
    }
}

impl<T: Real, B: FusedOps<T>> FusedOps<T> for DistributedOps<'_, B> {
    fn dot_many(&self, pairs: &[(&Self::Vector, &Self::Vector)]) -> Result<Vec<T>> {
        let local = self.local.dot_many(pairs)?;
        Ok(self.global(&local))
    }
    fn cg_update(
        &self,
        alpha: T,
        p: &Self::Vector,
        ap: &Self::Vector,
        x: &mut Self::Vector,
        r: &mut Self::Vector,
    ) -> Result<T> {
        let local = self.local.cg_update(alpha, p, ap, x, r)?;
        Ok(self.global(&[local])[0])
    }
}

impl<T: Real, B: BlockOps<T>> BlockOps<T> for DistributedOps<'_, B> {
    fn factor_blocks(&self, blocks: &mut Self::Vector, block_size: usize) -> Result<()> {
        self.local.factor_blocks(blocks, block_size)
    }
    fn solve_blocks(
        &self,
        factors: &Self::Vector,
        block_size: usize,
        r: &Self::Vector,
        z: &mut Self::Vector,
    ) -> Result<()> {
        self.local.solve_blocks(factors, block_size, r, z)
    }
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
        self.local.solve_blocks_step(factors, block_size, r, w, step, p, x)
    }
}
