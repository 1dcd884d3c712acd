//! The pipeline over MPI ranks (feature `distributed`), after MFEM's `ParMesh` and
//! `HypreParMatrix`: a distributed object is the serial one plus its partition.
//!
//! - **Partition.** The cells are split into one part per rank ([`hdg_mesh::Partition`], METIS
//!   on the cell graph); every face has one owner, the rank of its lower-numbered cell. A rank's
//!   part ([`hdg_mesh::MeshPart`]) holds its cells and the ghost cells across the faces it owns,
//!   as a mesh of its own whose interface faces carry [`hdg_mesh::INTERFACE_TAG`].
//! - **Stages.** Setup, condensation and assembly run on the part through the same backend
//!   traits as on one process ([`crate::Discretization::for_part`]): the rows of the faces a
//!   rank owns are complete (both cells are in the part), with columns into ghost faces.
//! - **Solve.** The Krylov solvers of `hdg-linalg` run unchanged over [`DistributedOps`] (every
//!   reduction one allreduce; a fused reduction of several dot products still one) and
//!   [`DistributedOperator`] (a product exchanges the halo, [`Halo`], then applies the rank's
//!   rows). Ghost rows of the solvers' vectors hold zeros, so local dot products count each
//!   row on its owner, and (block) Jacobi sees identity blocks there.
//! - **Multigrid.** The trace level is distributed like the solvers' vectors; the first vertex
//!   level is split by vertex ownership and coarsened where it lies, the coarser vertex levels
//!   are replicated on every rank (`multigrid.rs` says why and what it costs).
//! - **Direct solves.** The sparse factorisation gathers the owned rows on rank 0 in the
//!   one-process run's numbering ([`GatheredRows`]), factors there and sends each rank its rows
//!   of the solution.
//! - **Afterwards.** The ghost faces receive their owners' trace; recovery and postprocessing
//!   run on the part; error norms are summed over owned cells and reduced.
//! - **Pure Neumann** (c = 0, mean(u_h) = 0 asked for): as on one process, the right-hand side
//!   loses its constant component and the solver works in the complement of the constants (both
//!   over every rank), and u_h is shifted by its mean over every rank's owned cells.
//! - **Failures.** Each step ends in [`agree()`]: a failure on one rank is every rank's error.
//!
//! MPI is used from the thread that initialised it only ([`mpi::initialize`]: a single-thread
//! MPI); the backends' worker threads never communicate.
pub mod agree;
mod gather;
mod halo;
mod multigrid;
mod operator;
mod ops;
mod pipeline;
mod solver;

pub use agree::agree;
pub use gather::GatheredRows;
pub use halo::Halo;
pub use mpi;
pub use multigrid::{rows_to_owners, sum_over_ranks};
pub use operator::DistributedOperator;
pub use ops::DistributedOps;
pub use pipeline::{solve, DistributedReport, DistributedRun, RankReport};
pub use solver::{part_vertex_space, DistributedSetup, DistributedSolver};

/// The number of ranks of `comm`.
pub fn size(comm: &Communicator) -> usize {
    mpi::topology::Communicator::size(comm) as usize
}

/// The communicator of a distributed run (rsmpi's; `mpi::initialize()?.world()` for all ranks).
pub type Communicator = mpi::topology::SimpleCommunicator;

/// Counts and times a kind of communication (a halo's exchanges, the reductions).
#[derive(Default)]
pub(crate) struct CommClock {
    count: std::sync::atomic::AtomicUsize,
    nanos: std::sync::atomic::AtomicU64,
}

/// Adds the time since its start to its clock when dropped.
pub(crate) struct Timed<'a>(&'a CommClock, std::time::Instant);

impl CommClock {
    pub(crate) fn start(&self) -> Timed<'_> {
        Timed(self, std::time::Instant::now())
    }

    /// Events and seconds so far.
    pub(crate) fn read(&self) -> (usize, f64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.count.load(Relaxed), self.nanos.load(Relaxed) as f64 * 1e-9)
    }
}

impl Drop for Timed<'_> {
    fn drop(&mut self) {
        use std::sync::atomic::Ordering::Relaxed;
        self.0.count.fetch_add(1, Relaxed);
        self.0.nanos.fetch_add(self.1.elapsed().as_nanos() as u64, Relaxed);
    }
}
