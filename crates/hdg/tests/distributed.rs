//! Distributed runs against the one-process run of the same problem: each case runs under
//! `mpirun -np N` (N = 1..4, oversubscribed) as this test binary's `worker` test, on every rank
//! solving the whole problem in-process too and comparing its own cells and faces with it.
//! They need MPI, so they are ignored by default: `.ci/run` installs OpenMPI and runs them
//! (`cargo test --release -p hdg --features distributed --test distributed -- --ignored`).
#![cfg(feature = "distributed")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdg::distributed::{self, Partitioner};
use hdg::mesh::{Diagonal, Partition};
use hdg::{gmsh, Coefficient, Manufactured, Mesh, Problem, Silent, Solver, SolverChoice};

/// The absolute slack of pcg-mg's error norms against the one-process run's ([`compare_within`]).
const MG_SLACK: f64 = 1e-14;

/// How long one mpirun may take before the test calls it hung.
const TIMEOUT: Duration = Duration::from_secs(240);

/// Runs `case` on `np` ranks; panics with the ranks' output if mpirun fails or hangs. The ranks
/// share a scratch folder (`HDG_MPI_SCRATCH`), removed once the case passed.
fn mpirun(case: &str, np: usize) {
    let exe = std::env::current_exe().unwrap();
    let scratch = std::env::temp_dir().join(format!("hdg-mpi-{case}-{np}-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let mut child = Command::new("mpirun")
        .args(["-np", &np.to_string(), "--oversubscribe"])
        .arg(&exe)
        .args(["--exact", "worker", "--ignored", "--nocapture", "--test-threads=1"])
        .env("HDG_MPI_CASE", case)
        .env("HDG_MPI_SCRATCH", &scratch)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("RAYON_NUM_THREADS", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mpirun (OpenMPI or MPICH) on the PATH");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > TIMEOUT {
            child.kill().unwrap();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    match status {
        None => panic!("{case} on {np} ranks hung ({TIMEOUT:?}):\n{text}"),
        Some(s) if !s.success() => panic!("{case} on {np} ranks failed ({s}):\n{text}"),
        Some(_) => assert!(text.contains(&format!("case {case} passed on {np} ranks")), "{text}"),
    }
    std::fs::remove_dir_all(&scratch).ok();
}

fn square(n: usize) -> Mesh {
    hdg::generate::unit_square(n, Diagonal::Right).unwrap()
}

/// u = sin(pi x) sin(pi y) (sin(pi z)) with Dirichlet, Robin and Neumann sides.
fn mixed(dim: usize) -> Problem {
    Problem::manufactured(Manufactured::Sine, 1.0, 0.0).with_mixed_boundary(dim, 1.0).unwrap()
}

/// The plate with a hole: kappa 1 on the plate, 10 on the ring (regions), Neumann on the hole,
/// Robin on the outer sides; "exact" u = 0, so that the errors are the norms of u_h, q_h
/// (none: no gradient given) and u*.
fn plate() -> (Mesh, Problem) {
    plate_with(10.0)
}

/// [`plate`] with kappa `ring` on the ring.
fn plate_with(ring_kappa: f64) -> (Mesh, Problem) {
    let file =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/meshes/plate-with-hole-1.msh");
    let read = gmsh::read(&file).unwrap();
    let (outer, hole) =
        (read.groups.boundary_tag("outer").unwrap(), read.groups.boundary_tag("hole").unwrap());
    let (plate, ring) = (read.groups.region("plate").unwrap(), read.groups.region("ring").unwrap());
    let kappa = Coefficient::per_region(
        "kappa",
        &read.cell_regions,
        &BTreeMap::from([(plate, 1.0), (ring, ring_kappa)]),
    )
    .unwrap();
    let problem = Problem::builder()
        .kappa(kappa)
        .source(|x| 1.0 + x[0] * x[1])
        .neumann(hole, |_x, _n| 1.0)
        .robin(outer, 2.0, |x, _n| x[0])
        .exact(|_| 0.0)
        .build();
    (read.mesh, problem)
}

/// u = cos(pi x) cos(pi y) (cos(pi z)): mean zero, zero normal derivative on every side;
/// Neumann data everywhere, c = 0, mean(u_h) = 0 asked for (a singular trace system).
fn pure_neumann(dim: usize) -> Problem {
    use std::f64::consts::PI;
    let u = |x: &[f64]| x.iter().map(|&xi| (PI * xi).cos()).product::<f64>();
    let mut builder = Problem::builder().source(move |x| x.len() as f64 * PI * PI * u(x));
    for tag in 1..=2 * dim as u32 {
        builder = builder.neumann(tag, |_, _| 0.0);
    }
    builder.exact(u).mean_zero(true).build()
}

/// A partition with every cell in a random part, from a fixed seed.
fn random(cells: usize, parts: usize) -> Partition {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let parts_of = (0..cells)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % parts as u64) as u32
        })
        .collect();
    Partition::new(parts_of, parts).unwrap()
}

/// Every rank but the last gets cells: the last has none.
fn last_empty(cells: usize, parts: usize) -> Partition {
    let used = parts.saturating_sub(1).max(1);
    Partition::new((0..cells).map(|c| ((c * used) / cells) as u32).collect(), parts).unwrap()
}

fn relative_difference(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(0.0f64, |m, x| m.max(x.abs())).max(1e-300);
    a.iter().zip(b).fold(0.0f64, |m, (x, y)| m.max((x - y).abs())) / scale
}

