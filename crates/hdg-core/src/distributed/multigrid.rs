//! What the multigrid preconditioner needs of a distributed solve. The trace level is
//! distributed like the solver's vectors: its smoother needs only the operator's products
//! (halo exchanges) and block Jacobi on owned rows.
//!
//! The first vertex level (P1, the largest) is split among the ranks by vertex ownership: a
//! vertex belongs to the lowest rank whose owned face rows use it. Each rank's backend forms
//! E^T A E over its owned face rows (on the device for CUDA), and the rows of vertices that
//! other ranks own go to their owners ([`rows_to_owners`]: only a part's interface rows
//! travel), so that each rank holds its owned rows of A_1 with columns into ghost vertices.
//! The level's vectors keep the whole level's length on every rank, each rank computing its
//! own vertices' entries and keeping the others zero: its products fill the ghost vertices
//! from their owners first; the restriction from the trace level sends the contributions to
//! other ranks' vertices to their owners; the restriction to the second level is the local
//! product followed by one allreduce of that level, the prolongation from it local.
//!
//! The hierarchy (`hdg_linalg::multigrid`) coarsens the split level where it lies
//! ([`SplitLevel`], implemented by the level's layout in `ops.rs`): each rank finds its rows'
//! strong couplings, the strength graph (4 bytes per coupling, no values) is gathered whole on
//! every rank and aggregated there as on one process, each rank forms the smoothed
//! prolongator's owned rows, A P's owned rows with P's ghost rows from their owners, and its
//! share of P^T A P; the shares are summed over the ranks ([`sum_over_ranks`]), so the second
//! and coarser levels (a sixth of the first in 2D at k = 3, an eighth in 3D) are whole on
//! every rank, formed bit for bit alike. Aggregates inside each rank alone (uncoupled) were
//! tried first: 4 to 6 more iterations on METIS parts of square meshes (20 -> 24 on 2 ranks, 26
//! on 4, square:512 k = 3), none on block parts; the gathered graph keeps the one-process
//! aggregates and iterations. A first level solved exactly (small meshes) is gathered and
//! joined.
//!
//! Why: with the first vertex level whole on every rank, every rank gathered the whole A_1 (20
//! bytes per nonzero from every rank), aggregated it and formed its whole coarsening, work and
//! traffic that grew with the ranks and was most of the 2D setup on 4 GPUs (measured:
//! BENCHMARKS.md, "Distributed runs"); earlier still every cycle summed the whole level over
//! the ranks. What stays replicated: the first level's strength graph and its aggregation
//! (serial, on a thread beside the backend's work), the levels from the second down (their
//! setup and the second level's allreduce in each cycle) and a pass over the whole mesh's faces
//! to number the vertices; the next steps are a parallel aggregation that keeps the
//! iterations, the second level split the same way, the coarsest gathered onto fewer ranks, or
//! hypre's BoomerAMG on the split P1 matrix (not built).
use mpi::topology::Communicator as _;
use mpi::traits::*;
use mpi::Count;

use super::{agree, Communicator, DistributedOperator, DistributedOps};
use crate::auxiliary::VertexSpace;
use crate::backend::{HaloOps, MultigridOperator, MultigridOps, SplitLevel};
use crate::csr::HostCsr;
use crate::error::{CoreError, Result};
use crate::real::Real;
use crate::topology::TraceTopology;

