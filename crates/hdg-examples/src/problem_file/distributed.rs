//! `mpirun -np N hdg run FILE.toml`: a problem file solved over MPI ranks (feature
//! `distributed`; [`crate::distributed`]).
use hdg::distributed::{Communicator, DistributedRun};

use super::*;
use crate::distributed::{check_operator, refuse, summary_run, PartitionKind};

impl ProblemFile {
    /// Builds the problem and solves it over the ranks of `world`, split by `partition`,
    /// reporting stages to `progress`; every rank calls it with the same file. A PNG output is
    /// refused before anything is solved (a picture needs the whole solution in one process).
    ///
    /// # Errors
    /// Those of [`ProblemFile::build`]; those of the distributed solve (a solver or backend
    /// that does not run distributed), the same on every rank.
    pub fn solve_distributed(
        &self,
        world: &Communicator,
        partition: PartitionKind,
        progress: &mut dyn Progress,
    ) -> Result<(Solved, DistributedRun), CoreError> {
        if self.outputs.png.is_some() {
            let what = "png of [output] draws the whole solution";
            let why = refuse(what, "leave it out (vtu writes one piece per rank)");
            return Err(problem_error(&self.path, why.to_string()));
        }
        check_operator(self.operator)?;
        let start = self.backend.start_on(hdg::distributed::node_rank(world));
        // A start that failed on one rank fails on all (none waits in the run's collectives).
        let setup = self.build_started(start, |start| {
            hdg::core::distributed::agree(world, start.wait().map_err(hdg::Error::into_core))
        })?;
        let started = std::time::Instant::now();
        let run = setup
            .solver
            .run_distributed_with(world, &partition.partitioner(), progress)
            .map_err(hdg::Error::into_core)?;
        let (plain, partitioned) = summary_run(world, &run, partition);
        let mut solved = self.solved(setup, plain, started.elapsed().as_secs_f64());
        solved.summary.partition = Some(partitioned);
        Ok((solved, run))
    }
}

impl Solved {
    /// [`Solved::finish`] of a distributed run: every rank writes its piece of the VTU output
    /// (a `.pvtu` and one piece per rank), then rank 0 writes the JSON report and prints the
    /// summary or the JSON; whether the trace solve converged (the same on every rank).
    ///
    /// # Errors
    /// The VTU writer's, the same on every rank; on rank 0, [`CoreError::Io`] if the JSON
    /// report cannot be written.
    pub fn finish_distributed(
        mut self,
        world: &Communicator,
        run: &DistributedRun,
        json: bool,
    ) -> Result<bool, CoreError> {
        let pending = match &self.outputs.vtu {
            Some(path) => {
                vec![crate::distributed::write_vtu(world, run, path, self.regions.as_deref())?]
            }
            None => Vec::new(),
        };
        if hdg::distributed::rank(world) == 0 {
            self.account();
            let report = self.json();
            self.write_json(&report)?;
            self.present(&report, json, &pending);
        }
        Ok(self.converged())
    }
}
