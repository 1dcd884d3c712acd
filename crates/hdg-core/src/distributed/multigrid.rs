//! What the multigrid preconditioner needs of a distributed solve. The trace level is
//! distributed like the solver's vectors: its smoother needs only the operator's products
//! (halo exchanges) and block Jacobi on owned rows. The vertex levels are replicated: E^T A E
//! is summed over the ranks' owned rows and every rank holds the whole vertex hierarchy, the
//! same matrices bit for bit (every rank assembles the same sums in the same order), and runs
//! its cycle; restriction to the vertex level is the local E^T followed by one allreduce, and
//! prolongation is local. The iterations are the one-process run's; the vertex levels' work
//! is not divided (the scaling model in BENCHMARKS.md says when that matters).
//!
//! Why replicated: it keeps the one-process hierarchy (the same vertex levels bit for bit,
//! the same iteration counts) with no new coarsening code, and on a few ranks the vertex
//! levels are a small share of a cycle (about a tenth of the trace level's bytes in 2D at
//! k = 3). It does not scale: the vertex levels grow with the number of ranks. The two
//! remedies, vertex unknowns owned by ranks with halo products and aggregation inside each
//! rank (the coarsest levels gathered onto fewer ranks), or hypre's BoomerAMG on the
//! distributed P1 matrix, have not been built or measured against each other.
use super::{agree, Communicator, DistributedOperator, DistributedOps};
use crate::auxiliary::VertexSpace;
use crate::backend::{HaloOps, MultigridOperator, MultigridOps};
use crate::csr::HostCsr;
use crate::error::Result;
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
    fn csr_apply(&self, matrix: &B::Csr, x: &B::Vector, y: &mut B::Vector) -> Result<()> {
        self.local.csr_apply(matrix, x, y)
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
        self.local.prolong_add(transfer, coarse, trace)?;
        self.halo.clear_ghosts::<T, B>(self.local, trace)
    }
    /// Each rank restricts its owned rows (ghost rows hold zeros); the sums are reduced.
    fn restrict(
        &self,
        transfer: &B::FaceTransfer,
        trace: &B::Vector,
        coarse: &mut B::Vector,
    ) -> Result<()> {
        self.local.restrict(transfer, trace, coarse)?;
        self.sum_over_ranks::<T>(coarse)
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

    /// E^T A E over every rank's owned rows (`space`: the whole vertex space seen from this
    /// rank's rows, [`VertexSpace::restricted_to_rows`]), the same matrix on every rank.
    fn vertex_operator(&self, space: &VertexSpace, topology: &TraceTopology) -> Result<HostCsr> {
        let n = space.n_free_vertices;
        let local = match self.local.get() {
            Some(_) => {
                let d = space.vertices_per_face;
                let projected = self.project_blocks(&space.face_transfer, d, d)?;
                crate::auxiliary::vertex_operator(space, topology, &projected)?
            }
            None => HostCsr { n, n_cols: n, indptr: vec![0; n + 1], ..HostCsr::default() },
        };
        Ok(sum_over_ranks(self.comm, &local))
    }
}

/// The sum of every rank's `local` (all of the same shape), on every rank: the entries are
/// gathered in rank order and each row's summed in that order, so every rank assembles the
/// same bits.
pub fn sum_over_ranks(comm: &Communicator, local: &HostCsr) -> HostCsr {
    let mut rows = Vec::with_capacity(local.values.len());
    for r in 0..local.n {
        rows.extend(std::iter::repeat_n(r as u64, local.indptr[r + 1] - local.indptr[r]));
    }
    let columns: Vec<u64> = local.indices.iter().map(|&c| c as u64).collect();
    let all_rows = agree::gather_all(comm, &rows);
    let all_columns = agree::gather_all(comm, &columns);
    let all_values = agree::gather_all(comm, &local.values);
    let (start, entries) =
        crate::sparse_rows::invert(all_rows.len(), local.n, |e| Some(all_rows[e] as usize));
    crate::sparse_rows::assemble_rows(local.n, local.n_cols, |row, accumulator| {
        for &e in &entries[start[row]..start[row + 1]] {
            accumulator.add(all_columns[e as usize] as usize, all_values[e as usize]);
        }
    })
}
