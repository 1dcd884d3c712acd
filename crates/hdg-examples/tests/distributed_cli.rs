//! The `hdg` program under mpirun (feature `distributed`): `hdg solve` and `hdg run` over 2 and 3
//! ranks against the same program on one process (started without mpirun, it runs as the
//! build without MPI): the same errors, one summary or JSON object (rank 0's) with the
//! partition, the `.pvtu` and its pieces, and refusals said once. They need MPI, so they are
//! ignored by default: `.ci/run` runs them
//! (`cargo test --release -p hdg-examples --features distributed --test distributed_cli --
//! --ignored`).
#![cfg(feature = "distributed")]

use std::path::{Path, PathBuf};
use std::process::Command;

const HDG: &str = env!("CARGO_BIN_EXE_hdg");

/// Runs `hdg args` on one process: (status, stdout, stderr).
fn one_process(args: &[&str]) -> (i32, String, String) {
    output(Command::new(HDG).args(args))
}

/// Runs `hdg args` under `mpirun -np np` (oversubscribed, one thread per rank).
fn mpirun(np: usize, args: &[&str]) -> (i32, String, String) {
    output(
        Command::new("mpirun")
            .args(["-np", &np.to_string(), "--oversubscribe", HDG])
            .args(args)
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .env("RAYON_NUM_THREADS", "1"),
    )
}

fn output(command: &mut Command) -> (i32, String, String) {
    let out = command.output().expect("runs (mpirun on the PATH)");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A fresh folder for a test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hdg-mpi-cli-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("one JSON object ({e}): {text}"))
}

/// The error norms of two JSON reports agree to 1e-10 relative.
fn assert_same_errors(a: &serde_json::Value, b: &serde_json::Value) {
    for key in ["u", "q", "u_star"] {
        let (x, y) = (a["errors"][key].as_f64().unwrap(), b["errors"][key].as_f64().unwrap());
        assert!((x - y).abs() <= 1e-10 * y.abs(), "{key}: {x:e} over MPI, {y:e} on one process");
    }
}

/// The ranks of a JSON report: `count` entries whose owned cells sum to the mesh's.
fn assert_ranks(report: &serde_json::Value, count: usize) {
    let ranks = report["ranks"].as_array().expect("ranks");
    assert_eq!(ranks.len(), count, "{report}");
    let owned: u64 = ranks.iter().map(|r| r["owned_cells"].as_u64().unwrap()).sum();
    assert_eq!(owned, report["cells"].as_u64().unwrap());
    for (i, r) in ranks.iter().enumerate() {
        assert_eq!(r["rank"].as_u64(), Some(i as u64));
        assert!(r["timings_s"]["total"].as_f64().unwrap() > 0.0, "{r}");
    }
    assert!(report["edge_cut"].as_u64().unwrap() > 0, "{report}");
}

/// The pieces a `.pvtu` lists, each of which exists.
fn pieces(pvtu: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(pvtu).unwrap_or_else(|e| panic!("{pvtu:?}: {e}"));
    let sources: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("<Piece Source=\"")?.strip_suffix("\"/>"))
        .map(str::to_string)
        .collect();
    for source in &sources {
        assert!(pvtu.parent().unwrap().join(source).is_file(), "{source}");
    }
    sources
}

#[test]
#[ignore = "needs MPI (mpirun): .ci/run runs it"]
fn solve_over_two_ranks_matches_one_process() {
    let args =
        ["solve", "--mesh", "square:16", "--order", "2", "--solver", "pcg-block-jacobi", "--json"];
    let (code, out, err) = one_process(&args);
    assert_eq!(code, 0, "{err}");
    let alone = json(&out);
    assert!(alone.get("ranks").is_none(), "{alone}");
    let (code, out, err) = mpirun(2, &args);
    assert_eq!(code, 0, "{out}{err}");
    let over_mpi = json(&out);
    assert_same_errors(&over_mpi, &alone);
    assert_eq!(over_mpi["cells"], 512);
    assert_eq!(over_mpi["trace_dofs"], alone["trace_dofs"]);
    assert_eq!(over_mpi["partitioner"], "metis");
    assert_ranks(&over_mpi, 2);

    // The summary (rank 0's alone) with the partition, and the .pvtu with a piece per rank.
    let dir = scratch("solve");
    let vtu = dir.join("square.vtu");
    let text_args = [&args[..args.len() - 1], &["--partition", "blocks"]].concat();
    let with_output = [&text_args[..], &["--output", vtu.to_str().unwrap()]].concat();
    let (code, out, err) = mpirun(2, &with_output);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out.matches("hdg solve: square:16, order 2").count(), 1, "{out}");
    assert!(out.contains("partition      blocks, 2 MPI ranks, edge cut"), "{out}");
    assert!(out.contains("owned cells") && out.contains("halo values"), "{out}");
    // Each rank's line ends with its seven stage times (setup .. postprocess, total).
    assert!(out.contains("stage times [s]: setup condense assemble solve"), "{out}");
    for rank in ["0", "1"] {
        let line = out.lines().find(|l| l.split_whitespace().next() == Some(rank)).unwrap();
        let times: Vec<f64> =
            line.split_whitespace().rev().take(7).map(|t| t.parse().unwrap()).collect();
        assert!(times.iter().all(|&t| t >= 0.0) && times[0] >= times[1], "{line}");
    }
    assert!(out.contains("L2 errors"), "{out}");
    assert!(out.contains("square.pvtu"), "{out}");
    assert_eq!(pieces(&dir.join("square.pvtu")), ["square/square_0.vtu", "square/square_1.vtu"]);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
