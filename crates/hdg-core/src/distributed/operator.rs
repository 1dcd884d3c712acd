//! A rank's rows of the global trace operator: the rows of the faces it owns, assembled from
//! its part's cells (owned cells and the ghost cells across its owned faces), with columns
//! into the ghost faces. A product fills the ghost entries of a copy of x from their owners
//! (the halo exchange), applies the local matrix and clears the ghost rows of y, so that the
//! solvers' vectors keep zeros there. A rank without cells has no matrix and no rows, but
//! takes its part in every collective operation.
use std::sync::Mutex;

use super::{agree, Communicator, DistributedOps, GatheredRows, Halo};
use crate::backend::{DemoteOperator, HaloOps, MixedPrecisionOps, TraceOperator, VectorOps};
use crate::csr::HostCsr;
use crate::error::{CoreError, Result};
use crate::real::Real;

/// The rank's own rows: borrowed from the assembly, owned (a rounded copy), or none (a rank
/// without cells).
pub(super) enum LocalRows<'a, A> {
    Borrowed(&'a A),
    Owned(A),
    None,
}

impl<A> LocalRows<'_, A> {
    pub(super) fn get(&self) -> Option<&A> {
        match self {
            LocalRows::Borrowed(a) => Some(a),
            LocalRows::Owned(a) => Some(a),
            LocalRows::None => None,
        }
    }
}

