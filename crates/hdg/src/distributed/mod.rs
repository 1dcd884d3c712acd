//! Runs over MPI ranks (feature `distributed`): the same [`Solver`], every rank calling
//! [`Solver::run_distributed`] with the same mesh and problem, each solving its part.
//!
//! ```no_run
//! # fn main() -> Result<(), hdg::Error> {
//! use hdg::{distributed, Problem, Solver};
//! let universe = distributed::initialize()?;
//! let world = universe.world();
//! let mesh = hdg::generate::unit_square(64, hdg::mesh::Diagonal::Right)?;
//! let problem = Problem::builder().source(|_| 1.0).build();
//! let run = Solver::new(mesh, problem).order(3).run_distributed(&world, &mut hdg::Silent)?;
//! if distributed::rank(&world) == 0 {
//!     println!("{}", run.report.report);
//! }
//! # Ok(()) }
//! ```
//!
//! How the work is split and exchanged: `hdg::core::distributed`. The mesh is partitioned by
//! METIS ([`Partitioner::Metis`], computed on rank 0 and broadcast, so that every rank has
//! the same partition), or as the caller says.
pub mod output;

use hdg_core::distributed::mpi::topology::Communicator as _;
use hdg_core::distributed::mpi::traits::*;
use hdg_core::{CoreError, HaloOps, Precision, Progress};
use hdg_linalg::{SolverBackend, Suite};
use hdg_mesh::{Mesh, Partition};

pub use hdg_core::distributed::{mpi, Communicator, DistributedReport, DistributedRun, RankReport};
pub use hdg_mesh::{MeshPart, INTERFACE_TAG};

use crate::{Backend, Error, Solver};

/// Starts MPI (once per process; it ends when the returned universe is dropped).
///
/// # Errors
/// [`Error::Core`] when MPI was started already.
pub fn initialize() -> Result<mpi::environment::Universe, Error> {
    mpi::initialize().ok_or_else(|| {
        CoreError::InvalidParameter {
            name: "MPI",
            reason: "MPI was initialised already in this process".into(),
        }
        .into()
    })
}

/// This process's rank in `comm`.
pub fn rank(comm: &Communicator) -> usize {
    comm.rank() as usize
}

/// The number of ranks of `comm`.
pub fn size(comm: &Communicator) -> usize {
    comm.size() as usize
}

/// This process's rank among the ranks of `comm` on its node (the processes that share its
/// memory): the GPU it takes in a run on the CUDA backend is this number modulo the node's
/// devices.
pub fn node_rank(comm: &Communicator) -> usize {
    comm.split_shared(comm.rank()).rank() as usize
}

/// How a distributed run splits the cells among the ranks.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Partitioner {
    /// METIS k-way on the cell graph (few interface faces): the default.
    #[default]
    Metis,
    /// Contiguous ranges of cell numbers (no graph partitioner).
    Blocks,
    /// The caller's: one part per cell, as many parts as ranks.
    Given(Partition),
}

impl Partitioner {
    /// The partition of `mesh` into `parts` parts, the same on every rank: METIS runs on rank
    /// 0 and its answer is broadcast.
    ///
    /// # Errors
    /// A partition of another mesh or into another number of parts; METIS's refusal.
    pub fn partition(&self, comm: &Communicator, mesh: &Mesh) -> Result<Partition, Error> {
        let parts = size(comm);
        let partition = match self {
            Partitioner::Blocks => Partition::blocks(mesh.n_cells(), parts),
            Partitioner::Given(p) => p.clone(),
            Partitioner::Metis => {
                let computed = match rank(comm) {
                    0 => Partition::metis(mesh, parts).map(|p| Some(p.parts().to_vec())),
                    _ => Ok(None),
                };
                let computed =
                    hdg_core::distributed::agree(comm, computed.map_err(CoreError::from))?;
                let mut cells = computed.unwrap_or_else(|| vec![0u32; mesh.n_cells()]);
                comm.process_at_rank(0).broadcast_into(&mut cells[..]);
                Partition::new(cells, parts).map_err(CoreError::from)?
            }
        };
        Ok(partition)
    }
}

impl Solver {
    /// Runs the pipeline over the ranks of `comm`, this rank solving its part of the mesh
    /// ([`Partitioner::Metis`]); every rank calls it with the same solver. The report is the
    /// same on every rank; the solution is this rank's part's.
    ///
    /// # Errors
    /// As [`Solver::run`], the same on every rank. Every trace solver runs distributed; the
    /// direct one gathers the whole trace matrix on rank 0 and factors it there.
    ///
    /// On the CUDA backend each rank takes one GPU of its node: device [`node_rank`] modulo
    /// the devices it sees (so `mpirun -np 4` on a node of 4 GPUs uses each once), or the
    /// device of the backend it was started on ([`Solver::on_started`]).
    pub fn run_distributed(
        &self,
        comm: &Communicator,
        progress: &mut dyn Progress,
    ) -> Result<DistributedRun, Error> {
        self.run_distributed_with(comm, &Partitioner::Metis, progress)
    }

    /// [`Solver::run_distributed`] with the partition `partitioner` gives.
    ///
    /// # Errors
    /// As [`Solver::run_distributed`].
    pub fn run_distributed_with(
        &self,
        comm: &Communicator,
        partitioner: &Partitioner,
        progress: &mut dyn Progress,
    ) -> Result<DistributedRun, Error> {
        let partition = partitioner.partition(comm, self.mesh())?;
        match self.backend_choice() {
            Backend::Cpu => {
                self.run_ranks(comm, &hdg_backend_cpu::CpuBackend::new(), &partition, progress)
            }
            #[cfg(feature = "cuda")]
            Backend::Cuda => {
                let cuda = match self.started_cuda() {
                    Some(cuda) => Ok(cuda),
                    None => crate::start::cuda_on(node_rank(comm)),
                };
                let cuda = hdg_core::distributed::agree(
                    comm,
                    cuda.and_then(|b| b.with_settings(self.cuda_settings_choice().clone()))
                        .map(|b| b.with_trace_operator(self.operator_choice())),
                )?;
                self.run_ranks(comm, &cuda, &partition, progress)
            }
            #[cfg(not(feature = "cuda"))]
            Backend::Cuda => Err(hdg_core::distributed::agree(
                comm,
                hdg_backend_cuda::availability().map(|_| ()),
            )
            .err()
            .map_or_else(
                || {
                    let reason = "this build has no CUDA backend".into();
                    CoreError::InvalidParameter { name: "distributed run", reason }.into()
                },
                Error::from,
            )),
        }
    }

    /// The ranks' pipeline on `backend`, in the chosen precision.
    fn run_ranks<B, I>(
        &self,
        comm: &Communicator,
        backend: &B,
        partition: &Partition,
        progress: &mut dyn Progress,
    ) -> Result<DistributedRun, Error>
    where
        B: SolverBackend + HaloOps<f64, Indices = I> + HaloOps<f32, Indices = I>,
        I: Send + Sync,
    {
        let suite: Suite = self.solver_choice().suite(self.precision_choice());
        let (mesh, problem, order) = (self.mesh(), self.problem(), self.order_choice());
        let keep = self.keeps_solution();
        let run = match self.precision_choice() {
            Precision::F64 => hdg_core::distributed::solve::<f64, _, _>(
                comm, backend, mesh, partition, problem, order, &suite, keep, progress,
            )?,
            Precision::F32 => hdg_core::distributed::solve::<f32, _, _>(
                comm, backend, mesh, partition, problem, order, &suite, keep, progress,
            )?,
        };
        Ok(run)
    }
}
