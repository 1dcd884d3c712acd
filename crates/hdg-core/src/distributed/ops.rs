//! A rank's backend as the solvers see it in a distributed solve: every vector operation is
//! the local backend's on the rank's rows, and a reduction over the rank's trace vectors is
//! the local one followed by one allreduce (a fused reduction of several dot products stays
//! one allreduce). Ghost rows of the solvers' trace vectors hold zeros
//! ([`super::DistributedOperator`] keeps them so), so a local dot product counts each row once,
//! on its owner. So are the multigrid's first vertex level's while it is split among the ranks
//! ([`VertexLayout`]). Vectors of another length are the coarser vertex levels, which every
//! rank holds whole (replicated): their reductions are the local ones. Every reduction is one
//! allreduce all the same, which carries whether each rank took the vectors for its trace
//! vectors: a vertex level that happens to have a rank's trace length is then still told apart
//! (some rank sees another length), and no rank skips a collective another rank makes.
use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use mpi::topology::Communicator as _;
use mpi::traits::CommunicatorCollectives as _;

use super::{agree, Communicator, Halo};
use crate::backend::{
    BlockOps, FusedOps, HaloOps, MixedPrecisionOps, RecurrenceStep, SplitLevel, VectorOps,
};
use crate::csr::HostCsr;
use crate::error::{CoreError, Result};
use crate::real::Real;

/// The local backend `B` of one rank with global reductions over `comm`.
pub struct DistributedOps<'a, B, I> {
    /// The rank's own backend.
    pub local: &'a B,
    /// The ranks sharing the solve.
    pub comm: &'a Communicator,
    /// The rank's halo: which entries of a trace vector are ghosts.
    pub halo: &'a Halo<I>,
    /// Every entry of a vector of each length summed over the ranks so far (the replicated
    /// vertex level's restriction), on the backend: its values move through them.
    whole: Mutex<HashMap<usize, I>>,
    /// The multigrid's first vertex level split among the ranks by vertex ownership (from
    /// the level's setup until it is joined).
    vertex: OnceLock<VertexLayout<I>>,
    /// The allreduces of its reductions and restrictions.
    reductions: super::CommClock,
}

/// The first vertex level split among the ranks: its vectors keep the whole level's length on
/// every rank, but each rank computes only the entries of the vertices it owns and keeps the
/// others zero: its products fill the ghost entries they read from their owners first (a halo
/// exchange), its restriction from the trace level sends the contributions to other ranks'
/// vertices to them, and the restriction to the next level (replicated) is one allreduce of
/// that level. It is the hierarchy's [`SplitLevel`] too (its setup's collective operations).
pub struct VertexLayout<I> {
    /// Unknowns of the level.
    n: usize,
    /// The ranks' communicator, duplicated: the level's collective operations
    /// ([`SplitLevel`]) run on it.
    comm: Communicator,
    /// Whether this rank owns each unknown.
    owned: std::sync::Arc<[bool]>,
    /// Owned and ghost vertices.
    pub(super) halo: Halo<I>,
    /// Every entry this rank does not own.
    pub(super) not_owned: I,
    active: AtomicBool,
    /// A level vector with the ghost entries filled, kept between products (the backend's
    /// vector of the precision last used).
    filled: Mutex<Option<Box<dyn Any + Send>>>,
}

impl<I> VertexLayout<I> {
    /// `f(x with its ghost entries filled from their owners)`, through a kept scratch vector.
    pub(super) fn with_filled<T: Real, B: HaloOps<T, Indices = I>, R>(
        &self,
        comm: &Communicator,
        backend: &B,
        x: &B::Vector,
        f: impl FnOnce(&B::Vector) -> Result<R>,
    ) -> Result<R> {
        let mut kept = self.filled.lock().map_err(|_| {
            crate::error::CoreError::Solver("the vertex level's scratch is poisoned".into())
        })?;
        let reused = kept.take().and_then(|b| b.downcast::<B::Vector>().ok());
        let mut filled = match reused {
            Some(v) if backend.len(&v) == self.n => *v,
            _ => backend.zeros(self.n)?,
        };
        backend.copy(x, &mut filled)?;
        self.halo.exchange::<T, B>(comm, backend, &mut filled)?;
        let result = f(&filled);
        *kept = Some(Box::new(filled));
        result
    }
}

