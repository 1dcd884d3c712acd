//! Distributed runs against the one-process run of the same problem: each case runs under
//! `mpirun -np N` (N = 1..4, oversubscribed) as this test binary's `worker` test, on every rank
//! solving the whole problem in-process too and comparing its own cells and faces with it.
//! They need MPI, so they are ignored by default: `.ci/run` installs OpenMPI and runs them
//! (`cargo test --release -p hdg --features distributed --test distributed -- --ignored`).
#![cfg(feature = "distributed")]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdg::distributed::{self, Partitioner};
use hdg::mesh::{Diagonal, Partition};
use hdg::{gmsh, Coefficient, Manufactured, Mesh, Problem, Silent, Solver, SolverChoice};

/// How long one mpirun may take before the test calls it hung.
const TIMEOUT: Duration = Duration::from_secs(240);

/// Runs `case` on `np` ranks; panics with the ranks' output if mpirun fails or hangs.
fn mpirun(case: &str, np: usize) {
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new("mpirun")
        .args(["-np", &np.to_string(), "--oversubscribe"])
        .arg(&exe)
        .args(["--exact", "worker", "--ignored", "--nocapture", "--test-threads=1"])
        .env("HDG_MPI_CASE", case)
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
    let file =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/meshes/plate-with-hole-1.msh");
    let read = gmsh::read(&file).unwrap();
    let (outer, hole) =
        (read.groups.boundary_tag("outer").unwrap(), read.groups.boundary_tag("hole").unwrap());
    let (plate, ring) = (read.groups.region("plate").unwrap(), read.groups.region("ring").unwrap());
    let kappa = Coefficient::per_region(
        "kappa",
        &read.cell_regions,
        &BTreeMap::from([(plate, 1.0), (ring, 10.0)]),
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
    let serial = solver.run(&mut Silent).unwrap();
    let serial_solution = serial.solution.unwrap();
    let run = solver.run_distributed_with(world, &partitioner, &mut Silent).unwrap();
    let (report, part) = (&run.report.report, &run.part);
    assert!(report.solve.converged, "{:?}", report.solve);
    assert_eq!(report.cells, serial.report.cells);
    assert_eq!(report.trace_dofs, serial.report.trace_dofs);
    assert!(
        report.solve.iterations <= serial.report.solve.iterations + 2,
        "{} iterations distributed, {} in one process",
        report.solve.iterations,
        serial.report.solve.iterations
    );
    if let (Some(d), Some(s)) = (report.errors, serial.report.errors) {
        for (name, d, s) in [("u", d.u, s.u), ("q", d.q, s.q), ("u*", d.u_star, s.u_star)] {
            if d.is_nan() && s.is_nan() {
                continue; // an exact solution without gradient: no q error
            }
            assert!((d - s).abs() <= 1e-10 * s.abs().max(1e-300), "{name}: {d:e} vs {s:e}");
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
    a_rank_without_cells: "empty-rank" on 2, 3;
    a_failing_rank_fails_every_rank: "failure" on 1, 2, 3, 4;
}