/// The distributed run of `solver` with `partitioner` against the one-process run: the trace
/// on owned faces, u_h on owned cells and the error norms to 1e-10 relative; iterations
/// within +2.
fn compare(world: &distributed::Communicator, solver: Solver, partitioner: Partitioner) {
    compare_within(world, solver, partitioner, 0.0)
}

/// [`compare`], the error norms to 1e-10 relative plus `slack` absolute: where the two runs'
/// solvers differ (pcg-mg smooths with a bfloat16 copy on one process, not distributed), their
/// solutions differ by the solve's accuracy, and an error norm near it by as much.
fn compare_within(
    world: &distributed::Communicator,
    solver: Solver,
    partitioner: Partitioner,
    slack: f64,
) {
    compare_runs(world, &solver, &solver, partitioner, slack)
}

/// [`compare_within`] with the one-process run by `serial` and the distributed one by
/// `ranks` (the same problem, say on another backend).
fn compare_runs(
    world: &distributed::Communicator,
    serial: &Solver,
    ranks: &Solver,
    partitioner: Partitioner,
    slack: f64,
) {
    compare_iterations(world, serial, ranks, partitioner, slack, 2)
}

/// [`compare_runs`] with the distributed run's iterations within `+extra` of the one
/// process's.
fn compare_iterations(
    world: &distributed::Communicator,
    serial: &Solver,
    ranks: &Solver,
    partitioner: Partitioner,
    slack: f64,
    extra: usize,
) {
    let serial = serial.run(&mut Silent).unwrap();
    let serial_solution = serial.solution.unwrap();
    let run = ranks.run_distributed_with(world, &partitioner, &mut Silent).unwrap();
    let (report, part) = (&run.report.report, &run.part);
    assert!(report.solve.converged, "{:?}", report.solve);
    assert_eq!(report.cells, serial.report.cells);
    assert_eq!(report.trace_dofs, serial.report.trace_dofs);
    assert!(
        report.solve.iterations <= serial.report.solve.iterations + extra,
        "{} iterations distributed, {} in one process",
        report.solve.iterations,
        serial.report.solve.iterations
    );
    if let (Some(d), Some(s)) = (report.errors, serial.report.errors) {
        for (name, d, s) in [("u", d.u, s.u), ("q", d.q, s.q), ("u*", d.u_star, s.u_star)] {
            if d.is_nan() && s.is_nan() {
                continue; // an exact solution without gradient: no q error
            }
            assert!((d - s).abs() <= 1e-10 * s.abs() + slack, "{name}: {d:e} vs {s:e}");
        }
    }
    let Some(solution) = &run.solution else {
        assert_eq!(part.owned_cells, 0);
        return;
    };
    let n = serial_solution.u().len() / serial.report.cells;
    let (mut mine, mut whole) = (Vec::new(), Vec::new());
    for c in 0..part.owned_cells {
        let g = part.global_cells[c];
        mine.extend_from_slice(&solution.u()[c * n..(c + 1) * n]);
        whole.extend_from_slice(&serial_solution.u()[g * n..(g + 1) * n]);
    }
    let du = relative_difference(&mine, &whole);
    let n_f = serial_solution.trace().len() / serial_solution.mesh().n_faces();
    let (mut mine, mut whole) = (Vec::new(), Vec::new());
    for (f, &g) in part.global_faces.iter().enumerate() {
        if part.face_owner[f] as usize == part.rank {
            mine.extend_from_slice(&solution.trace()[f * n_f..(f + 1) * n_f]);
            whole.extend_from_slice(&serial_solution.trace()[g * n_f..(g + 1) * n_f]);
        }
    }
    let dt = relative_difference(&mine, &whole);
    println!(
        "rank {}: {} owned cells, {} iterations ({} in one process), u_h differs by {du:.1e}, \
         the trace by {dt:.1e}, errors {:?}",
        part.rank,
        part.owned_cells,
        report.solve.iterations,
        serial.report.solve.iterations,
        report.errors
    );
    assert!(du <= 1e-10 && dt <= 1e-10, "u_h differs by {du:e}, the trace by {dt:e}");
}

/// An f32 run against its one-process run: the same iterations within +2, and error norms
/// within 1e-5 absolute (of a solution of norm 0.5): f32 solves stop at f32's attainable
/// accuracy, where the two runs' different roundings (and the one process's bfloat16
/// smoothing) leave solutions some 1e-6 apart; a wrong exchange would leave them 1e-1 apart.
fn compare_single(world: &distributed::Communicator, solver: Solver) {
    let serial = solver.run(&mut Silent).unwrap();
    let run = solver.run_distributed(world, &mut Silent).unwrap();
    let (d, s) = (&run.report.report, &serial.report);
    assert!(d.solve.converged && d.precision == "f32", "{:?}", d.solve);
    assert!(d.solve.iterations <= s.solve.iterations + 2, "{:?} vs {:?}", d.solve, s.solve);
    let (de, se) = (d.errors.unwrap(), s.errors.unwrap());
    for (d, s) in [(de.u, se.u), (de.q, se.q), (de.u_star, se.u_star)] {
        assert!((d - s).abs() <= 1e-5, "{de:?} vs {se:?}");
    }
}