/// The split first vertex level's collective operations (one rank's side).
impl<I> SplitLevel for VertexLayout<I> {
    fn owned(&self) -> &std::sync::Arc<[bool]> {
        &self.owned
    }
    fn fill_ghost_rows(&self, rows: &HostCsr) -> Result<HostCsr> {
        self.halo.exchange_rows(&self.comm, rows)
    }
    fn sum(&self, local: &HostCsr) -> Result<HostCsr> {
        super::sum_over_ranks(&self.comm, local)
    }
    fn sum_vector(&self, local: &[f64]) -> Result<Vec<f64>> {
        Ok(agree::sum(&self.comm, local))
    }
    fn gather_graph(&self, start: &[usize], neighbours: &[u32]) -> Result<(Vec<usize>, Vec<u32>)> {
        let rows: Vec<u32> = (0..self.n as u32).filter(|&r| self.owned[r as usize]).collect();
        let row = |r: u32| start[r as usize]..start[r as usize + 1];
        let lengths: Vec<u32> = rows.iter().map(|&r| row(r).len() as u32).collect();
        let total = agree::sum_count(&self.comm, lengths.iter().map(|&l| l as usize).sum());
        if mpi::Count::try_from(total).is_err() {
            return Err(CoreError::InvalidParameter {
                name: "vertex level",
                reason: format!("a strength graph of {total} entries: above MPI's counts"),
            });
        }
        let columns: Vec<u32> =
            rows.iter().flat_map(|&r| neighbours[row(r)].iter().copied()).collect();
        let all_rows = agree::gather_all(&self.comm, &rows);
        let all_lengths = agree::gather_all(&self.comm, &lengths);
        let all_columns = agree::gather_all(&self.comm, &columns);
        // Each row's length and where its columns arrived; then the rows copied in parallel.
        let (mut length, mut from) = (vec![0usize; self.n], vec![0usize; self.n]);
        let mut read = 0;
        for (&r, &l) in all_rows.iter().zip(&all_lengths) {
            (length[r as usize], from[r as usize]) = (l as usize, read);
            read += l as usize;
        }
        let whole_start = crate::sparse_rows::prefix_sums(length.into_iter());
        let mut whole = vec![0u32; total];
        crate::sparse_rows::for_each_group(&mut whole, &whole_start, |r, row, _: &mut ()| {
            row.copy_from_slice(&all_columns[from[r]..from[r] + row.len()]);
        });
        Ok((whole_start, whole))
    }
    fn max(&self, x: f64) -> Result<f64> {
        Ok(agree::min_max(&self.comm, (x, x)).1)
    }
    fn join(&self) {
        self.active.store(false, Ordering::Relaxed);
    }
}

impl<'a, B, I> DistributedOps<'a, B, I> {
    /// `local` reducing over `comm`, trace vectors with the ghosts of `halo`.
    pub fn new(local: &'a B, comm: &'a Communicator, halo: &'a Halo<I>) -> Self {
        DistributedOps {
            local,
            comm,
            halo,
            whole: Mutex::new(HashMap::new()),
            vertex: OnceLock::new(),
            reductions: super::CommClock::default(),
        }
    }

