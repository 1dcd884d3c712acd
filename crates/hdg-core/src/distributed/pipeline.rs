//! The pipeline on one rank of a distributed run, written over the same backend traits as
//! [`crate::pipeline::solve`]: the rank's part of the mesh (its cells and the ghost cells
//! across its faces) is set up, condensed and assembled by the rank's backend as a mesh of its
//! own; the trace solve runs over all ranks, on the rows of the faces each owns
//! ([`DistributedOperator`], [`DistributedOps`]); recovery and postprocessing are the part's
//! again, once the ghost faces hold their owners' trace. Error norms sum the owned cells of
//! every rank.
use std::sync::Arc;
use std::time::Instant;

use hdg_mesh::{Mesh, MeshPart, Partition};
use mpi::topology::Communicator as _;
use mpi::traits::*;

use super::solver::{part_vertex_space, DistributedSetup, DistributedSolver};
use super::{agree, Communicator, DistributedOperator, DistributedOps, Halo};
use crate::backend::{Backend, ErrorNorms, HaloOps, VectorOps};
use crate::discretization::Discretization;
use crate::error::{CoreError, Result};
use crate::pipeline::{PipelineReport, Progress, Stage, StageTimings};
use crate::problem::Problem;
use crate::real::Real;
use crate::solution::Solution;
use crate::topology::TraceTopology;

/// One rank's share of a distributed run.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RankReport {
    /// The rank.
    pub rank: usize,
    /// Cells it owns.
    pub owned_cells: usize,
    /// Cells of other ranks it holds (across its owned faces).
    pub ghost_cells: usize,
    /// Trace rows (free faces) it owns.
    pub owned_faces: usize,
    /// Trace rows it holds as copies of other ranks' (the halo).
    pub ghost_faces: usize,
    /// Ranks it exchanges with.
    pub neighbours: usize,
    /// Values it sends per halo exchange.
    pub halo_values: usize,
    /// Its stage times.
    pub timings: StageTimings,
}

/// A rank's report as numbers, for one gather: seven counts, then the seven stage times.
const RANK_FIELDS: usize = 14;

impl RankReport {
    fn to_array(self) -> [f64; RANK_FIELDS] {
        let counts = [
            self.rank,
            self.owned_cells,
            self.ghost_cells,
            self.owned_faces,
            self.ghost_faces,
            self.neighbours,
            self.halo_values,
        ];
        let mut a = [0.0; RANK_FIELDS];
        a[..7].iter_mut().zip(counts).for_each(|(x, c)| *x = c as f64);
        a[7..].copy_from_slice(&self.timings.to_array());
        a
    }

    fn from_array(a: &[f64]) -> RankReport {
        let count = |i: usize| a[i] as usize;
        RankReport {
            rank: count(0),
            owned_cells: count(1),
            ghost_cells: count(2),
            owned_faces: count(3),
            ghost_faces: count(4),
            neighbours: count(5),
            halo_values: count(6),
            timings: StageTimings::from_array(a[7..].try_into().expect("seven stage times")),
        }
    }
}

/// What a distributed run reports, the same on every rank: the run as a whole (global sizes,
/// the solve, global errors; the stage times are the slowest rank's), and each rank's share.
#[derive(Clone, Debug)]
pub struct DistributedReport {
    /// The run as a whole.
    pub report: PipelineReport,
    /// Every rank's share, by rank.
    pub ranks: Vec<RankReport>,
    /// Interior faces between cells of different ranks.
    pub edge_cut: usize,
}

/// A distributed run on one rank: the report, and the rank's part with its solution.
#[derive(Debug)]
pub struct DistributedRun {
    /// The report (the same on every rank).
    pub report: DistributedReport,
    /// This rank's part of the mesh.
    pub part: MeshPart,
    /// The solution on the part's cells (owned cells first, then ghost cells, whose fields
    /// are not this rank's to give: use the owned ones); None on a rank without cells, and
    /// when [`solve`] was asked not to keep it.
    pub solution: Option<Solution>,
}

/// The state of a rank with cells, between the stages.
struct Local<'a, T: Real, B: Backend<T>> {
    disc: Discretization<'a, T>,
    prep: B::Prepared,
    condensed: B::Condensed,
    operator: B::Operator,
    rhs: <B as VectorOps<T>>::Vector,
}

/// Where a rank's setup stage goes, in seconds: a note of the solve.
#[derive(Default)]
struct SetupPhases {
    checks: f64,
    part: f64,
    discretization: f64,
    prepare: f64,
    halo: f64,
}

impl SetupPhases {
    fn note(&self, rank: usize) -> String {
        format!(
            "setup on rank {rank}: checks {:.3} s, the part's mesh {:.3} s, its discretization \
             {:.3} s, prepare {:.3} s, the halo {:.3} s",
            self.checks, self.part, self.discretization, self.prepare, self.halo
        )
    }
}