/// The case `HDG_MPI_CASE` on the ranks mpirun started (without it: nothing to do, so it fails
/// rather than pass silently).
#[test]
#[ignore = "the MPI ranks' side of the cases below (mpirun runs it)"]
fn worker() {
    let case = std::env::var("HDG_MPI_CASE").expect("HDG_MPI_CASE (run by the cases' mpirun)");
    let universe = distributed::initialize().unwrap();
    let world = universe.world();
    let np = distributed::size(&world);
    let block_jacobi = |mesh: Mesh, problem: Problem, k: usize| {
        Solver::new(Arc::new(mesh), problem).order(k).solver(SolverChoice::PcgBlockJacobi)
    };
    match case.as_str() {
        "square" => {
            for k in 1..=3 {
                compare(&world, block_jacobi(square(12), mixed(2), k), Partitioner::Metis);
            }
        }
        "cube" => {
            for k in 1..=3 {
                let mesh = hdg::generate::unit_cube(3).unwrap();
                compare(&world, block_jacobi(mesh, mixed(3), k), Partitioner::Metis);
            }
        }
        "plate" => {
            for k in 1..=3 {
                let (mesh, problem) = plate();
                compare(&world, block_jacobi(mesh, problem, k), Partitioner::Metis);
            }
        }
        "square-mg" => {
            for k in 1..=3 {
                let solver = Solver::new(Arc::new(square(16)), mixed(2)).order(k);
                compare_within(&world, solver, Partitioner::Metis, MG_SLACK);
            }
        }
        "cube-mg" => {
            for k in 1..=3 {
                let mesh = hdg::generate::unit_cube(4).unwrap();
                let solver = Solver::new(Arc::new(mesh), mixed(3)).order(k);
                compare_within(&world, solver, Partitioner::Metis, MG_SLACK);
            }
        }
        "plate-mg" => {
            // Kappa within the multigrid's split ratio (10): the vertex space is built on each
            // rank's rows; beyond it (1000) the coefficient regions around a vertex may span
            // ranks, and every rank builds the whole space.
            for (ring, how) in
                [(10.0, "built on each rank's rows"), (1000.0, "the whole mesh's on every rank")]
            {
                let (mesh, problem) = plate_with(ring);
                let solver = Solver::new(Arc::new(mesh), problem).order(2);
                let run = solver.run_distributed(&world, &mut Silent).unwrap();
                let notes = &run.report.report.solve.notes;
                assert!(notes.iter().any(|n| n.starts_with("vertex space") && n.contains(how)));
                compare_within(&world, solver, Partitioner::Metis, MG_SLACK);
            }
        }
        "vertex-mg" => {
            // Meshes whose vertex level is not the last: it runs split by vertex ownership and
            // is coarsened where it lies (checked by the report's notes), with the one-process
            // run's aggregates on any partition; the levels below it whole.
            let distributed = |solver: &Solver, p: Partitioner| {
                let run = solver.run_distributed_with(&world, &p, &mut Silent).unwrap();
                let notes = &run.report.report.solve.notes;
                let has = |note: &str| notes.iter().any(|n| n.contains(note));
                assert_eq!(has("the first distributed by vertex ownership"), np > 1, "{notes:?}");
                assert_eq!(has("split among the processes: coarsened where it lies"), np > 1);
                let levels = |notes: &[String]| {
                    notes.iter().find(|n| n.starts_with("multigrid levels")).cloned()
                };
                let serial = solver.run(&mut Silent).unwrap().report.solve.notes;
                let (mine, theirs) = (levels(notes).unwrap(), levels(&serial).unwrap());
                // The coarse levels' sizes and nonzeros are the one-process run's (the trace
                // level's size and the first vertex level's nonzeros are the rank's own).
                let coarse = |n: &str| -> Vec<String> {
                    let lists = n.split('[').skip(1).take(2).map(|l| l.split(']').next().unwrap());
                    lists.flat_map(|l| l.split(", ").skip(1).map(String::from)).collect()
                };
                assert_eq!(coarse(&mine), coarse(&theirs), "{mine} / {theirs}");
            };
            for k in 1..=2 {
                let solver = Solver::new(Arc::new(square(40)), mixed(2)).order(k);
                distributed(&solver, Partitioner::Metis);
                compare_within(&world, solver, Partitioner::Metis, MG_SLACK);
            }
            let cube = Solver::new(Arc::new(hdg::generate::unit_cube(8).unwrap()), mixed(3));
            distributed(&cube, Partitioner::Metis);
            compare_within(&world, cube, Partitioner::Metis, MG_SLACK);
            let mesh = square(40);
            let p = random(mesh.n_cells(), np);
            let solver = Solver::new(Arc::new(mesh), mixed(2)).order(1);
            distributed(&solver, Partitioner::Given(p.clone()));
            compare_within(&world, solver, Partitioner::Given(p), MG_SLACK);
        }
        "neumann" => {
            // Pure Neumann with mean zero: the singular system solved in the complement of the
            // constants over every rank (pcg-mg's cycle in f64, block Jacobi on the plate's
            // sides too), u_h shifted by the mean over every rank's cells.
            for k in 1..=3 {
                let solver = Solver::new(Arc::new(square(16)), pure_neumann(2)).order(k);
                compare_within(&world, solver, Partitioner::Metis, MG_SLACK);
            }
            let cube = Arc::new(hdg::generate::unit_cube(4).unwrap());
            let solver = Solver::new(cube, pure_neumann(3)).order(2);
            compare_within(&world, solver, Partitioner::Metis, MG_SLACK);
            let vertex_levels = Solver::new(Arc::new(square(40)), pure_neumann(2)).order(1);
            compare_within(&world, vertex_levels, Partitioner::Metis, MG_SLACK);
            let mesh = square(10);
            let p = last_empty(mesh.n_cells(), np);
            compare(&world, block_jacobi(mesh, pure_neumann(2), 2), Partitioner::Given(p));
        }
        "random-mg" => {
            let mesh = square(12);
            let p = random(mesh.n_cells(), np);
            let solver = Solver::new(Arc::new(mesh), mixed(2)).order(2);
            compare_within(&world, solver, Partitioner::Given(p), MG_SLACK);
        }
        "solvers" => {
            // Every distributed Krylov solver, and pcg-mg in f32, against its one-process run;
            // to 1e-9: pipelined CG's attainable accuracy lies above the default 1e-12 on one
            // process too.
            for choice in [
                SolverChoice::Cg,
                SolverChoice::PcgJacobi,
                SolverChoice::PipelinedCg,
                SolverChoice::Chebyshev,
                SolverChoice::ChebPcg,
                SolverChoice::CgChebyshev,
                SolverChoice::Gmres,
            ] {
                let solver = Solver::new(Arc::new(square(8)), mixed(2))
                    .order(2)
                    .solver(choice)
                    .tolerance(1e-9);
                compare_within(&world, solver, Partitioner::Metis, 1e-10);
            }
            let single =
                Solver::new(Arc::new(square(16)), mixed(2)).order(2).precision(hdg::Precision::F32);
            compare_single(&world, single);
        }
        "direct" => {
            // The sparse factorisation of the matrix gathered on rank 0: the one-process
            // factorisation's solution to 1e-10 in 2D and 3D, with regions and Neumann/Robin
            // tags, on a random partition and with a rank that owns no cells; in f32 too.
            let direct = |mesh: Mesh, problem: Problem, k: usize| {
                Solver::new(Arc::new(mesh), problem).order(k).solver(SolverChoice::Direct)
            };
            for k in 1..=3 {
                compare(&world, direct(square(8), mixed(2), k), Partitioner::Metis);
                let cube = hdg::generate::unit_cube(3).unwrap();
                compare(&world, direct(cube, mixed(3), k), Partitioner::Metis);
            }
            let (mesh, problem) = plate();
            compare(&world, direct(mesh, problem, 2), Partitioner::Metis);
            let mesh = square(10);
            let p = random(mesh.n_cells(), np);
            compare(&world, direct(mesh, mixed(2), 2), Partitioner::Given(p));
            let mesh = square(10);
            let p = last_empty(mesh.n_cells(), np);
            compare(&world, direct(mesh, mixed(2), 2), Partitioner::Given(p));
            let single = direct(square(8), mixed(2), 2).precision(hdg::Precision::F32);
            compare_single(&world, single);
            // A singular operator (pure Neumann) is refused as on one process, on every rank.
            let neumann = direct(square(8), pure_neumann(2), 2);
            let alone = neumann.run(&mut Silent).unwrap_err().to_string();
            let error = neumann.run_distributed(&world, &mut Silent).unwrap_err().to_string();
            assert!(
                alone.contains("null space") && error.contains("null space"),
                "{alone} / {error}"
            );
        }
        "mixed" => {
            // Mixed-precision refinement over the ranks (f64 residuals, f32 inner solves on
            // each rank's rows rounded) against the one-process refinement. Its iterations are
            // the inner f32 solves' (hundreds with Jacobi), whose roundings differ with the
            // order of the sums over the ranks: within 5% of the one process's.
            let refined = |mesh: Mesh, problem: Problem, k: usize| {
                Solver::new(Arc::new(mesh), problem).order(k).solver(SolverChoice::Mixed)
            };
            let compare_refined = |solver: Solver, partitioner: Partitioner| {
                let extra = solver.run(&mut Silent).unwrap().report.solve.iterations / 20;
                compare_iterations(&world, &solver, &solver, partitioner, 0.0, extra)
            };
            for k in 1..=3 {
                compare_refined(refined(square(8), mixed(2), k), Partitioner::Metis);
            }
            let cube = hdg::generate::unit_cube(3).unwrap();
            compare_refined(refined(cube, mixed(3), 2), Partitioner::Metis);
            let (mesh, problem) = plate();
            compare_refined(refined(mesh, problem, 2), Partitioner::Metis);
            let mesh = square(10);
            let p = last_empty(mesh.n_cells(), np);
            compare_refined(refined(mesh, mixed(2), 2), Partitioner::Given(p));
            // In f32 there is nothing to refine: refused as on one process.
            let single = refined(square(8), mixed(2), 2).precision(hdg::Precision::F32);
            let alone = single.run(&mut Silent).unwrap_err().to_string();
            let error = single.run_distributed(&world, &mut Silent).unwrap_err().to_string();
            assert!(alone.contains("f64") && error.contains("f64"), "{alone} / {error}");
        }
        "random" => {
            let mesh = square(10);
            let p = random(mesh.n_cells(), np);
            compare(&world, block_jacobi(mesh, mixed(2), 2), Partitioner::Given(p));
        }
        "empty-rank" => {
            let mesh = square(10);
            let p = last_empty(mesh.n_cells(), np);
            compare(&world, block_jacobi(mesh, mixed(2), 2), Partitioner::Given(p));
        }
        "failure" => {
            // kappa is NaN right of x = 0.8: only the ranks with such cells see it.
            let problem = Problem::builder()
                .kappa(|x: &[f64]| if x[0] > 0.8 { f64::NAN } else { 1.0 })
                .source(|_| 1.0)
                .build();
            let solver = block_jacobi(square(12), problem, 2);
            let error = solver.run_distributed(&world, &mut Silent).unwrap_err().to_string();
            assert!(error.contains("invalid kappa"), "{error}");
            if np > 1 {
                assert!(error.starts_with("rank "), "{error}");
            }
            // Every rank returns the same error.
            let mut lengths = vec![0u64; np];
            use distributed::mpi::traits::*;
            world.all_gather_into(&(error.len() as u64), &mut lengths[..]);
            assert!(lengths.iter().all(|&l| l == error.len() as u64), "{lengths:?}: {error}");
        }
        "pvtu" => {
            let scratch = PathBuf::from(std::env::var("HDG_MPI_SCRATCH").unwrap());
            let solver = block_jacobi(square(10), mixed(2), 2);
            check_pvtu(&world, &solver, Partitioner::Metis, &scratch.join("metis.vtu"));
            // The last rank owns no cells: it writes no piece and is not listed.
            let p = last_empty(solver.mesh().n_cells(), np);
            check_pvtu(&world, &solver, Partitioner::Given(p), &scratch.join("empty.pvtu"));
            let (mesh, problem) = plate();
            let solver = block_jacobi(mesh, problem, 1);
            check_pvtu(&world, &solver, Partitioner::Metis, &scratch.join("plate.pvtu"));
        }
        "evaluate" => {
            let solver = block_jacobi(square(10), mixed(2), 2);
            let blocks = Partition::blocks(solver.mesh().n_cells(), np);
            check_evaluate(&world, &solver, &blocks);
            let cube = block_jacobi(hdg::generate::unit_cube(3).unwrap(), mixed(3), 2);
            let blocks = Partition::blocks(cube.mesh().n_cells(), np);
            check_evaluate(&world, &cube, &blocks);
        }
        #[cfg(feature = "cuda")]
        "cuda" => {
            // CUDA ranks (one GPU each, shared when there are fewer) against the one-process
            // CPU run: pcg-mg on triangles and tetrahedra, k = 1..3, block Jacobi on the plate.
            let on_cuda = |s: Solver| s.backend(hdg::Backend::Cuda);
            for k in 1..=3 {
                let cpu = Solver::new(Arc::new(square(16)), mixed(2)).order(k);
                compare_runs(&world, &cpu, &on_cuda(cpu.clone()), Partitioner::Metis, MG_SLACK);
                let cube = hdg::generate::unit_cube(4).unwrap();
                let cpu = Solver::new(Arc::new(cube), mixed(3)).order(k);
                compare_runs(&world, &cpu, &on_cuda(cpu.clone()), Partitioner::Metis, MG_SLACK);
            }
            let (mesh, problem) = plate();
            let cpu = block_jacobi(mesh, problem, 2);
            compare_runs(&world, &cpu, &on_cuda(cpu.clone()), Partitioner::Metis, 0.0);
            let mesh = square(12);
            let p = random(mesh.n_cells(), np);
            let cpu = Solver::new(Arc::new(mesh), mixed(2)).order(2);
            compare_runs(&world, &cpu, &on_cuda(cpu.clone()), Partitioner::Given(p), MG_SLACK);
            // A vertex level distributed by vertex ownership (not the last level).
            let cpu = Solver::new(Arc::new(square(40)), mixed(2)).order(2);
            compare_runs(&world, &cpu, &on_cuda(cpu.clone()), Partitioner::Metis, MG_SLACK);
            let cube = hdg::generate::unit_cube(8).unwrap();
            let cpu = Solver::new(Arc::new(cube), mixed(3)).order(2);
            compare_runs(&world, &cpu, &on_cuda(cpu.clone()), Partitioner::Metis, MG_SLACK);
            // Pure Neumann with mean zero (the cycle in f64, the constants projected out).
            let cpu = Solver::new(Arc::new(square(40)), pure_neumann(2)).order(2);
            compare_runs(&world, &cpu, &on_cuda(cpu.clone()), Partitioner::Metis, MG_SLACK);
            // The factorisation of the device ranks' rows gathered on rank 0, and refinement
            // over the ranks with each rank's rows rounded to f32 on its device.
            for choice in [SolverChoice::Direct, SolverChoice::Mixed] {
                let cpu = Solver::new(Arc::new(square(12)), mixed(2)).order(2).solver(choice);
                let serial = cpu.run(&mut Silent).unwrap().report.solve.iterations;
                let cuda = on_cuda(cpu.clone());
                compare_iterations(&world, &cpu, &cuda, Partitioner::Metis, 0.0, serial / 20);
                let cube = hdg::generate::unit_cube(3).unwrap();
                let cpu = Solver::new(Arc::new(cube), mixed(3)).order(2).solver(choice);
                let serial = cpu.run(&mut Silent).unwrap().report.solve.iterations;
                let cuda = on_cuda(cpu.clone());
                compare_iterations(&world, &cpu, &cuda, Partitioner::Metis, 0.0, serial / 20);
            }
        }
        other => panic!("unknown case {other}"),
    }
    println!("case {case} passed on {np} ranks");
}

