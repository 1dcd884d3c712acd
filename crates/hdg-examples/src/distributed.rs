//! The program over MPI ranks (feature `distributed`): `mpirun -np 4 hdg solve ...` and
//! `mpirun -np 4 hdg run FILE.toml` solve one problem over the ranks mpirun started
//! ([`hdg::Solver::run_distributed_with`]). Every rank runs the same arguments and builds the
//! same mesh and problem; rank 0 alone shows progress, prints the summary (with a partition
//! block: [`partition_lines`]) or the JSON (with `ranks` and `edge_cut`: [`add_to_json`]) and
//! writes the JSON report; `--output` writes a `.pvtu` with one piece per rank
//! ([`hdg::distributed::output::write_vtu`]). Outputs that need the whole solution or matrix in
//! one process (a PNG picture, the Matrix Market export) are refused before the solve. The
//! exit status is the same on every rank.
//!
//! Without mpirun ([`launched_by_mpi`] false) the program does not start MPI and runs as a
//! build without the feature does.
use std::path::Path;

use hdg::distributed::{self, mpi, Communicator, DistributedReport, DistributedRun, Partitioner};
use hdg::{CoreError, Run, TraceOperatorKind};
use mpi::collective::SystemOperation;
use mpi::traits::*;

/// Whether an MPI launcher started this process, from the variables launchers set in each
/// process they start: `OMPI_COMM_WORLD_SIZE` (OpenMPI's mpirun), `PMI_SIZE` (MPICH's Hydra
/// mpiexec, and launchers speaking PMI), `PMIX_RANK` (PMIx launchers: OpenMPI 5's prterun,
/// Slurm's srun with PMIx). Read before MPI is started: the program starts MPI only then, so
/// that a plain `hdg solve` needs no MPI runtime and behaves as the build without MPI.
pub fn launched_by_mpi() -> bool {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"].iter().any(|v| std::env::var_os(v).is_some())
}

/// This process's rank as the launcher's variables give it (`OMPI_COMM_WORLD_RANK`,
/// `PMI_RANK`, `PMIX_RANK`), 0 when none is set: which rank prints what happens before MPI is
/// started (a command line refused by the argument parser, `--help`).
pub fn launcher_rank() -> usize {
    ["OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.parse().ok())
        .unwrap_or(0)
}

/// How `--partition` splits the cells among the ranks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum PartitionKind {
    /// METIS k-way on the cell graph: few faces between ranks.
    #[default]
    Metis,
    /// Contiguous ranges of cell numbers.
    Blocks,
}

impl PartitionKind {
    /// The library's partitioner.
    pub fn partitioner(self) -> Partitioner {
        match self {
            PartitionKind::Metis => Partitioner::Metis,
            PartitionKind::Blocks => Partitioner::Blocks,
        }
    }

    /// The name in summaries: `metis`, `blocks`.
    pub fn name(self) -> &'static str {
        match self {
            PartitionKind::Metis => "metis",
            PartitionKind::Blocks => "blocks",
        }
    }
}

/// How a distributed run split the work, for its summary and JSON.
#[derive(Clone, Debug)]
pub struct Partitioned {
    /// The partitioner's name ([`PartitionKind::name`]).
    pub partitioner: &'static str,
    /// Each rank's share and the edge cut.
    pub report: DistributedReport,
    /// Each rank's peak resident set size, bytes, where known.
    pub peak_rss_bytes: Vec<Option<u64>>,
}

/// The one-process form of a distributed run for the summary and the JSON ([`crate::print_report`],
/// [`crate::summary_json`]): the global report, the DBF operator, no solution on the host, and
/// the largest rank's peak RSS; with how the work was split. Collective (it gathers each rank's
/// peak RSS).
pub fn summary_run(
    world: &Communicator,
    run: &DistributedRun,
    partition: PartitionKind,
) -> (Run, Partitioned) {
    // u64::MAX stands for unknown (not Linux): gathered as one number per rank.
    let mine = hdg::host_peak_rss_bytes().unwrap_or(u64::MAX);
    let mut all = vec![0u64; distributed::size(world)];
    world.all_gather_into(&mine, &mut all[..]);
    let peak_rss_bytes: Vec<Option<u64>> =
        all.iter().map(|&b| (b != u64::MAX).then_some(b)).collect();
    let summary = Run {
        report: run.report.report.clone(),
        operator: TraceOperatorKind::Dbf,
        solution: None,
        trace_matrix: None,
        device_memory: None,
        host_peak_rss_bytes: peak_rss_bytes.iter().flatten().copied().max(),
    };
    let partitioned =
        Partitioned { partitioner: partition.name(), report: run.report.clone(), peak_rss_bytes };
    (summary, partitioned)
}