/// A stage timed as on one process, its outcome agreed by every rank.
fn timed<R>(
    comm: &Communicator,
    progress: &mut dyn Progress,
    stage: Stage,
    slot: &mut f64,
    work: impl FnOnce() -> Result<R>,
) -> Result<R> {
    crate::pipeline::timed(progress, stage, slot, || agree::agree(comm, work()))
}

/// The constant trace on this rank's owned rows (ghost rows zero; empty without cells), with
/// the right-hand side made orthogonal to it over every rank: z . rhs = 0 holds only up to
/// quadrature and rounding. Collective (one allreduce, after every rank's own part agreed).
fn orthogonal_to_constants<T: Real, B: Backend<T> + HaloOps<T>>(
    comm: &Communicator,
    backend: &B,
    halo: &Halo<B::Indices>,
    local: &mut Option<Local<'_, T, B>>,
) -> Result<Vec<f64>> {
    let mine = local
        .as_ref()
        .map(|l| -> Result<(Vec<f64>, f64, f64)> {
            let mut z = backend.copy_from_host(&l.disc.constant_trace())?;
            halo.clear_ghosts::<T, B>(backend, &mut z)?;
            let z: Vec<f64> = backend.to_host(&z)?.iter().map(|x| x.as_f64()).collect();
            let rhs = backend.to_host(&l.rhs)?;
            let zr = z.iter().zip(&rhs).map(|(a, b)| a * b.as_f64()).sum();
            let zz = z.iter().map(|a| a * a).sum();
            Ok((z, zr, zz))
        })
        .transpose();
    let (z, zr, zz) = agree::agree(comm, mine)?.unwrap_or_default();
    let sums = agree::sum(comm, &[zr, zz]);
    if let Some(l) = local {
        let lowered: Vec<T> = z.iter().map(|&x| T::from_f64_lossy(x)).collect();
        let z_on_backend = backend.copy_from_host(&lowered)?;
        backend.axpy(T::from_f64_lossy(-sums[0] / sums[1]), &z_on_backend, &mut l.rhs)?;
    }
    Ok(z)
}