macro_rules! cases {
    ($($name:ident: $case:literal on $($np:literal),+;)+) => {$(
        #[test]
        #[ignore = "needs MPI (mpirun): .ci/run runs it"]
        fn $name() {
            for np in [$($np),+] {
                mpirun($case, np);
            }
        }
    )+};
}

cases! {
    square_triangles_k1_to_3: "square" on 1, 2, 3, 4;
    cube_tetrahedra_k1_to_3: "cube" on 1, 2, 3, 4;
    plate_with_regions_neumann_robin: "plate" on 1, 2, 3, 4;
    random_partition: "random" on 2, 3, 4;
    direct_factorisation_on_rank_0: "direct" on 1, 2, 3, 4;
    mixed_precision_refinement: "mixed" on 1, 2, 3, 4;
    every_distributed_solver_and_f32: "solvers" on 3;
    multigrid_square_k1_to_3: "square-mg" on 1, 2, 3, 4;
    multigrid_cube_k1_to_3: "cube-mg" on 1, 2, 3, 4;
    multigrid_plate_with_regions: "plate-mg" on 2, 3;
    multigrid_random_partition: "random-mg" on 2, 4;
    pure_neumann_with_mean_zero: "neumann" on 1, 2, 3, 4;
    multigrid_distributed_vertex_level: "vertex-mg" on 1, 2, 3, 4;
    a_rank_without_cells: "empty-rank" on 2, 3;
    a_failing_rank_fails_every_rank: "failure" on 1, 2, 3, 4;
    pvtu_pieces_hold_the_one_process_file_cell_by_cell: "pvtu" on 1, 3;
    the_owning_rank_evaluates_and_every_rank_returns_its_value: "evaluate" on 1, 2, 3;
}