impl<T, B> MultigridOps<T> for DistributedOps<'_, B, B::Indices>
where
    T: Real,
    B: HaloOps<T> + MultigridOps<T>,
{
    type Csr = B::Csr;
    type FaceTransfer = B::FaceTransfer;

    fn upload_csr(&self, matrix: &HostCsr) -> Result<B::Csr> {
        self.local.upload_csr(matrix)
    }
    /// On the distributed first vertex level (told apart by the vectors' lengths): its own
    /// product reads x with the ghost entries filled and keeps the owned entries of y; the
    /// restriction to the next level sums over the ranks; the prolongation from it keeps the
    /// owned entries.
    fn csr_apply(&self, matrix: &B::Csr, x: &B::Vector, y: &mut B::Vector) -> Result<()> {
        let (nx, ny) = (self.local.len(x), self.local.len(y));
        if let Some(layout) = self.vertex_layout(nx) {
            if ny == nx {
                layout.with_filled::<T, B, ()>(self.comm, self.local, x, |filled| {
                    self.local.csr_apply(matrix, filled, y)
                })?;
                return self.local.clear(&layout.not_owned, y);
            }
            self.local.csr_apply(matrix, x, y)?;
            return self.sum_over_ranks::<T>(y);
        }
        self.local.csr_apply(matrix, x, y)?;
        match self.vertex_layout(ny) {
            Some(layout) => self.local.clear(&layout.not_owned, y),
            None => Ok(()),
        }
    }
    fn upload_face_transfer(&self, space: &VertexSpace) -> Result<B::FaceTransfer> {
        self.local.upload_face_transfer(space)
    }
    /// The local E prolongs onto every row of the rank, ghosts included: they are cleared.
    fn prolong_add(
        &self,
        transfer: &B::FaceTransfer,
        coarse: &B::Vector,
        trace: &mut B::Vector,
    ) -> Result<()> {
        let n = self.local.len(coarse);
        match self.vertex_layout(n) {
            Some(layout) => layout.with_filled::<T, B, ()>(self.comm, self.local, coarse, |x| {
                self.local.prolong_add(transfer, x, trace)
            })?,
            None => self.local.prolong_add(transfer, coarse, trace)?,
        }
        self.halo.clear_ghosts::<T, B>(self.local, trace)
    }
    /// Each rank restricts its owned rows (the incidence of its vertex space lists no others);
    /// the sums are reduced.
    fn restrict(
        &self,
        transfer: &B::FaceTransfer,
        trace: &B::Vector,
        coarse: &mut B::Vector,
    ) -> Result<()> {
        self.local.restrict(transfer, trace, coarse)?;
        match self.vertex_layout(self.local.len(coarse)) {
            Some(layout) => {
                layout.halo.add_to_owners::<T, B>(self.comm, self.local, coarse)?;
                self.local.clear(&layout.not_owned, coarse)
            }
            None => self.sum_over_ranks::<T>(coarse),
        }
    }
    fn coarsen(
        &self,
        fine: &HostCsr,
        fine_on_backend: &B::Csr,
        tentative: &HostCsr,
        omega_over_rho: f64,
    ) -> Result<Option<crate::backend::Coarsening<B::Csr>>> {
        self.local.coarsen(fine, fine_on_backend, tentative, omega_over_rho)
    }
    fn release_coarsening_values(&self, matrix: &mut B::Csr) -> Result<()> {
        self.local.release_coarsening_values(matrix)
    }
    fn split_level(&self, n: usize) -> Option<&dyn SplitLevel> {
        self.vertex_layout(n).map(|layout| layout as &dyn SplitLevel)
    }
}

impl<'a, T, B, A> MultigridOperator<T, DistributedOps<'a, B, B::Indices>>
    for DistributedOperator<'a, T, B, A>