    /// The owner of each of the first vertex level's `n` unknowns, from `row_vertices` (the
    /// level's unknowns of this rank's owned trace rows, `NONE` for none): the lowest rank whose
    /// owned rows use it (rank 0 for an unknown no rank's rows use). Collective: one allreduce
    /// of the level's length.
    pub(super) fn vertex_owners(&self, n: usize, row_vertices: &[u32]) -> Vec<u32> {
        let me = self.comm.rank() as u32;
        let mut proposed = vec![u32::MAX; n];
        for &v in row_vertices.iter().filter(|&&v| v != crate::topology::NONE) {
            proposed[v as usize] = me;
        }
        let mut owner = vec![0u32; n];
        self.comm.all_reduce_into(
            &proposed[..],
            &mut owner[..],
            mpi::collective::SystemOperation::min(),
        );
        owner.iter_mut().filter(|o| **o == u32::MAX).for_each(|o| *o = 0);
        owner
    }

    /// Splits the first vertex level among the ranks by `owner` ([`Self::vertex_owners`]):
    /// `a1` holds this rank's owned rows of it, `row_vertices` are as for the owners. From
    /// here on the level's vectors and products are this rank's share
    /// ([`MultigridOps::split_level`](crate::backend::MultigridOps::split_level) answers for
    /// it) until the level is joined ([`SplitLevel::join`]). Collective.
    pub(super) fn split_vertex_level<T: Real>(
        &self,
        a1: &crate::csr::HostCsr,
        owner: &[u32],
        row_vertices: &[u32],
    ) -> Result<()>
    where
        B: HaloOps<T, Indices = I>,
    {
        let (n, me) = (a1.n, self.comm.rank() as u32);
        // What this rank reads: its vertices, their neighbours in A_1, its rows' vertices.
        let mut used = vec![false; n];
        for v in (0..n).filter(|&v| owner[v] == me) {
            used[v] = true;
            a1.indices[a1.indptr[v]..a1.indptr[v + 1]].iter().for_each(|&c| used[c] = true);
        }
        row_vertices
            .iter()
            .filter(|&&v| v != crate::topology::NONE)
            .for_each(|&v| used[v as usize] = true);
        let rows: Vec<u32> = (0..n as u32).filter(|&v| used[v as usize]).collect();
        let ids: Vec<u64> = rows.iter().map(|&v| v as u64).collect();
        let owners: Vec<u32> = rows.iter().map(|&v| owner[v as usize]).collect();
        let halo = Halo::at_positions::<T, B>(self.comm, self.local, &ids, &owners, &rows, n)?;
        let not_owned: Vec<u32> = (0..n as u32).filter(|&v| owner[v as usize] != me).collect();
        let layout = VertexLayout {
            n,
            comm: self.comm.duplicate(),
            halo,
            not_owned: self.local.upload_indices(&not_owned)?,
            owned: owner.iter().map(|&o| o == me).collect(),
            active: AtomicBool::new(true),
            filled: Mutex::new(None),
        };
        let _ = self.vertex.set(layout);
        Ok(())
    }

    /// What this rank's communication took so far, as a note: halo exchanges of the trace
    /// level and of the first vertex level, allreduces; counts and seconds (waits included).
    pub fn communication_note(&self) -> String {
        let (te, ts) = self.halo.exchanges();
        let (ve, vs) = self.vertex.get().map_or((0, 0.0), |l| l.halo.exchanges());
        let (r, rs) = self.reductions.read();
        format!(
            "communication on rank {}: {te} trace-level halo exchanges {ts:.3} s, {ve} \
             vertex-level ones {vs:.3} s, {r} allreduces {rs:.3} s",
            self.comm.rank()
        )
    }

    /// The first vertex level's layout once in use, if `len` is its length.
    pub(super) fn vertex_layout(&self, len: usize) -> Option<&VertexLayout<I>> {
        self.vertex.get().filter(|l| l.n == len && l.active.load(Ordering::Relaxed))
    }