/// CUDA ranks: only in a build with `cuda`, and only where a device is (the device machine:
/// scripts/gpu-run.sh runs it).
#[cfg(feature = "cuda")]
#[test]
#[ignore = "needs MPI and CUDA devices (scripts/gpu-run.sh)"]
fn cuda_ranks_agree_with_the_cpu() {
    for np in [1, 2, 3, 4] {
        mpirun("cuda", np);
    }
}

/// A VTK XML file's data arrays as roxmltree and base64 read them (another XML parser and
/// base64 decoder than the writer's, as in tests/vtu.rs): by section (`PointData`, `CellData`,
/// `Points`, `Cells`) and name, the type, the components and the values.
type Arrays = BTreeMap<(String, String), (String, usize, Vec<f64>)>;

fn read_vtu(path: &Path) -> Arrays {
    use base64::Engine;
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let document = roxmltree::Document::parse(&text).expect("well-formed XML");
    let root = document.root_element();
    assert_eq!(root.attribute("type"), Some("UnstructuredGrid"), "{path:?}");
    assert_eq!(root.attribute("header_type"), Some("UInt64"));
    let mut arrays = Arrays::new();
    for array in root.descendants().filter(|n| n.has_tag_name("DataArray")) {
        let text: String = array.text().unwrap_or("").split_whitespace().collect();
        let bytes = base64::engine::general_purpose::STANDARD.decode(text).expect("base64");
        let size = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let data = &bytes[8..];
        assert_eq!(data.len(), size, "the header gives the byte count");
        let kind = array.attribute("type").unwrap().to_string();
        let values: Vec<f64> = match kind.as_str() {
            "Float64" => {
                data.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().unwrap())).collect()
            }
            "Int64" => data
                .chunks_exact(8)
                .map(|b| i64::from_le_bytes(b.try_into().unwrap()) as f64)
                .collect(),
            "UInt32" => data
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes(b.try_into().unwrap()) as f64)
                .collect(),
            "UInt8" => data.iter().map(|&b| b as f64).collect(),
            other => panic!("unexpected data type {other}"),
        };
        let components = array.attribute("NumberOfComponents").map_or(1, |c| c.parse().unwrap());
        let section = array.parent_element().unwrap().tag_name().name().to_string();
        let name = array.attribute("Name").unwrap_or("").to_string();
        arrays.insert((section, name), (kind, components, values));
    }
    arrays
}

