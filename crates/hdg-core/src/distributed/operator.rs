//! A rank's rows of the global trace operator: the rows of the faces it owns, assembled from
//! its part's cells (owned cells and the ghost cells across its owned faces), with columns
//! into the ghost faces. A product fills the ghost entries of a copy of x from their owners
//! (the halo exchange), applies the local matrix and clears the ghost rows of y, so that the
//! solvers' vectors keep zeros there.
use std::sync::Mutex;

use super::{agree, Communicator, Halo};
use crate::backend::{HaloOps, TraceOperator};
use crate::csr::HostCsr;
use crate::error::{CoreError, Result};
use crate::real::Real;

/// One rank's part of the distributed trace operator ([module docs](self)).
pub struct DistributedOperator<'a, T: Real, B: HaloOps<T>, A> {
    local: &'a A,
    backend: &'a B,
    comm: &'a Communicator,
    halo: &'a Halo<B::Indices>,
    /// x with its ghost entries filled, for the local product.
    filled: Mutex<B::Vector>,
    /// Whether each row is owned (host copy, for setup-time work).
    owned: Vec<bool>,
    block_size: usize,
    dim: usize,
}

// SAFETY: as for `DistributedOps`: the communicator is used only from the solver's thread
// (products and reductions are called there); the scratch vector is behind a mutex.
unsafe impl<T: Real, B: HaloOps<T>, A: Sync> Sync for DistributedOperator<'_, T, B, A> {}

impl<'a, T, B, A> DistributedOperator<'a, T, B, A>
where
    T: Real,
    B: HaloOps<T>,
    A: TraceOperator<T, Vector = B::Vector>,
{
    /// The rank's rows of `local` (the matrix assembled on its part), with `halo`.
    pub fn new(
        local: &'a A,
        backend: &'a B,
        comm: &'a Communicator,
        halo: &'a Halo<B::Indices>,
    ) -> Result<Self> {
        let dim = local.dim();
        let block_size = local.block_size();
        let mut marker = backend.copy_from_host(&vec![T::one(); dim])?;
        halo.clear_ghosts::<T, B>(backend, &mut marker)?;
        let marker = backend.to_host(&marker)?;
        let owned = marker.iter().step_by(block_size.max(1)).map(|&m| m != T::zero()).collect();
        Ok(DistributedOperator {
            owned,
            filled: Mutex::new(backend.zeros(dim)?),
            block_size,
            local,
            backend,
            comm,
            halo,
            dim,
        })
    }

    /// `v` with its ghost rows set to those of the identity's (1 on the diagonal, 0 elsewhere):
    /// a (block) Jacobi preconditioner then maps the solvers' zero ghost rows to zeros.
    fn ghosts_to_identity(&self, v: B::Vector, block: usize) -> Result<B::Vector> {
        let mut host = self.backend.to_host(&v)?;
        let row_len = block * block;
        let rows_per_face = self.block_size / block;
        for (row, chunk) in host.chunks_mut(row_len).enumerate() {
            if !self.owned[row / rows_per_face] {
                chunk.iter_mut().for_each(|x| *x = T::zero());
                (0..block).for_each(|i| chunk[i * block + i] = T::one());
            }
        }
        self.backend.copy_from_host(&host)
    }
}

impl<T, B, A> TraceOperator<T> for DistributedOperator<'_, T, B, A>
where
    T: Real,
    B: HaloOps<T>,
    A: TraceOperator<T, Vector = B::Vector>,
{
    type Vector = B::Vector;

    fn dim(&self) -> usize {
        self.dim
    }

    fn apply(&self, x: &B::Vector, y: &mut B::Vector) -> Result<()> {
        let mut filled = self.filled.lock().map_err(|_| {
            CoreError::Solver("the distributed product's scratch vector is poisoned".into())
        })?;
        self.backend.copy(x, &mut filled)?;
        self.halo.exchange::<T, B>(self.comm, self.backend, &mut filled)?;
        self.local.apply(&filled, y)?;
        self.halo.clear_ghosts::<T, B>(self.backend, y)
    }

    fn diagonal(&self) -> Result<B::Vector> {
        self.ghosts_to_identity(self.local.diagonal()?, 1)
    }

    fn block_size(&self) -> usize {
        self.block_size
    }

    fn diagonal_blocks(&self) -> Result<B::Vector> {
        self.ghosts_to_identity(self.local.diagonal_blocks()?, self.block_size)
    }

    /// The bounds over the owned rows of every rank.
    fn gershgorin_bounds(&self, scaled: bool) -> Result<(f64, f64)> {
        let csr = self.local.to_host_csr()?;
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for row in (0..self.dim).filter(|&r| self.owned[r / self.block_size]) {
            let range = csr.indptr[row]..csr.indptr[row + 1];
            let mut diagonal = 0.0;
            let mut radius = 0.0;
            for k in range {
                let v = csr.values[k];
                if csr.indices[k] == row {
                    diagonal = v;
                } else {
                    radius += v.abs();
                }
            }
            let (d, r) = if scaled { (1.0, radius / diagonal) } else { (diagonal, radius) };
            lo = lo.min(d - r);
            hi = hi.max(d + r);
        }
        Ok(agree::min_max(self.comm, (lo, hi)))
    }

    fn to_host_csr(&self) -> Result<HostCsr> {
        Err(CoreError::InvalidParameter {
            name: "solver",
            reason: "the distributed trace operator has no host matrix on one rank (a direct \
                     solve needs the whole matrix: run on one process)"
                .into(),
        })
    }
}