where
    T: Real,
    B: HaloOps<T> + MultigridOps<T>,
    A: MultigridOperator<T, B>,
{
    /// The local blocks, ghost rows zero (their owners project them).
    fn project_blocks(&self, basis: &[f64], rows: usize, m: usize) -> Result<Vec<f64>> {
        let Some(local) = self.local.get() else { return Ok(Vec::new()) };
        let mut projected = local.project_blocks(basis, rows, m)?;
        let per_row = projected.len() / self.owned.len().max(1);
        for (row, blocks) in projected.chunks_mut(per_row.max(1)).enumerate() {
            if !self.owned[row] {
                blocks.iter_mut().for_each(|x| *x = 0.0);
            }
        }
        Ok(projected)
    }

    /// A_1 = E^T A E split among the ranks by vertex ownership: each rank's backend forms
    /// the products of its owned trace rows (the incidence of its vertex space lists no
    /// others; on the device for CUDA), the rows of vertices that other ranks own travel to
    /// them ([`rows_to_owners`]), and the level is split
    /// (`DistributedOps::split_vertex_level`): a rank returns its owned rows, and the
    /// hierarchy coarsens the level where it lies (`hdg_linalg::multigrid`). On one rank, the
    /// whole level.
    fn vertex_level(
        &self,
        backend: &DistributedOps<'a, B, B::Indices>,
        space: &VertexSpace,
        topology: &TraceTopology,
    ) -> Result<(HostCsr, Option<B::Csr>)> {
        if self.comm.size() == 1 {
            return Ok((self.vertex_operator(space, topology)?, None));
        }
        let (n, d) = (space.n_free_vertices, space.vertices_per_face);
        let row_vertices: Vec<u32> = space
            .row_vertices
            .chunks(d.max(1))
            .zip(&self.owned)
            .filter(|(_, &owned)| owned)
            .flat_map(|(v, _)| v.iter().copied())
            .collect();
        let owner = backend.vertex_owners(n, &row_vertices);
        let local = match self.local.get() {
            Some(local) => local.vertex_operator(space, topology),
            None => Ok(HostCsr { n, n_cols: n, indptr: vec![0; n + 1], ..HostCsr::default() }),
        };
        let a1 = rows_to_owners(self.comm, &agree(self.comm, local)?, &owner)?;
        agree(self.comm, backend.split_vertex_level::<T>(&a1, &owner, &row_vertices))?;
        Ok((a1, None))
    }

    /// E^T A E over every rank's owned rows, the same matrix on every rank. `space` is the
    /// whole vertex space seen from this rank's rows with the incidence on its owned rows
    /// ([`VertexSpace::restricted_to_rows`]), so the backend's own E^T A E of the local
    /// operator (on the device for CUDA) gathers the owned rows alone; the ranks' matrices are
    /// then summed ([`sum_over_ranks`]).
    fn vertex_operator(&self, space: &VertexSpace, topology: &TraceTopology) -> Result<HostCsr> {
        let n = space.n_free_vertices;
        let local = match self.local.get() {
            Some(local) => local.vertex_operator(space, topology),
            None => Ok(HostCsr { n, n_cols: n, indptr: vec![0; n + 1], ..HostCsr::default() }),
        };
        sum_over_ranks(self.comm, &agree(self.comm, local)?)
    }
}

/// Each rank's `local` rows summed on their owners (`owner[row]`): a rank keeps the rows it
/// owns and sends the others' to them (only the rows it has entries in: at a part's
/// interface), one all-to-all each for the rows, their lengths, columns and values. Row r of
/// the result holds, on its owner, the rank's own entries and then each sender's in rank
/// order, and is empty elsewhere.
///
/// # Errors
/// More rows or entries for one rank than MPI's counts (2^31 - 1).
pub fn rows_to_owners(comm: &Communicator, local: &HostCsr, owner: &[u32]) -> Result<HostCsr> {
    let (size, me, n) = (comm.size() as usize, comm.rank() as u32, local.n);
    let row = |r: usize| local.indptr[r]..local.indptr[r + 1];
    let mut sent: Vec<Vec<u32>> = vec![Vec::new(); size];
    for r in (0..n).filter(|&r| owner[r] != me && !row(r).is_empty()) {
        sent[owner[r] as usize].push(r as u32);
    }
    let count = |len: usize| {
        Count::try_from(len).map_err(|_| CoreError::InvalidParameter {
            name: "vertex level",
            reason: format!("{len} rows or entries to send to one rank: above MPI's counts"),
        })
    };
    let counts = |f: &dyn Fn(&[u32]) -> usize| -> Result<Vec<Count>> {
        sent.iter().map(|rows| count(f(rows))).collect()
    };
    let row_counts = agree::agree(comm, counts(&|rows| rows.len()))?;
    let entry_counts = counts(&|rows| rows.iter().map(|&r| row(r as usize).len()).sum())?;
    let exchange_counts = |mine: &[Count]| {
        let mut theirs: Vec<Count> = vec![0; size];
        comm.all_to_all_into(mine, &mut theirs[..]);
        theirs
    };
    let (their_row_counts, their_entry_counts) =
        (exchange_counts(&row_counts), exchange_counts(&entry_counts));
    let rows: Vec<u32> = sent.concat();
    let lengths: Vec<u32> = rows.iter().map(|&r| row(r as usize).len() as u32).collect();
    let columns: Vec<u32> = rows
        .iter()
        .flat_map(|&r| local.indices[row(r as usize)].iter().map(|&c| c as u32))
        .collect();
    let values: Vec<f64> =
        rows.iter().flat_map(|&r| local.values[row(r as usize)].iter().copied()).collect();
    let their_rows = agree::all_to_all(comm, &rows, &row_counts, &their_row_counts);
    let their_lengths = agree::all_to_all(comm, &lengths, &row_counts, &their_row_counts);
    let their_columns = agree::all_to_all(comm, &columns, &entry_counts, &their_entry_counts);
    let their_values = agree::all_to_all(comm, &values, &entry_counts, &their_entry_counts);
    // Each received row's entries, and the received rows of each vertex in sender order.
    let starts = crate::sparse_rows::prefix_sums(their_lengths.iter().map(|&l| l as usize));
    let (first, received) =
        crate::sparse_rows::invert(their_rows.len(), n, |k| Some(their_rows[k] as usize));
    Ok(crate::sparse_rows::assemble_rows(n, local.n_cols, |r, accumulator| {
        if owner[r] != me {
            return;
        }
        for p in row(r) {
            accumulator.add(local.indices[p], local.values[p]);
        }
        for &k in &received[first[r]..first[r + 1]] {
            for e in starts[k as usize]..starts[k as usize + 1] {
                accumulator.add(their_columns[e] as usize, their_values[e]);
            }
        }
    }))
}