/// A `.pvtu`'s declarations, by section (`PPointData`, `PCellData`, `PPoints`) and name: the
/// type and the components.
type Declarations = BTreeMap<(String, String), (String, usize)>;

/// A `.pvtu`'s declarations and its pieces' sources.
fn read_pvtu(path: &Path) -> (Declarations, Vec<String>) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let document = roxmltree::Document::parse(&text).expect("well-formed XML");
    let root = document.root_element();
    assert_eq!(root.attribute("type"), Some("PUnstructuredGrid"));
    let grid = root.first_element_child().unwrap();
    assert_eq!(grid.tag_name().name(), "PUnstructuredGrid");
    let mut declared = BTreeMap::new();
    for array in grid.descendants().filter(|n| n.has_tag_name("PDataArray")) {
        let section = array.parent_element().unwrap().tag_name().name().to_string();
        let name = array.attribute("Name").unwrap_or("").to_string();
        let components = array.attribute("NumberOfComponents").unwrap().parse().unwrap();
        declared.insert((section, name), (array.attribute("type").unwrap().into(), components));
    }
    let sources = grid
        .children()
        .filter(|n| n.has_tag_name("Piece"))
        .map(|n| n.attribute("Source").unwrap().to_string())
        .collect();
    (declared, sources)
}