    /// `v` summed over the ranks, every rank holding a vector of the same length: its values
    /// travel to the host and back through the backend's gather and scatter (no allocation on
    /// the backend), and are summed in their own precision.
    pub(super) fn sum_over_ranks<T: Real>(&self, v: &mut B::Vector) -> Result<()>
    where
        B: HaloOps<T, Indices = I>,
    {
        if self.comm.size() == 1 {
            return Ok(());
        }
        let n = self.local.len(v);
        let mut whole = self.whole.lock().map_err(|_| {
            crate::error::CoreError::Solver("the restriction's indices are poisoned".into())
        })?;
        let every = match whole.entry(n) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let every: Vec<u32> = (0..n as u32).collect();
                e.insert(self.local.upload_indices(&every)?)
            }
        };
        let _timed = self.reductions.start();
        let mut host = vec![T::zero(); n];
        self.local.gather(v, every, &mut host)?;
        agree::sum_in_place(self.comm, &mut host);
        self.local.scatter(&host, every, v)
    }

    /// The reductions `local` of vectors of length `len` over every rank: summed when every
    /// rank holds them as trace vectors, else (a replicated vertex level) this rank's own.
    fn reduce<T: Real>(&self, len: usize, local: Vec<T>) -> Vec<T> {
        let _timed = self.reductions.start();
        let trace = self.distributed(len);
        let mut sent: Vec<f64> =
            local.iter().map(|x| if trace { x.as_f64() } else { 0.0 }).collect();
        sent.push(trace as u8 as f64);
        let sums = agree::sum(self.comm, &sent);
        let ranks = self.comm.size() as f64;
        match sums[local.len()] == ranks {
            true => sums[..local.len()].iter().map(|&x| T::from_f64_lossy(x)).collect(),
            false => local,
        }
    }

    /// Whether `len` is the length of this rank's trace vectors (distributed), rather than of
    /// a replicated vertex level.
    fn distributed(&self, len: usize) -> bool {
        len == self.halo.len() || self.vertex_layout(len).is_some()
    }
}

// SAFETY: `Sync` is asked of every backend because a backend's own kernels may run on worker
// threads; the communicator (an MPI handle, not `Sync`) is used only by the reductions and
// exchanges, which the solver calls on its own thread, the thread that initialised MPI.
unsafe impl<B: Sync, I: Sync> Sync for DistributedOps<'_, B, I> {}

impl<T: Real, B: HaloOps<T>> VectorOps<T> for DistributedOps<'_, B, B::Indices> {
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
        Ok(self.reduce(self.local.len(x), vec![local])[0])
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

impl<T: Real, B: HaloOps<T> + FusedOps<T>> FusedOps<T> for DistributedOps<'_, B, B::Indices> {
    fn dot_many(&self, pairs: &[(&Self::Vector, &Self::Vector)]) -> Result<Vec<T>> {
        let local = self.local.dot_many(pairs)?;
        let len = pairs.first().map_or(0, |(x, _)| self.local.len(x));
        Ok(self.reduce(len, local))
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
        Ok(self.reduce(self.local.len(p), vec![local])[0])
    }
}

impl<T: Real, B: HaloOps<T> + BlockOps<T>> BlockOps<T> for DistributedOps<'_, B, B::Indices> {
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

impl<B, I> MixedPrecisionOps for DistributedOps<'_, B, I>
where
    B: HaloOps<f64, Indices = I> + HaloOps<f32, Indices = I> + MixedPrecisionOps,
    I: Send + Sync,
{
    fn demote(&self, x: &Vec64<B>, y: &mut Vec32<B>) -> Result<()> {
        self.local.demote(x, y)
    }
    fn promote_add(&self, x: &Vec32<B>, y: &mut Vec64<B>) -> Result<()> {
        self.local.promote_add(x, y)
    }
    fn promote(&self, x: &Vec32<B>, y: &mut Vec64<B>) -> Result<()> {
        self.local.promote(x, y)
    }
}

type Vec64<B> = <B as VectorOps<f64>>::Vector;
type Vec32<B> = <B as VectorOps<f32>>::Vector;