/// The sum of every rank's `local` (all of the same shape), on every rank: every rank's
/// non-empty rows are gathered on every rank (one gather each of their numbers, lengths,
/// columns and values) and summed there, rows in parallel, the entries of a row in rank order
/// and each rank's in its own order: every rank so holds the same bits. For shares whose rows
/// barely overlap (each rank's share of the coarse level P^T A P: its aggregates' rows) this
/// is one collective step, where summing by row ranges first sent every share's entries to the
/// rank of their range (measured: that all-to-all and the serial unpacking around it cost as
/// much as the gather itself).
///
/// # Errors
/// More entries over all ranks than MPI's counts (2^31 - 1), on every rank alike.
pub fn sum_over_ranks(comm: &Communicator, local: &HostCsr) -> Result<HostCsr> {
    use rayon::prelude::*;
    let n = local.n;
    let rows: Vec<u32> = (0..n as u32)
        .into_par_iter()
        .filter(|&r| local.indptr[r as usize + 1] > local.indptr[r as usize])
        .collect();
    let lengths: Vec<u32> = rows
        .par_iter()
        .map(|&r| (local.indptr[r as usize + 1] - local.indptr[r as usize]) as u32)
        .collect();
    let total = agree::sum_count(comm, local.indices.len());
    if Count::try_from(total).is_err() {
        return Err(CoreError::InvalidParameter {
            name: "vertex level",
            reason: format!("{total} entries gathered on every rank: above MPI's counts"),
        });
    }
    let columns: Vec<u32> = local.indices.par_iter().map(|&c| c as u32).collect();
    let all_rows = agree::gather_all(comm, &rows);
    let all_lengths = agree::gather_all(comm, &lengths);
    let all_columns = agree::gather_all(comm, &columns);
    let all_values = agree::gather_all(comm, &local.values);
    // Each gathered row's entries, and the gathered rows of each row in rank order.
    let starts = crate::sparse_rows::prefix_sums(all_lengths.iter().map(|&l| l as usize));
    let (first, gathered) =
        crate::sparse_rows::invert(all_rows.len(), n, |k| Some(all_rows[k] as usize));
    Ok(crate::sparse_rows::assemble_rows(n, local.n_cols, |r, accumulator| {
        for &k in &gathered[first[r]..first[r + 1]] {
            for e in starts[k as usize]..starts[k as usize + 1] {
                accumulator.add(all_columns[e] as usize, all_values[e]);
            }
        }
    }))
}