/// Per VTK cell of a file: its points' values of `array` (point data, or the points).
fn cell_points<'a>(file: &'a Arrays, cell: usize, array: (&str, &str)) -> Vec<&'a [f64]> {
    let key = |s: &str, n: &str| (s.to_string(), n.to_string());
    let offsets = &file[&key("Cells", "offsets")].2;
    let connectivity = &file[&key("Cells", "connectivity")].2;
    let (_, components, values) = &file[&key(array.0, array.1)];
    let start = if cell == 0 { 0 } else { offsets[cell - 1] as usize };
    connectivity[start..offsets[cell] as usize]
        .iter()
        .map(|&p| &values[p as usize * components..(p as usize + 1) * components])
        .collect()
}

/// The distributed `.pvtu` of `solver`'s run against the one-process `hdg::vtu::write` file,
/// read back on rank 0: the declarations are the pieces' arrays (the serial file's and `rank`),
/// every cell of the mesh is in exactly one piece, of the rank that owns it, with the serial
/// file's points, u_h, q_h, u* and cell data; the boundary faces are the serial file's.
fn check_pvtu(
    world: &distributed::Communicator,
    solver: &Solver,
    partitioner: Partitioner,
    path: &Path,
) {
    let serial = solver.run(&mut Silent).unwrap().solution.unwrap();
    let run = solver.run_distributed_with(world, &partitioner, &mut Silent).unwrap();
    let n_cells = solver.mesh().n_cells();
    // Regions by global cell, so that a piece's must follow its cells' global numbers.
    let regions: Vec<u32> = (0..n_cells).map(|c| (c % 7) as u32 + 1).collect();
    let options = hdg::vtu::Options { regions: Some(regions), ..Default::default() };
    distributed::output::write_vtu(world, &run, path, &options).unwrap();
    if distributed::rank(world) != 0 {
        return;
    }
    let one = path.with_file_name("one-process.vtu");
    hdg::vtu::write(&serial, &one, &options).unwrap();
    let whole = read_vtu(&one);
    let key = |s: &str, n: &str| (s.to_string(), n.to_string());

    let pvtu = distributed::output::pvtu_path(path).unwrap();
    let (declared, sources) = read_pvtu(&pvtu);
    let with_cells: Vec<usize> =
        run.report.ranks.iter().filter(|r| r.owned_cells > 0).map(|r| r.rank).collect();
    assert_eq!(sources.len(), with_cells.len(), "{sources:?}");
    let mut expected: Declarations = whole
        .iter()
        .filter(|((section, _), _)| section != "Cells")
        .map(|((section, name), (kind, components, _))| {
            ((format!("P{section}"), name.clone()), (kind.clone(), *components))
        })
        .collect();
    expected.insert(key("PCellData", "rank"), ("UInt32".into(), 1));
    assert_eq!(declared, expected);

    // The one-process file's volume cells are the mesh's, in order; then its boundary faces.
    let boundary = |file: &Arrays| -> Vec<(usize, usize)> {
        let tags = &file[&key("CellData", "boundary_tag")].2;
        let cells = &file[&key("CellData", "cell")].2;
        let mut faces: Vec<(usize, usize)> = (0..tags.len())
            .filter(|&i| tags[i] > 0.0)
            .map(|i| (cells[i] as usize, tags[i] as usize))
            .collect();
        faces.sort_unstable();
        faces
    };
    let mut pieces_boundary = Vec::new();
    let mut seen = vec![0usize; n_cells];
    let scale = whole[&key("PointData", "u_h")].2.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let mut worst = 0.0f64;
    for (source, &rank) in sources.iter().zip(&with_cells) {
        assert!(source.ends_with(&format!("_{rank}.vtu")), "{source}");
        let piece = read_vtu(&pvtu.parent().unwrap().join(source));
        for ((section, name), (kind, components, _)) in &piece {
            if section != "Cells" {
                let declared = &declared[&(format!("P{section}"), name.clone())];
                assert_eq!(declared, &(kind.clone(), *components), "{source}: {name}");
            }
        }
        let tags = &piece[&key("CellData", "boundary_tag")].2;
        let cells = &piece[&key("CellData", "cell")].2;
        let ranks = &piece[&key("CellData", "rank")].2;
        for i in (0..tags.len()).filter(|&i| tags[i] == 0.0) {
            let g = cells[i] as usize;
            seen[g] += 1;
            assert_eq!(ranks[i] as usize, rank);
            // The cell data: region, per-cell errors (to the solve's agreement, as u_h).
            for ((section, name), (_, _, values)) in &whole {
                if section != "CellData" || name == "cell" || name == "boundary_tag" {
                    continue;
                }
                let (mine, theirs) = (piece[&key("CellData", name)].2[i], values[g]);
                let tolerance = 1e-8 * theirs.abs() + 1e-9 * scale;
                assert!(
                    (mine - theirs).abs() <= tolerance,
                    "{name} of cell {g}: {mine:e} vs {theirs:e}"
                );
            }
            for array in [
                ("Points", ""),
                ("PointData", "u_h"),
                ("PointData", "q_h"),
                ("PointData", "u_star"),
            ] {
                let (mine, theirs) = (cell_points(&piece, i, array), cell_points(&whole, g, array));
                assert_eq!(mine.len(), theirs.len());
                for (a, b) in mine.iter().zip(&theirs) {
                    for (x, y) in a.iter().zip(b.iter()) {
                        worst = worst.max((x - y).abs() / scale);
                    }
                }
            }
        }
        pieces_boundary.extend(boundary(&piece));
    }
    assert!(seen.iter().all(|&n| n == 1), "cells not in exactly one piece: {seen:?}");
    pieces_boundary.sort_unstable();
    assert_eq!(pieces_boundary, boundary(&whole), "boundary faces (cell, tag)");
    assert!(worst <= 1e-9, "the pieces' values differ from the one-process file's by {worst:e}");
    println!(
        "{}: {} pieces, {n_cells} cells, values within {worst:.1e} of the one-process file",
        pvtu.display(),
        sources.len()
    );
}