/// Solves `problem` on `mesh` (the whole mesh, the same on every rank) distributed over the
/// ranks of `comm` by `partition`, each rank running its part on `backend`, with the trace
/// solver `solver`. Every rank calls it with the same arguments (its backend aside); every
/// rank returns the same report, or the same error: a failure on one rank (a refused input,
/// a closure's bad value on its cells) is every rank's.
///
/// With `keep_solution`, each rank's fields come to the host as its part's
/// [`DistributedRun::solution`]; without, they stay on the backend and only the error norms
/// are computed (on the backend where it can).
///
/// # Errors
/// A partition into another number of parts than `comm` has ranks; the serial pipeline's.
#[allow(clippy::too_many_arguments)]
pub fn solve<T, B, S>(
    comm: &Communicator,
    backend: &B,
    mesh: &Mesh,
    partition: &Partition,
    problem: &Problem,
    order: usize,
    solver: &S,
    keep_solution: bool,
    progress: &mut dyn Progress,
) -> Result<DistributedRun>
where
    T: Real,
    B: Backend<T> + HaloOps<T>,
    S: DistributedSolver<T, B> + ?Sized,
{
    let start = Instant::now();
    let (size, rank) = (comm.size() as usize, comm.rank() as usize);
    let mut t = StageTimings::default();
    progress.started(Stage::Setup);
    let checked = (|| -> Result<()> {
        if partition.n_parts() != size {
            return Err(CoreError::InvalidParameter {
                name: "mesh partition",
                reason: format!(
                    "a partition into {} parts for {size} ranks (one part per rank)",
                    partition.n_parts()
                ),
            });
        }
        // What only the whole mesh tells: the tags of the conditions.
        problem.validate_on(mesh)?;
        Ok(())
    })();
    agree::agree(comm, checked)?;
    // A Dirichlet or Robin face anywhere, or c > 0 given as a number, fixes the constant.
    let fixed_by_data = crate::boundary::constant_fixed(mesh, problem);
    let mut phases =
        SetupPhases { checks: start.elapsed().as_secs_f64(), ..SetupPhases::default() };
    let part = agree::agree(comm, MeshPart::new(mesh, partition, rank).map_err(CoreError::from))?;
    let fpc = mesh.cell_type().faces_per_cell();
    let local_problem = agree::agree(comm, problem.restricted_to(&part.global_cells, fpc))?;
    phases.part = start.elapsed().as_secs_f64() - phases.checks;

    // Setup, condensation and assembly on the part.
    let setup = part.mesh.as_ref().map(|local_mesh| -> Result<_> {
        let clock = Instant::now();
        let disc = Discretization::<T>::for_part(local_mesh, &local_problem, order)?;
        phases.discretization = clock.elapsed().as_secs_f64();
        let prep = backend.prepare(&disc)?;
        phases.prepare = clock.elapsed().as_secs_f64() - phases.discretization;
        Ok((disc, prep))
    });
    let setup = agree::agree(comm, setup.transpose())?;
    // Else c > 0 on some rank's cell does; else the constant is free (pure Neumann), and with
    // mean(u_h) = 0 asked for the operator is singular with the constants as its null space:
    // the right-hand side loses its constant component, the solver works in the complement,
    // and u_h is shifted to mean zero (as on one process).
    let singular = match fixed_by_data {
        true => false,
        false => {
            let reaction = setup.as_ref().is_some_and(|(disc, _)| {
                disc.reaction[..part.owned_cells].iter().any(|&c| c > T::zero())
            });
            let any_reaction = agree::sum_count(comm, reaction as usize) > 0;
            agree::agree(comm, crate::boundary::constant_free_unless(problem, any_reaction))?
        }
    };
    let n_f = crate::reference::reference_element(mesh.cell_type(), order)?.n_face();
    let rows = |disc: &Discretization<'_, T>| -> (Vec<u64>, Vec<u32>) {
        disc.topology
            .free_faces
            .iter()
            .map(|&f| (part.global_faces[f as usize] as u64, part.face_owner[f as usize]))
            .unzip()
    };
    let (row_faces, row_owners) = setup.as_ref().map(|(d, _)| rows(d)).unwrap_or_default();
    let clock = Instant::now();
    let halo = agree::agree(comm, Halo::new::<T, B>(comm, backend, &row_faces, &row_owners, n_f))?;
    phases.halo = clock.elapsed().as_secs_f64();
    t.setup = start.elapsed().as_secs_f64();
    progress.finished(Stage::Setup, t.setup);

    let condensed = timed(comm, progress, Stage::Condense, &mut t.condense, || {
        setup
            .map(|(disc, prep)| backend.condense(&disc, &prep).map(|c| (disc, prep, c)))
            .transpose()
    })?;
    let local = timed(comm, progress, Stage::Assemble, &mut t.assemble, || {
        condensed
            .map(|(disc, prep, mut condensed)| -> Result<Local<'_, T, B>> {
                let (operator, mut rhs) = backend.assemble(&disc, &prep, &condensed)?;
                backend.release_assembly_inputs(&mut condensed, &operator);
                // Ghost rows are assembled from the part's cells alone: their owners hold them.
                halo.clear_ghosts::<T, B>(backend, &mut rhs)?;
                Ok(Local { disc, prep, condensed, operator, rhs })
            })
            .transpose()
    })?;
    // The constant trace on owned rows (ghost rows zero), and the right-hand side made
    // orthogonal to it: z . rhs = 0 holds only up to quadrature and rounding.
    let mut local = local;
    let constant_trace = match singular {
        true => {
            Some(agree::agree(comm, orthogonal_to_constants(comm, backend, &halo, &mut local))?)
        }
        false => None,
    };

    // The trace solve, over every rank.
    progress.started(Stage::Solve);
    let solve_start = Instant::now();
    let (dim, k) = (mesh.dim(), order);
    let space_start = Instant::now();
    let vertex_space = match solver.vertex_space(dim, k) {
        Some(split_ratio) => Some(agree::agree(
            comm,
            part_vertex_space(
                comm,
                mesh,
                problem,
                &part,
                local.as_ref().map(|l| &l.disc),
                order,
                split_ratio,
            ),
        )?),
        None => None,
    };
    let space_seconds = space_start.elapsed().as_secs_f64();
    let no_rows = TraceTopology::empty(fpc);
    let setup = DistributedSetup {
        topology: local.as_ref().map_or(&no_rows, |l| &l.disc.topology),
        row_faces: &row_faces,
        vertex_space: vertex_space.as_ref().map(|(space, _)| space),
        dim,
        order,
        constant_trace: constant_trace.as_deref(),
    };
    let ops = DistributedOps::new(backend, comm, &halo);
    let mut trace = backend.zeros(halo.len())?;
    let empty_rhs = backend.zeros(0)?;
    let report = (|| {
        let operator = DistributedOperator::new(
            local.as_ref().map(|l| &l.operator),
            backend,
            comm,
            &halo,
            n_f,
        )?;
        let rhs = local.as_ref().map_or(&empty_rhs, |l| &l.rhs);
        solver.solve(&ops, &operator, &setup, rhs, &mut trace)
    })();
    let mut solve_report = agree::agree(comm, report)?;
    solve_report.notes.push(ops.communication_note());
    solve_report.notes.push(phases.note(rank));
    if let Some((space, how)) = &vertex_space {
        solve_report.notes.insert(
            0,
            format!(
                "vertex space ({} unknowns, {how}): {:.1} ms",
                space.n_free_vertices,
                space_seconds * 1e3
            ),
        );
    }
    halo.exchange::<T, B>(comm, backend, &mut trace)?;
    t.solve = solve_start.elapsed().as_secs_f64();
    progress.finished(Stage::Solve, t.solve);

    // Recovery, postprocessing and the errors on the part.
    let fields = timed(comm, progress, Stage::Recover, &mut t.recover, || {
        let fields = local
            .as_ref()
            .map(|l| backend.recover(&l.disc, &l.prep, &l.condensed, &trace))
            .transpose();
        if !singular {
            return fields;
        }
        // The solve fixed the constant only up to rounding: shift the trace (ghost rows too)
        // by the mean of u_h over every rank's owned cells, and recover again. (Every rank
        // agrees on each step before the sum: a failure on one is every rank's.)
        let fields = agree::agree(comm, fields)?;
        let integral = match (&local, &fields) {
            (Some(l), Some(f)) => backend
                .fields_to_host(f)
                .map(|host| l.disc.integral_of(&host.u, 0..part.owned_cells)),
            _ => Ok((0.0, 0.0)),
        };
        let (integral, measure) = agree::agree(comm, integral)?;
        let sums = agree::sum(comm, &[integral, measure]);
        let Some(l) = &local else { return Ok(fields) };
        let z = backend.copy_from_host(&l.disc.constant_trace())?;
        backend.axpy(T::from_f64_lossy(-sums[0] / sums[1]), &z, &mut trace)?;
        backend.recover(&l.disc, &l.prep, &l.condensed, &trace).map(Some)
    })?;
    let full_trace = match (&local, keep_solution) {
        (Some(l), true) => Some(crate::diagnostics::full_trace(&l.disc, &backend.to_host(&trace)?)),
        _ => None,
    };
    let owned = part.owned_cells;
    let post = timed(comm, progress, Stage::Postprocess, &mut t.postprocess, || {
        let (Some(l), Some(fields)) = (&local, &fields) else { return Ok(None) };
        let post = backend.postprocess(&l.disc, &l.prep, fields)?;
        let squares = match &problem.exact {
            Some(exact) => crate::user_code::run_user("the exact solution", || {
                backend.squared_errors_of_first(&l.disc, &l.prep, fields, &post, exact, owned)
            })??,
            None => [0.0; 3],
        };
        let host = match keep_solution {
            true => Some((backend.fields_to_host(fields)?, backend.postprocessed_to_host(&post)?)),
            false => None,
        };
        Ok(Some((host, squares)))
    })?;
    let squares = post.as_ref().map(|p| p.1).unwrap_or([0.0; 3]);
    let sums = agree::sum(comm, &squares);
    let errors = problem.exact.as_ref().map(|_| ErrorNorms {
        u: sums[0].sqrt(),
        q: sums[1].sqrt(),
        u_star: sums[2].sqrt(),
    });
    t.total = start.elapsed().as_secs_f64();

    // The report: global sizes, every rank's share, the slowest rank's times.
    let owned_faces = row_owners.iter().filter(|&&o| o as usize == rank).count();
    let mine = RankReport {
        rank,
        owned_cells: owned,
        ghost_cells: part.global_cells.len() - owned,
        owned_faces,
        ghost_faces: halo.ghost_rows(),
        neighbours: halo.neighbours(),
        halo_values: halo.sent_values(),
        timings: t,
    };
    let mut all = vec![0.0; RANK_FIELDS * size];
    comm.all_gather_into(&mine.to_array()[..], &mut all[..]);
    let ranks: Vec<RankReport> = all.chunks(RANK_FIELDS).map(RankReport::from_array).collect();
    // Stage by stage, the slowest rank's time.
    let mut slowest = [0.0f64; 7];
    for r in &ranks {
        slowest.iter_mut().zip(r.timings.to_array()).for_each(|(s, t)| *s = s.max(t));
    }
    let timings = StageTimings::from_array(slowest);
    let report = PipelineReport {
        cells: mesh.n_cells(),
        trace_dofs: ranks.iter().map(|r| r.owned_faces).sum::<usize>() * n_f,
        order,
        backend: backend.name().to_string(),
        precision: T::NAME,
        solver: solver.name(),
        solve: solve_report,
        errors,
        timings,
    };
    let solution = match (part.mesh.clone(), post, full_trace) {
        (Some(local_mesh), Some((Some((fields, u_star)), _)), Some(trace)) => Some(
            Solution::from_parts(
                Arc::new(local_mesh),
                local_problem,
                order,
                &fields,
                &u_star,
                &trace,
                report.clone(),
            )?
            .of_part(),
        ),
        _ => None,
    };
    let edge_cut = partition.edge_cut(mesh);
    Ok(DistributedRun { report: DistributedReport { report, ranks, edge_cut }, part, solution })
}
