//! What the multigrid preconditioner (`hdg-linalg`) needs beyond the trace solvers' layer:
//! sparse matrices and the trace-to-vertex transfer on the backend ([`MultigridOps`]), and of
//! the trace operator its blocks projected onto the vertex space and, optionally, a cheaper
//! copy for smoothing ([`MultigridOperator`]). A backend without them runs every other solver.
use crate::auxiliary::VertexSpace;
use crate::csr::HostCsr;
use crate::error::Result;
use crate::real::Real;
use crate::topology::TraceTopology;

use super::{BlockOps, FusedOps, TraceOperator};

/// What the multigrid preconditioner (`hdg-linalg`) needs from a backend beyond vector
/// operations: sparse matrices in compressed sparse row form (its coarse levels and their
/// transfers; any shape, values in the working precision), and the face-by-face transfer E
/// between the trace space and the P1 vertex space ([`crate::auxiliary`]).
pub trait MultigridOps<T: Real>: FusedOps<T> + BlockOps<T> {
    /// A CSR matrix resident on the backend.
    type Csr: Send + Sync;
    /// The transfer E of a [`VertexSpace`] resident on the backend.
    type FaceTransfer: Send + Sync;
    /// Uploads a host matrix (values rounded to T).
    fn upload_csr(&self, matrix: &HostCsr) -> Result<Self::Csr>;
    /// y = A x.
    fn csr_apply(&self, matrix: &Self::Csr, x: &Self::Vector, y: &mut Self::Vector) -> Result<()>;
    /// Uploads what E needs: the reference block E^, each face's vertices, and the incidence
    /// of vertices in faces.
    fn upload_face_transfer(&self, space: &VertexSpace) -> Result<Self::FaceTransfer>;
    /// trace += E coarse: each face's first d coefficients gain E^ times its vertex values.
    fn prolong_add(
        &self,
        transfer: &Self::FaceTransfer,
        coarse: &Self::Vector,
        trace: &mut Self::Vector,
    ) -> Result<()>;
    /// coarse = E^T trace: each vertex gathers from the faces that contain it.
    fn restrict(
        &self,
        transfer: &Self::FaceTransfer,
        trace: &Self::Vector,
        coarse: &mut Self::Vector,
    ) -> Result<()>;
    /// The products of one smoothed-aggregation coarsening, where the backend computes them
    /// itself: from the level's matrix A (`fine` on the host, `fine_on_backend` as uploaded)
    /// and the tentative prolongator T (one entry per row), the prolongator
    /// P = (I - omega_over_rho D^-1 A) T, its transpose and the coarse matrix P^T A P, each
    /// with the operations of `hdg_linalg`'s host coarsening in its order (the same numbers to
    /// the bit). `None` leaves them to that host coarsening: the default, and a backend's
    /// answer where its own would not be faster or a row is beyond its kernels.
    fn coarsen(
        &self,
        fine: &HostCsr,
        fine_on_backend: &Self::Csr,
        tentative: &HostCsr,
        omega_over_rho: f64,
    ) -> Result<Option<Coarsening<Self::Csr>>> {
        let _ = (fine, fine_on_backend, tentative, omega_over_rho);
        Ok(None)
    }
    /// `matrix`, a level the multigrid has coarsened ([`MultigridOps::coarsen`]), keeps only
    /// what its products need from now on: what the backend held for its coarsening goes (on
    /// the CUDA backend the level's values in f64 beside those in the cycle's precision). The
    /// default holds nothing more.
    fn release_coarsening_values(&self, matrix: &mut Self::Csr) -> Result<()> {
        let _ = matrix;
        Ok(())
    }
    /// How a level of `n` unknowns is split among processes, if it is (a distributed run's
    /// first vertex level): each process then holds only the rows it owns, and the hierarchy
    /// aggregates and coarsens through [`SplitLevel`]. None, the default: the level is whole
    /// here.
    fn split_level(&self, n: usize) -> Option<&dyn SplitLevel> {
        let _ = n;
        None
    }
}