/// Barycentric coordinates of `x` in cell `c` (Cramer's rule).
fn barycentric(mesh: &Mesh, c: usize, x: &[f64]) -> Vec<f64> {
    let d = mesh.dim();
    let v = mesh.cell_vertices(c);
    let p = |i: usize| mesh.vertex(v[i]);
    let mut columns: Vec<Vec<f64>> =
        (1..=d).map(|s| (0..d).map(|r| p(s)[r] - p(0)[r]).collect()).collect();
    let rhs: Vec<f64> = (0..d).map(|r| x[r] - p(0)[r]).collect();
    let det = |m: &[Vec<f64>]| match d {
        2 => m[0][0] * m[1][1] - m[0][1] * m[1][0],
        _ => {
            m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
                - m[1][0] * (m[0][1] * m[2][2] - m[0][2] * m[2][1])
                + m[2][0] * (m[0][1] * m[1][2] - m[0][2] * m[1][1])
        }
    };
    let whole = det(&columns);
    let mut lambda = vec![0.0; d + 1];
    for s in 0..d {
        let kept = std::mem::replace(&mut columns[s], rhs.clone());
        lambda[s + 1] = det(&columns) / whole;
        columns[s] = kept;
    }
    lambda[0] = 1.0 - lambda[1..].iter().sum::<f64>();
    lambda
}

/// `hdg::distributed::output::evaluate` against the one-process solution: inside points, a
/// point outside (None), points on faces and at vertices between ranks (the lowest rank owning
/// a cell that holds the point answers, with that cell's values), a malformed point (an error
/// on every rank).
fn check_evaluate(world: &distributed::Communicator, solver: &Solver, partition: &Partition) {
    let serial = solver.run(&mut Silent).unwrap().solution.unwrap();
    let partitioner = Partitioner::Given(partition.clone());
    let run = solver.run_distributed_with(world, &partitioner, &mut Silent).unwrap();
    let mesh = solver.mesh();
    let d = mesh.dim();
    let parts = partition.parts();

    let mut points: Vec<Vec<f64>> = vec![
        vec![0.31; d],
        (0..d).map(|r| 0.17 + 0.29 * r as f64).collect(),
        (0..d).map(|r| 0.93 - 0.41 * r as f64).collect(),
    ];
    // Between ranks: the midpoint of a face whose cells two ranks own, and its first vertex.
    let interface = (0..mesh.n_faces()).find(|&f| {
        let [a, b] = mesh.face_cells(f);
        !mesh.is_boundary_face(f) && parts[a] != parts[b]
    });
    if let Some(f) = interface {
        let corners: Vec<&[f64]> = mesh.face_vertices(f).iter().map(|&v| mesh.vertex(v)).collect();
        let n = corners.len() as f64;
        points.push((0..d).map(|r| corners.iter().map(|p| p[r]).sum::<f64>() / n).collect());
        points.push(corners[0].to_vec());
    }
    // A run that does not keep its solution: the same error norms, no fields, and the outputs
    // that need them refused on every rank.
    let bare = solver.clone().keep_solution(false);
    let bare = bare.run_distributed_with(world, &partitioner, &mut Silent).unwrap();
    assert!(bare.solution.is_none());
    assert_eq!(bare.report.report.errors, run.report.report.errors);
    let refused = distributed::output::evaluate(world, &bare, &points[0]).unwrap_err();
    assert!(refused.to_string().contains("did not keep its solution"), "{refused}");
    for x in &points {
        let value = distributed::output::evaluate(world, &run, x).unwrap().expect("inside");
        // The cells that hold x, and the lowest rank that owns one.
        let holding: Vec<usize> = (0..mesh.n_cells())
            .filter(|&c| barycentric(mesh, c, x).iter().all(|&l| l >= -1e-10))
            .collect();
        let lowest = holding.iter().map(|&c| parts[c]).min().unwrap();
        assert!(holding.contains(&value.cell), "{x:?}: cell {} of {holding:?}", value.cell);
        assert_eq!(parts[value.cell], lowest, "{x:?}: answered by another rank than the lowest");
        let lambda = barycentric(mesh, value.cell, x);
        let xi: Vec<f64> = (0..d).map(|s| 2.0 * lambda[s + 1] - 1.0).collect();
        let expected = serial.evaluate_in_cell(value.cell, &xi);
        if holding.len() == 1 {
            assert_eq!(serial.evaluate(x).unwrap().unwrap().cell, value.cell);
        }
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
        assert!(
            close(value.u, expected.u)
                && close(value.u_star, expected.u_star)
                && (0..3).all(|r| close(value.q[r], expected.q[r])),
            "{x:?}: {value:?} vs {expected:?}"
        );
    }
    let outside = vec![1.5; d];
    assert_eq!(distributed::output::evaluate(world, &run, &outside).unwrap(), None);
    assert!(serial.evaluate(&outside).unwrap().is_none());
    let malformed = vec![0.5; d + 1];
    let error = distributed::output::evaluate(world, &run, &malformed).unwrap_err().to_string();
    assert!(error.contains("coordinates") || error.contains("dimension"), "{error}");
    println!("{} points evaluated on rank {}", points.len() + 2, distributed::rank(world));
}