/// One rank's part of the distributed trace operator.
pub struct DistributedOperator<'a, T: Real, B: HaloOps<T>, A> {
    pub(super) local: LocalRows<'a, A>,
    pub(super) backend: &'a B,
    pub(super) comm: &'a Communicator,
    pub(super) halo: &'a Halo<B::Indices>,
    /// x with its ghost entries filled, for the local product.
    filled: Mutex<B::Vector>,
    /// Whether each row is owned (host copy, for setup-time work).
    pub(super) owned: Vec<bool>,
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
    /// The rank's rows of `local` (the matrix assembled on its part; None on a rank without
    /// cells), with `halo`; `block_size` is n_f.
    pub fn new(
        local: Option<&'a A>,
        backend: &'a B,
        comm: &'a Communicator,
        halo: &'a Halo<B::Indices>,
        block_size: usize,
    ) -> Result<Self> {
        let local = match local {
            Some(a) => LocalRows::Borrowed(a),
            None => LocalRows::None,
        };
        Self::with_rows(local, backend, comm, halo, block_size, None)
    }

    pub(super) fn with_rows(
        local: LocalRows<'a, A>,
        backend: &'a B,
        comm: &'a Communicator,
        halo: &'a Halo<B::Indices>,
        block_size: usize,
        owned: Option<Vec<bool>>,
    ) -> Result<Self> {
        let dim = local.get().map_or(0, |a| a.dim());
        let owned = match owned {
            Some(owned) => owned,
            None => {
                let mut marker = backend.copy_from_host(&vec![T::one(); dim])?;
                halo.clear_ghosts::<T, B>(backend, &mut marker)?;
                let marker = backend.to_host(&marker)?;
                marker.iter().step_by(block_size.max(1)).map(|&m| m != T::zero()).collect()
            }
        };
        Ok(DistributedOperator {
            filled: Mutex::new(backend.zeros(dim)?),
            owned,
            block_size,
            local,
            backend,
            comm,
            halo,
            dim,
        })
    }

    /// `product(local rows, x with its ghost entries filled, y)`, then the ghost rows of y
    /// cleared (the solvers' vectors keep zeros there); a rank without rows only takes part in
    /// the exchange.
    fn on_filled(
        &self,
        x: &B::Vector,
        y: &mut B::Vector,
        product: impl FnOnce(&A, &B::Vector, &mut B::Vector) -> Result<()>,
    ) -> Result<()> {
        let mut filled = self.filled.lock().map_err(|_| {
            CoreError::Solver("the distributed product's scratch vector is poisoned".into())
        })?;
        self.backend.copy(x, &mut filled)?;
        self.halo.exchange::<T, B>(self.comm, self.backend, &mut filled)?;
        if let Some(local) = self.local.get() {
            product(local, &filled, y)?;
        }
        self.halo.clear_ghosts::<T, B>(self.backend, y)
    }

    /// The whole operator on rank 0 (None elsewhere), in the one-process run's numbering, and
    /// how its vectors travel ([`GatheredRows`]); `row_faces` names the whole mesh's face of
    /// each of the rank's rows. Every rank calls it.
    ///
    /// # Errors
    /// The local matrix's export, or rows that do not fit together; the same on every rank.
    pub fn gather_on_root(&self, row_faces: &[u64]) -> Result<(GatheredRows<'a>, Option<HostCsr>)> {
        let local = agree(self.comm, self.local.get().map(|a| a.to_host_csr()).transpose())?;
        GatheredRows::gather(self.comm, local.as_ref(), row_faces, &self.owned, self.block_size)
    }

    /// `v` with its ghost rows set to those of the identity's (1 on the diagonal, 0 elsewhere):
    /// a (block) Jacobi preconditioner then maps the solvers' zero ghost rows to zeros. The
    /// ghost entries are written on the backend (one scatter); `v` holds `block` x `block`
    /// blocks, row after row.
    fn ghosts_to_identity(&self, mut v: B::Vector, block: usize) -> Result<B::Vector> {
        let row_len = block * block;
        let rows_per_face = (self.block_size / block.max(1)).max(1);
        let chunks = self.backend.len(&v) / row_len.max(1);
        let (mut entries, mut values) = (Vec::new(), Vec::new());
        for chunk in (0..chunks).filter(|&k| !self.owned[k / rows_per_face]) {
            for e in 0..row_len {
                entries.push((chunk * row_len + e) as u32);
                values.push(if e % (block + 1) == 0 { T::one() } else { T::zero() });
            }
        }
        if !entries.is_empty() {
            let indices = self.backend.upload_indices(&entries)?;
            self.backend.scatter(&values, &indices, &mut v)?;
        }
        Ok(v)
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
        self.on_filled(x, y, |local, filled, y| local.apply(filled, y))
    }

    fn fuses_update(&self) -> bool {
        self.local.get().is_some_and(|a| a.fuses_update())
    }

    /// The local rows' fused product and update on x with its ghosts filled; ghost rows of y
    /// cleared as in [`TraceOperator::apply`].
    fn apply_update(
        &self,
        alpha: T,
        x: &B::Vector,
        b: Option<&B::Vector>,
        y: &mut B::Vector,
    ) -> Result<()> {
        self.on_filled(x, y, |local, filled, y| local.apply_update(alpha, filled, b, y))
    }

    fn diagonal(&self) -> Result<B::Vector> {
        match self.local.get() {
            Some(local) => self.ghosts_to_identity(local.diagonal()?, 1),
            None => self.backend.zeros(0),
        }
    }

    fn block_size(&self) -> usize {
        self.block_size
    }

    fn diagonal_blocks(&self) -> Result<B::Vector> {
        match self.local.get() {
            Some(local) => self.ghosts_to_identity(local.diagonal_blocks()?, self.block_size),
            None => self.backend.zeros(0),
        }
    }

    /// The bounds over the owned rows of every rank.
    fn gershgorin_bounds(&self, scaled: bool) -> Result<(f64, f64)> {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        if let Some(local) = self.local.get() {
            let csr = local.to_host_csr()?;
            for row in (0..self.dim).filter(|&r| self.owned[r / self.block_size]) {
                let (mut diagonal, mut radius) = (0.0, 0.0);
                for k in csr.indptr[row]..csr.indptr[row + 1] {
                    match csr.indices[k] == row {
                        true => diagonal = csr.values[k],
                        false => radius += csr.values[k].abs(),
                    }
                }
                let (d, r) = if scaled { (1.0, radius / diagonal) } else { (diagonal, radius) };
                lo = lo.min(d - r);
                hi = hi.max(d + r);
            }
        }
        Ok(agree::min_max(self.comm, (lo, hi)))
    }

    fn to_host_csr(&self) -> Result<HostCsr> {
        Err(CoreError::InvalidParameter {
            name: "solver",
            reason: "the distributed trace operator has no host matrix on one rank (the \
                     whole matrix is gathered on rank 0 by gather_on_root)"
                .into(),
        })
    }
}

impl<'a, B, A, I> DemoteOperator<DistributedOps<'a, B, I>> for DistributedOperator<'a, f64, B, A>
where
    B: HaloOps<f64, Indices = I> + HaloOps<f32, Indices = I> + MixedPrecisionOps,
    A: DemoteOperator<B> + TraceOperator<f64, Vector = <B as VectorOps<f64>>::Vector>,
    I: Send + Sync,
{
    type Low = DistributedOperator<'a, f32, B, A::Low>;

    /// The rank's rows rounded to f32, with the same halo.
    fn demote(&self) -> Result<Self::Low> {
        let local = match self.local.get() {
            Some(a) => LocalRows::Owned(a.demote()?),
            None => LocalRows::None,
        };
        let owned = Some(self.owned.clone());
        DistributedOperator::with_rows(
            local,
            self.backend,
            self.comm,
            self.halo,
            self.block_size,
            owned,
        )
    }
}