/// The summary's partition block: the partitioner, the ranks and the edge cut, then one line
/// per rank (its owned and ghost cells, owned and ghost trace faces, neighbours, the values it
/// sends per halo exchange, its total time).
pub fn partition_lines(p: &Partitioned) -> Vec<String> {
    let ranks = &p.report.ranks;
    let mut lines = vec![
        format!(
            "{}, {} MPI ranks, edge cut {} faces (stage times and peak RSS: the slowest and \
             largest rank's)",
            p.partitioner,
            ranks.len(),
            p.report.edge_cut
        ),
        format!(
            "{:>4} {:>11} {:>11} {:>11} {:>11} {:>10} {:>11}   stage times [s]: {}",
            "rank",
            "owned cells",
            "ghost cells",
            "owned faces",
            "ghost faces",
            "neighbours",
            "halo values",
            "setup condense assemble solve recover postprocess total"
        ),
    ];
    for r in ranks {
        lines.push(format!(
            "{:>4} {:>11} {:>11} {:>11} {:>11} {:>10} {:>11}   {}",
            r.rank,
            r.owned_cells,
            r.ghost_cells,
            r.owned_faces,
            r.ghost_faces,
            r.neighbours,
            r.halo_values,
            r.timings.to_array().map(|t| format!("{t:.3}")).join(" ")
        ));
    }
    lines
}

/// Adds the partition to a run's JSON report: `partitioner`, `edge_cut` and `ranks` (one
/// object per rank: `rank`, `owned_cells`, `ghost_cells`, `owned_faces`, `ghost_faces`,
/// `neighbours`, `halo_values`, `timings_s` as the report's, `host_peak_rss_bytes`).
pub fn add_to_json(json: &mut serde_json::Value, p: &Partitioned) {
    let ranks: Vec<serde_json::Value> = p
        .report
        .ranks
        .iter()
        .zip(&p.peak_rss_bytes)
        .map(|(r, rss)| {
            serde_json::json!({
                "rank": r.rank,
                "owned_cells": r.owned_cells,
                "ghost_cells": r.ghost_cells,
                "owned_faces": r.owned_faces,
                "ghost_faces": r.ghost_faces,
                "neighbours": r.neighbours,
                "halo_values": r.halo_values,
                "timings_s": hdg::json::timings(&r.timings),
                "host_peak_rss_bytes": rss,
            })
        })
        .collect();
    json["partitioner"] = p.partitioner.into();
    json["edge_cut"] = p.report.edge_cut.into();
    json["ranks"] = ranks.into();
}

/// Refuses an output that a distributed run cannot write, before anything is solved: `what`
/// says what it holds of the whole run (`--plot draws the whole solution`), `instead` what to
/// do.
pub fn refuse(what: &str, instead: &str) -> CoreError {
    CoreError::InvalidParameter {
        name: "output",
        reason: format!(
            "{what}, which a run over MPI ranks does not gather in one process; {instead}"
        ),
    }
}

/// Refuses a trace operator other than the assembled matrix, which is what runs distributed.
///
/// # Errors
/// [`CoreError::InvalidParameter`] for the matrix-free operator.
pub fn check_operator(operator: TraceOperatorKind) -> Result<(), CoreError> {
    match operator {
        TraceOperatorKind::Dbf => Ok(()),
        other => Err(CoreError::InvalidParameter {
            name: "operator",
            reason: format!(
                "the {} trace operator does not run distributed (a run over MPI ranks assembles \
                 the DBF matrix)",
                other.name()
            ),
        }),
    }
}

/// Writes the solution as a `.pvtu` and its pieces ([`hdg::distributed::output::write_vtu`];
/// `path` may end in `.vtu`), with the mesh file's regions; the summary's line about it.
/// Collective.
///
/// # Errors
/// The writer's, the same on every rank.
pub fn write_vtu(
    world: &Communicator,
    run: &DistributedRun,
    path: &Path,
    regions: Option<&[u32]>,
) -> Result<String, CoreError> {
    let options = hdg::vtu::Options { regions: regions.map(<[u32]>::to_vec), ..Default::default() };
    let into_core = hdg::Error::into_core;
    distributed::output::write_vtu(world, run, path, &options).map_err(into_core)?;
    let pvtu = distributed::output::pvtu_path(path).map_err(into_core)?;
    let pieces = run.report.ranks.iter().filter(|r| r.owned_cells > 0).count();
    let folder = pvtu.with_extension("");
    Ok(format!(
        "wrote {} (u_h, q_h, u* for ParaView: {pieces} pieces, one per rank, in {}/)",
        pvtu.display(),
        folder.display()
    ))
}

/// The exit status of every rank: the greatest over the ranks (a failure anywhere fails the
/// run everywhere), and whether this rank is the one to say why (the lowest rank with that
/// status, rank 0 for a failure all ranks share).
pub fn agree_status(world: &Communicator, status: u8) -> (u8, bool) {
    let mut greatest = 0u8;
    world.all_reduce_into(&status, &mut greatest, SystemOperation::max());
    let me = distributed::rank(world) as u32;
    let candidate = if status == greatest { me } else { u32::MAX };
    let mut speaker = 0u32;
    world.all_reduce_into(&candidate, &mut speaker, SystemOperation::min());
    (greatest, speaker == me)
}