#[ignore = "needs MPI (mpirun): .ci/run runs it"]
fn direct_and_mixed_solvers_over_three_ranks_match_one_process() {
    // The factorisation gathers the whole matrix on rank 0; mixed precision refines over the
    // ranks. Both reach the one-process run's errors.
    for solver in ["direct", "mixed"] {
        let args = ["solve", "--mesh", "square:12", "--order", "3", "--solver", solver, "--json"];
        let (code, out, err) = one_process(&args);
        assert_eq!(code, 0, "{solver}: {err}");
        let alone = json(&out);
        let (code, out, err) = mpirun(3, &args);
        assert_eq!(code, 0, "{solver}: {out}{err}");
        let over_mpi = json(&out);
        assert_same_errors(&over_mpi, &alone);
        assert_eq!(over_mpi["solver"], alone["solver"], "{over_mpi}");
        assert_ranks(&over_mpi, 3);
    }
}

#[test]
#[ignore = "needs MPI (mpirun): .ci/run runs it"]
fn refusals_under_mpirun_are_said_once_and_every_rank_fails() {
    let base = ["solve", "--mesh", "square:4", "--order", "1"];
    let cases: [(&[&str], &str); 4] = [
        (&["--solver", "cg", "--plot", "u.png"], "--plot draws the whole solution"),
        (&["--solver", "cg", "--export-matrix", "a.mtx"], "--export-matrix"),
        // This build has no CUDA backend: refused once, on every rank alike.
        (&["--solver", "cg", "--backend", "cuda"], "no CUDA support"),
        (&["--solver", "cg", "--operator", "matrix-free"], "matrix-free"),
    ];
    for (extra, needle) in cases {
        let (code, out, err) = mpirun(2, &[&base[..], extra].concat());
        assert_ne!(code, 0, "{extra:?}: {out}{err}");
        let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("hdg: error:")).collect();
        assert_eq!(errors.len(), 1, "{extra:?}: {err}");
        assert!(errors[0].contains(needle), "{extra:?}: {err}");
        assert!(out.is_empty(), "{extra:?}: {out}");
    }
    let (code, _, err) = mpirun(2, &["convergence", "--order", "1", "--levels", "2"]);
    assert_ne!(code, 0);
    assert_eq!(err.matches("hdg: error:").count(), 1, "{err}");
    assert!(err.contains("runs on one process"), "{err}");
    // Without mpirun, --partition has nothing to split.
    let (code, _, err) = one_process(&[&base[..], &["--partition", "blocks"]].concat());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("mpirun"), "{err}");
}

#[test]
#[ignore = "needs MPI (mpirun): .ci/run runs it"]
fn problem_files_run_over_three_ranks() {
    let problems = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/problems");
    let dir = scratch("run");
    let set = |key: &str, value: &Path| format!("{key}=\"{}\"", value.display());

    // The plate with a hole, as the README runs it: the JSON report and the .pvtu.
    let plate = problems.join("plate-with-hole.toml");
    let args = [
        "run".to_string(),
        plate.display().to_string(),
        "--set".into(),
        "solver.method=pcg-block-jacobi".into(),
        "--set".into(),
        set("output.json", &dir.join("plate.json")),
        "--set".into(),
        set("output.vtu", &dir.join("plate.vtu")),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = mpirun(3, &args);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out.matches("hdg run: ").count(), 1, "{out}");
    assert!(out.contains("partition      metis, 3 MPI ranks"), "{out}");
    let report = json(&std::fs::read_to_string(dir.join("plate.json")).unwrap());
    assert_ranks(&report, 3);
    assert_eq!(report["title"], "plate with a hole, two materials");
    assert_eq!(pieces(&dir.join("plate.pvtu")).len(), 3);

    // A problem with an exact solution: the errors of one process.
    let square = problems.join("square-variable-kappa.toml");
    let args = [
        "run",
        square.to_str().unwrap(),
        "--set",
        "solver.method=pcg-block-jacobi",
        "--order",
        "2",
        "--json",
    ];
    let (code, out, err) = one_process(&args);
    assert_eq!(code, 0, "{err}");
    let alone = json(&out);
    let (code, out, err) = mpirun(3, &args);
    assert_eq!(code, 0, "{out}{err}");
    let over_mpi = json(&out);
    assert_same_errors(&over_mpi, &alone);
    assert_ranks(&over_mpi, 3);

    // A picture needs the whole solution: refused before the solve, once.
    let png = [&args[..], &["--set", "output.png=\"u.png\""]].concat();
    let (code, _, err) = mpirun(3, &png);
    assert_ne!(code, 0);
    assert_eq!(err.matches("hdg: error:").count(), 1, "{err}");
    assert!(err.contains("png of [output]"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