/// A multigrid level split among processes by row ownership ([`MultigridOps::split_level`]):
/// its vectors keep the whole level's length on every process, each process computing the
/// entries of the rows it owns (the others zero); its matrix on each process is the owned
/// rows, with columns into rows that other processes own (ghosts). What the hierarchy's setup
/// needs to coarsen such a level without gathering it: each operation is collective (every
/// process calls it, in the same order).
pub trait SplitLevel {
    /// Which rows this process owns.
    fn owned(&self) -> &std::sync::Arc<[bool]>;
    /// `rows` (the level's length, this process's owned rows filled) with every ghost row (a
    /// row that this process's rows reach, owned elsewhere) filled from its owner.
    fn fill_ghost_rows(&self, rows: &HostCsr) -> Result<HostCsr>;
    /// The sum over the processes of each one's `local` (all of the same shape), the same
    /// matrix on every process. A matrix of owned rows so becomes the whole level.
    fn sum(&self, local: &HostCsr) -> Result<HostCsr>;
    /// The sum over the processes of each one's `local` (all of the same length), on every
    /// process. A vector of owned entries (the others zero) so becomes the whole one.
    fn sum_vector(&self, local: &[f64]) -> Result<Vec<f64>>;
    /// The graph whose rows each process holds (its owned rows: `start`, `neighbours` in CSR
    /// form over the level's rows, the others empty), joined: the whole graph on every process.
    ///
    /// # Errors
    /// A graph beyond MPI's counts (2^31 - 1 entries), on every process alike.
    fn gather_graph(&self, start: &[usize], neighbours: &[u32]) -> Result<(Vec<usize>, Vec<u32>)>;
    /// The largest `x` over the processes.
    fn max(&self, x: f64) -> Result<f64>;
    /// The level's vectors are whole on every process from now on (a level solved exactly
    /// needs every entry); its matrix must then be the whole one ([`SplitLevel::sum`]).
    fn join(&self);
}

/// What [`MultigridOps::coarsen`] gives: the transfers on the backend, the coarse matrix on
/// the host (the next coarsening's aggregation reads it there) and, where the backend made it,
/// on the backend.
pub struct Coarsening<C> {
    /// P, fine x coarse.
    pub prolong: C,
    /// P^T.
    pub restrict: C,
    /// P^T A P.
    pub coarse: HostCsr,
    /// P^T A P as [`MultigridOps::upload_csr`] would have uploaded it, if already there.
    pub coarse_on_backend: Option<C>,
}

/// What [`MultigridOperator::smoothing_copy`] gives: an operator on the same vectors.
pub type SmoothingCopy<'a, T, V> = Box<dyn TraceOperator<T, Vector = V> + Send + 'a>;

/// What the multigrid preconditioner needs of a trace operator of backend `B` beyond its
/// product: the vertex level E^T A E, formed from the operator's stored blocks, and optionally a
/// copy that is cheaper to apply in the smoother. An operator without stored blocks (a
/// matrix-free one) says so from [`MultigridOperator::project_blocks`], and the multigrid
/// cannot be built on it.
pub trait MultigridOperator<T: Real, B: MultigridOps<T>>:
    TraceOperator<T, Vector = B::Vector>
{
    /// Every block of the matrix projected onto a small basis: for block row `row` and slot `a`
    /// (the DBF slots of [`crate::TraceTopology`]), the m x m matrix B^T A_{row,a} B, in f64,
    /// at `[((row * slots) + a) * m * m + i * m + j]`; zero for padding and Dirichlet slots.
    /// B is n_f x m with only its first `rows` rows nonzero, given as those rows (`basis`,
    /// rows x m, row-major), so only the leading rows x rows corner of each block is read.
    fn project_blocks(&self, basis: &[f64], rows: usize, m: usize) -> Result<Vec<f64>>;
    /// The vertex-level operator A_1 = E^T A E for the vertex space `space` of the
    /// discretization whose trace topology is `topology`, on the host. The default projects
    /// the blocks ([`MultigridOperator::project_blocks`]) and assembles on the host
    /// ([`crate::auxiliary::vertex_operator`]); a backend may assemble on its device instead.
    fn vertex_operator(&self, space: &VertexSpace, topology: &TraceTopology) -> Result<HostCsr> {
        let d = space.vertices_per_face;
        let projected = self.project_blocks(&space.face_transfer, d, d)?;
        crate::auxiliary::vertex_operator(space, topology, &projected)
    }
    /// The vertex level as the multigrid builds it: A_1 on the host, and as
    /// [`MultigridOps::upload_csr`] would upload it where the backend formed it itself and
    /// keeps it (None, the default: it goes up when the level is made).
    fn vertex_level(
        &self,
        backend: &B,
        space: &VertexSpace,
        topology: &TraceTopology,
    ) -> Result<(HostCsr, Option<B::Csr>)> {
        let _ = backend;
        Ok((self.vertex_operator(space, topology)?, None))
    }
    /// A copy of the operator for the multigrid's smoothing products only, cheaper to apply
    /// (its entries in fewer bytes), where the backend has one; None (the default) smooths
    /// with the operator itself. Each entry is rounded on its own, so the copy is symmetric
    /// where the operator is: the smoother, and with it the V-cycle, stays symmetric positive
    /// definite (`hdg_linalg::multigrid` says why).
    fn smoothing_copy(&self) -> Result<Option<SmoothingCopy<'_, T, B::Vector>>> {
        Ok(None)
    }
}
