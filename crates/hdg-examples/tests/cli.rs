//! The `hdg` program: a real solve prints a summary and stable JSON; bad arguments give a
//! one-line error and a non-zero exit code.
use std::process::Command;

fn hdg(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hdg")).args(args).output().expect("runs hdg");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_rejected(args: &[&str], needle: &str) {
    let (code, _, err) = hdg(args);
    assert_ne!(code, 0, "{args:?} should fail");
    assert!(err.to_lowercase().contains(&needle.to_lowercase()), "{args:?}: stderr was {err}");
    let lines: Vec<_> = err.lines().filter(|l| l.contains("error")).collect();
    assert!(!lines.is_empty(), "{args:?}: no error line in {err}");
}

#[test]
fn solve_prints_a_summary() {
    let (code, out, err) = hdg(&["solve", "--mesh", "square:8", "--order", "2"]);
    assert_eq!(code, 0, "{err}");
    for needle in ["cells", "trace dofs", "iterations", "L2 errors", "total"] {
        assert!(out.contains(needle), "missing {needle} in {out}");
    }
}

#[test]
fn solve_json_has_the_stable_keys_and_poly_is_exact() {
    let (code, out, err) =
        hdg(&["solve", "--mesh", "square:4", "--order", "3", "--problem", "poly", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    for key in [
        "cells",
        "trace_dofs",
        "order",
        "backend",
        "precision",
        "iterations",
        "relative_residual",
        "errors",
        "timings_s",
    ] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    for key in ["setup", "condense", "assemble", "solve", "recover", "postprocess", "total"] {
        assert!(v["timings_s"][key].as_f64().is_some(), "missing timing {key}");
    }
    assert_eq!(v["cells"], 32);
    // 4 x 4 squares: 3*16 + 8 = 56 edges, 16 on the boundary: 40 free faces x 4 dofs.
    assert_eq!(v["trace_dofs"], 160);
    assert_eq!(v["backend"], "cpu");
    assert_eq!(v["precision"], "f64");
    assert!(v["errors"]["u"].as_f64().unwrap() < 1e-10);
    assert!(v["errors"]["u_star"].as_f64().unwrap() < 1e-10);
}

#[test]
fn f32_runs() {
    let (code, out, err) =
        hdg(&["solve", "--mesh", "square:4", "--order", "2", "--precision", "f32", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["precision"], "f32");
}

#[test]
fn convergence_prints_rates() {
    let (code, out, err) = hdg(&["convergence", "--order", "1", "--levels", "3", "--start", "4"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("rate"), "{out}");
    let (code, out, _) =
        hdg(&["convergence", "--order", "2", "--levels", "3", "--start", "4", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let rate = v[2]["rates"]["u"].as_f64().unwrap();
    assert!((rate - 3.0).abs() < 0.3, "{rate}");
}

#[test]
fn bad_arguments_are_rejected_with_one_line() {
    assert_rejected(&["solve", "--mesh", "square:8", "--order", "0"], "order");
    assert_rejected(&["solve", "--mesh", "square:8", "--order", "11"], "order");
    assert_rejected(&["solve", "--mesh", "square:0", "--order", "2"], "at least 1");
    assert_rejected(&["solve", "--mesh", "disk:4", "--order", "2"], "unknown mesh");
    assert_rejected(&["solve", "--mesh", "square:x", "--order", "2"], "not a positive integer");
    assert_rejected(
        &["solve", "--mesh", "square:4", "--order", "2", "--backend", "gpu"],
        "backend",
    );
    assert_rejected(
        &["solve", "--mesh", "square:4", "--order", "2", "--precision", "f16"],
        "precision",
    );
    assert_rejected(&["solve", "--mesh", "square:4", "--order", "2", "--tol", "2"], "tolerance");
    assert_rejected(
        &["solve", "--mesh", "square:4", "--order", "2", "--perturb", "0.9"],
        "perturb",
    );
}

/// A pure-Neumann problem without c is refused, naming the program's own option for mean(u) = 0.
#[test]
fn pure_neumann_is_refused_naming_the_option() {
    let mesh = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/meshes/plate-with-hole-0.msh");
    let args = ["solve", "--mesh", mesh, "--order", "1", "--neumann", "outer,hole"];
    let (code, _, err) = hdg(&args);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("pure Neumann") && err.contains("--mean-zero"), "{err}");
    assert!(!err.contains("Problem::"), "{err}");
    let (code, _, err) = hdg(&[&args[..], &["--mean-zero"]].concat());
    assert_eq!(code, 0, "{err}");
}

#[cfg(not(feature = "cuda"))]
#[test]
fn cuda_backend_without_cuda_says_so() {
    let (code, _, err) = hdg(&["solve", "--mesh", "square:4", "--order", "2", "--backend", "cuda"]);
    assert_eq!(code, 2);
    assert!(err.contains("no CUDA support"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn the_trace_operator_is_selectable() {
    let base = ["solve", "--mesh", "square:4", "--order", "2"];
    // The default and the explicit DBF operator; the JSON says which one ran.
    let (code, out, err) = hdg(&[&base[..], &["--operator", "dbf", "--json"]].concat());
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(v["operator"], "dbf");
    // Matrix-free exists on the CUDA backend only; unknown names are rejected.
    assert_rejected(&[&base[..], &["--operator", "matrix-free"]].concat(), "CUDA backend only");
    assert_rejected(&[&base[..], &["--operator", "csr"]].concat(), "unknown trace operator");
}

#[test]
fn the_trace_matrix_exports_to_matrix_market() {
    let path = std::env::temp_dir().join(format!("hdg-export-{}.mtx", std::process::id()));
    let p = path.to_str().unwrap();
    let (code, out, err) =
        hdg(&["solve", "--mesh", "square:3", "--order", "2", "--json", "--export-matrix", p]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let dofs = v["trace_dofs"].as_u64().unwrap() as usize;
    let tri = sprs::io::read_matrix_market::<f64, usize, _>(&path).expect("readable Matrix Market");
    std::fs::remove_file(&path).ok();
    let a: sprs::CsMat<f64> = tri.to_csr();
    assert_eq!(a.shape(), (dofs, dofs));
    // 3 x 3 squares: 21 interior edges x 3 dofs; each interior row couples to <= 5 faces.
    assert_eq!(dofs, 21 * 3);
    for (v, (i, j)) in a.iter() {
        let t = a.get(j, i).copied().unwrap_or(0.0);
        assert!(
            (v - t).abs() <= 1e-12 * v.abs().max(1.0),
            "A[{i}][{j}] = {v} but A[{j}][{i}] = {t}"
        );
    }
    // The diagonal of an SPD matrix is positive.
    assert!((0..dofs).all(|i| a.get(i, i).copied().unwrap_or(0.0) > 0.0));
}

#[test]
fn every_solver_is_selectable_and_unknown_ones_are_rejected() {
    for solver in [
        "direct",
        "cg",
        "pcg-block-jacobi",
        "pcg-mg",
        "pipelined-cg",
        "chebyshev",
        "cheb-pcg",
        "cg-chebyshev",
        "gmres",
        "mixed",
    ] {
        let (code, out, err) =
            hdg(&["solve", "--mesh", "square:4", "--order", "2", "--solver", solver, "--json"]);
        assert_eq!(code, 0, "{solver}: {err}");
        let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(v["solver"], solver);
        assert!(v["relative_residual"].as_f64().unwrap() <= 1e-10, "{solver}: {v}");
    }
    assert_rejected(
        &["solve", "--mesh", "square:4", "--order", "2", "--solver", "amg"],
        "invalid value 'amg'",
    );
    assert_rejected(
        &["solve", "--mesh", "square:4", "--order", "2", "--solver", "mixed", "--precision", "f32"],
        "f64",
    );
}

#[test]
fn solvers_prints_a_table_of_every_solver() {
    let (code, out, err) = hdg(&["solvers", "--mesh", "square:6", "--order", "2"]);
    assert_eq!(code, 0, "{err}");
    for name in ["direct", "pcg-jacobi", "pcg-mg", "chebyshev", "gmres", "mixed"] {
        assert!(out.contains(&format!("| {name} |")), "missing {name} in {out}");
    }
    let (code, out, _) =
        hdg(&["solvers", "--mesh", "square:6", "--order", "3", "--only", "cg,direct", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["rows"].as_array().unwrap().len(), 2);
}

#[test]
fn cube_meshes_solve_in_3d() {
    let (code, out, err) = hdg(&[
        "solve",
        "--mesh",
        "cube:2",
        "--order",
        "2",
        "--problem",
        "poly",
        "--solver",
        "direct",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    // 2^3 boxes x 6 tetrahedra; faces (4 * 48 + 12 * 4) / 2 = 120, 48 on the boundary: 72 free
    // faces x 6 dofs (P_2 on a triangle).
    assert_eq!(v["cells"], 48);
    assert_eq!(v["trace_dofs"], 432);
    assert!(v["errors"]["u"].as_f64().unwrap() < 1e-10);
    assert!(v["errors"]["q"].as_f64().unwrap() < 1e-10);
}

#[test]
fn convergence_in_3d_prints_rates() {
    let (code, out, err) =
        hdg(&["convergence", "--dim", "3", "--order", "1", "--levels", "2", "--start", "2"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("unit cube, tetrahedra"), "{out}");
    assert!(out.contains("expected rates: u, q: 2; u*: 3"), "{out}");
    assert_rejected(&["convergence", "--dim", "4", "--order", "1", "--levels", "2"], "4");
}

#[test]
fn solve_reports_memory() {
    let base = ["solve", "--mesh", "square:8", "--order", "2"];
    let (code, out, err) = hdg(&[&base[..], &["--json"]].concat());
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    // Device memory is measured on the CUDA backend only; the host's peak RSS on Linux.
    assert!(v.get("device_memory").is_some_and(|d| d.is_null()), "{v}");
    if cfg!(target_os = "linux") {
        assert!(v["host_peak_rss_bytes"].as_u64().is_some_and(|b| b > 1 << 20), "{v}");
        let (code, out, err) = hdg(&base);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("host memory    peak RSS"), "{out}");
    }
}

/// The CPU runs keep freed memory for reuse (glibc tunables set by running again), unless the
/// user set a malloc tunable or `HDG_MALLOC_TUNABLES=0`.
#[test]
fn cpu_runs_keep_freed_memory_unless_told_otherwise() {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return;
    }
    let tunables = |envs: &[(&str, &str)]| {
        let out = Command::new(env!("CARGO_BIN_EXE_hdg"))
            .args(["solve", "--mesh", "square:4", "--order", "1", "--json"])
            .env_remove("GLIBC_TUNABLES")
            .env_remove("HDG_MALLOC_TUNABLES")
            .envs(envs.iter().copied())
            .output()
            .expect("runs hdg");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
        v["glibc_tunables"].as_str().map(str::to_string)
    };
    let set = tunables(&[]).expect("GLIBC_TUNABLES set for the run");
    assert!(set.contains("glibc.malloc.mmap_max=0"), "{set}");
    assert!(set.contains("glibc.malloc.trim_threshold="), "{set}");
    assert!(!set.contains("hugetlb"), "{set}");
    assert_eq!(tunables(&[("HDG_MALLOC_TUNABLES", "0")]), None);
    let user = "glibc.malloc.hugetlb=0";
    assert_eq!(tunables(&[("GLIBC_TUNABLES", user)]).as_deref(), Some(user));
    // Another tunable is kept, and the CPU's added after it.
    let other = tunables(&[("GLIBC_TUNABLES", "glibc.pthread.rseq=0")]).unwrap();
    assert!(other.starts_with("glibc.pthread.rseq=0:glibc.malloc.mmap_max=0"), "{other}");
}

/// Problems too large for the host are refused with the estimate before anything is allocated
/// (they used to panic with "capacity overflow" or abort in the allocator).
#[test]
fn problems_too_large_for_the_host_are_refused_with_the_estimate() {
    for mesh in ["square:999999999", "square:100000", "cube:5000"] {
        assert_rejected(&["solve", "--mesh", mesh, "--order", "3"], "not enough host memory");
    }
}

/// A tolerance f32 cannot reach is reported: a warning and exit status 3, not a silent 0.
#[test]
fn an_unreachable_f32_tolerance_is_reported() {
    let args = ["solve", "--mesh", "square:8", "--order", "2", "--precision", "f32"];
    let (code, _, err) = hdg(&[&args[..], &["--tol", "1e-12"]].concat());
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("below what f32 reaches"), "{err}");
    let (code, _, err) = hdg(&args);
    assert_eq!(code, 0, "the default f32 tolerance is reachable: {err}");
}

/// `hdg convergence --plot` writes an SVG with one curve per error and the fitted rates in the
/// legend: the rates must be those of the method (a plot of the wrong numbers fails here).
#[test]
fn convergence_plot_has_the_fitted_rates() {
    let path = std::env::temp_dir().join(format!("hdg-rates-{}.svg", std::process::id()));
    let file = path.to_str().unwrap();
    let (code, _, err) =
        hdg(&["convergence", "--order", "2", "--levels", "3", "--start", "4", "--plot", file]);
    assert_eq!(code, 0, "{err}");
    let svg = std::fs::read_to_string(&path).expect("the plot is written");
    std::fs::remove_file(&path).ok();
    assert!(svg.trim_start().starts_with("<svg"), "not an SVG: {}", &svg[..80.min(svg.len())]);
    assert!(svg.matches("<polyline").count() >= 3, "three curves expected");
    for (name, expected) in [("u", 3.0), ("q", 3.0), ("u*", 4.0)] {
        let label = format!("{name}: rate ");
        let at = svg.find(&label).unwrap_or_else(|| panic!("no label {label:?}"));
        let rate: f64 = svg[at + label.len()..].split_whitespace().next().unwrap().parse().unwrap();
        assert!((rate - expected).abs() < 0.2, "{name}: fitted rate {rate}, expected {expected}");
    }
}

/// `--output` and `--plot` write the solution: a VTU file with the mesh file's regions and
/// boundary tags, a PNG picture; a picture of a 3D solution is refused with the reason, and
/// an unwritable path is an error naming it.
#[test]
fn solve_writes_the_solution_for_paraview_and_a_picture() {
    let dir = std::env::temp_dir().join(format!("hdg-cli-output-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (vtu, png) = (dir.join("plate.vtu"), dir.join("plate.png"));
    let mesh = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/meshes/plate-with-hole-0.msh");
    let (code, out, err) = hdg(&[
        "solve",
        "--mesh",
        mesh,
        "--order",
        "2",
        "--output",
        vtu.to_str().unwrap(),
        "--plot",
        png.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("plate.vtu") && out.contains("plate.png"), "{out}");
    let text = std::fs::read_to_string(&vtu).unwrap();
    for name in ["u_h", "q_h", "u_star", "region", "boundary_tag", "error_u"] {
        assert!(text.contains(&format!("Name=\"{name}\"")), "no {name} in the VTU file");
    }
    assert_eq!(&std::fs::read(&png).unwrap()[..4], b"\x89PNG");

    let (code, _, err) =
        hdg(&["solve", "--mesh", "cube:2", "--order", "1", "--plot", png.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("2D") && err.contains("--output"), "{err}");
    let (code, _, err) =
        hdg(&["solve", "--mesh", "square:2", "--order", "1", "--output", "/no/such/dir/u.vtu"]);
    assert_eq!(code, 2);
    assert!(err.contains("/no/such/dir/u.vtu"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

/// The summary states the problem solved: the PDE, the coefficients, the exact solution as a
/// formula (not the name of the option's value) and the boundary conditions per side.
#[test]
fn the_summary_names_the_pde_and_the_exact_solution() {
    let (code, out, err) = hdg(&["solve", "--mesh", "square:4", "--order", "1"]);
    assert_eq!(code, 0, "{err}");
    for needle in [
        "-div(kappa grad u) + c u = f, kappa = 1, c = 0",
        "exact solution u = sin(pi x) sin(pi y)",
        "Dirichlet on bottom (1), right (2), top (3), left (4)",
    ] {
        assert!(out.contains(needle), "no `{needle}` in {out}");
    }
    assert!(!out.contains("Sine"), "{out}");
    let (code, out, err) =
        hdg(&["solve", "--mesh", "cube:1", "--order", "1", "--problem", "expsin"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("exact solution u = exp(x) sin(2 y) cosh(z)"), "{out}");
}

/// The multigrid's setup lines and the malloc tunables are printed with --verbose only.
#[test]
fn verbose_shows_the_solver_internals_and_the_default_does_not() {
    let base = ["solve", "--mesh", "square:8", "--order", "2"];
    let (code, quiet, err) = hdg(&base);
    assert_eq!(code, 0, "{err}");
    let (code, verbose, err) = hdg(&[&base[..], &["--verbose"]].concat());
    assert_eq!(code, 0, "{err}");
    for needle in ["multigrid levels", "GLIBC_TUNABLES"] {
        assert!(!quiet.contains(needle), "`{needle}` without --verbose: {quiet}");
    }
    assert!(verbose.contains("multigrid levels"), "{verbose}");
    if cfg!(target_os = "linux") && cfg!(target_env = "gnu") {
        assert!(verbose.contains("GLIBC_TUNABLES="), "{verbose}");
    }
}

/// The residual line says which residual it is and whether the tolerance was met, as the
/// JSON report's `converged` and the exit status say.
#[test]
fn the_residual_line_agrees_with_converged() {
    for (cap, met) in [("100000", true), ("2", false)] {
        let base = ["solve", "--mesh", "square:8", "--order", "2", "--max-iterations", cap];
        let (code, out, _) = hdg(&base);
        let (json_code, json, _) = hdg(&[&base[..], &["--json"]].concat());
        let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
        assert_eq!(v["converged"], met, "{v}");
        assert_eq!((code, json_code), if met { (0, 0) } else { (3, 3) });
        let line = out
            .lines()
            .find(|l| l.contains("true relative residual ||b - A x|| / ||b|| ="))
            .unwrap_or_else(|| panic!("no residual line in {out}"));
        assert_eq!(line.contains(": met") || line.contains(": accepted"), met, "{line}");
        assert_eq!(line.contains("not met"), !met, "{line}");
    }
    // The default tolerance accepts the attainable accuracy where the residual stalls above
    // it; the line says so rather than "met".
    let (code, json, err) = hdg(&["solve", "--mesh", "square:128", "--order", "3", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    let (code, out, _) = hdg(&["solve", "--mesh", "square:128", "--order", "3"]);
    assert_eq!(code, 0);
    let residual = v["relative_residual"].as_f64().unwrap();
    let tolerance = v["options"]["tolerance"].as_f64().unwrap();
    let verdict = if residual <= tolerance { ": met)" } else { ": accepted: " };
    assert!(out.contains(verdict), "{verdict} missing: {out}");
}

/// The help lists the allowed solvers (every one the library has) and precisions, keeps
/// rustdoc's link syntax out, and `convergence` does not offer the options of `solve` alone.
#[test]
fn help_lists_the_values_and_only_the_options_a_command_takes() {
    let help = |args: &[&str]| {
        let (code, out, err) = hdg(args);
        assert_eq!(code, 0, "{args:?}: {err}");
        out
    };
    let solve = help(&["solve", "--help"]);
    for solver in hdg::SolverChoice::ALL {
        assert!(solve.contains(solver.name()), "no {solver} in {solve}");
    }
    assert!(solve.contains("possible values: f64, f32"), "{solve}");
    let convergence = help(&["convergence", "--help"]);
    for text in [help(&["--help"]), solve.clone(), convergence.clone(), help(&["run", "--help"])] {
        assert!(!text.contains("[`"), "rustdoc link in {text}");
    }
    for option in ["--neumann", "--robin", "--kappa", "--mean-zero", "--export-matrix"] {
        assert!(solve.contains(option), "{option} missing from solve --help");
        assert!(!convergence.contains(option), "{option} in convergence --help");
    }
    assert_rejected(
        &["convergence", "--order", "1", "--levels", "2", "--kappa", "a=1"],
        "unexpected argument",
    );
}

/// `--neumann` and `--robin` take the sides of generated meshes by the names problem files
/// use: the faces of the side become unknowns, so the system grows and the answer changes.
#[test]
fn neumann_and_robin_take_the_sides_of_generated_meshes() {
    let solve = |extra: &[&str]| {
        let base = ["solve", "--mesh", "square:8", "--order", "2", "--json"];
        let (code, out, err) = hdg(&[&base[..], extra].concat());
        assert_eq!(code, 0, "{extra:?}: {err}");
        serde_json::from_str::<serde_json::Value>(out.trim()).unwrap()
    };
    let dirichlet = solve(&[]);
    let neumann = solve(&["--neumann", "left"]);
    // 8 faces of the left side, 3 trace unknowns each at order 2.
    let dofs = |v: &serde_json::Value| v["trace_dofs"].as_u64().unwrap();
    assert_eq!(dofs(&neumann), dofs(&dirichlet) + 24);
    assert_ne!(neumann["errors"]["q"], dirichlet["errors"]["q"]);
    let conditions = neumann["problem"]["boundary_conditions"].to_string();
    assert!(conditions.contains("Neumann on left (4)"), "{conditions}");
    let robin = solve(&["--robin", "right"]);
    assert_eq!(dofs(&robin), dofs(&dirichlet) + 24);
    assert_rejected(
        &["solve", "--mesh", "square:4", "--order", "1", "--neumann", "x0"],
        "its sides are left, right, bottom, top",
    );
    let (code, _, err) =
        hdg(&["solve", "--mesh", "cube:2", "--order", "1", "--neumann", "x0", "--robin", "z1"]);
    assert_eq!(code, 0, "{err}");
}

/// `solve --json` records the mesh, the problem and the options it ran with.
#[test]
fn solve_json_records_the_mesh_the_problem_and_the_options() {
    let (code, out, err) = hdg(&[
        "solve", "--mesh", "square:4", "--order", "2", "--tau", "2", "--tol", "1e-9", "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["mesh"]["name"], "square:4 (right diagonals)", "{v}");
    assert_eq!(v["mesh"]["cells"], 32);
    assert_eq!(v["problem"]["pde"], "-div(kappa grad u) + c u = f");
    assert_eq!(v["problem"]["exact_solution"], "u = sin(pi x) sin(pi y)");
    assert_eq!(v["problem"]["kappa"], "1");
    assert!(v["problem"]["boundary_conditions"][0].as_str().unwrap().starts_with("Dirichlet"));
    let o = &v["options"];
    assert_eq!(o["order"], 2);
    assert_eq!(o["backend"], "cpu");
    assert_eq!(o["precision"], "f64");
    assert_eq!(o["solver"], "pcg-mg");
    assert_eq!(o["tolerance"], 1e-9);
    assert_eq!(o["tau"], "2");
}

/// Output captured by a pipe (not a terminal) carries no progress bar: no escape codes and no
/// carriage returns, on a run long enough for the stage lines.
#[test]
fn output_to_a_pipe_has_no_progress_escape_codes() {
    let (code, out, err) =
        hdg(&["solve", "--mesh", "square:128", "--order", "3", "--solver", "cg", "--tol", "1e-9"]);
    assert_eq!(code, 0, "{err}");
    // The solve takes seconds: its line is there, in plain text.
    assert!(err.contains("solve       done in"), "{err}");
    for text in [&out, &err] {
        assert!(!text.contains('\x1b') && !text.contains('\r'), "escape codes in {text:?}");
    }
}

/// The trace solve's iterations reach the observer a `Progress` gives for the solve stage
/// (what the program's spinner shows), one call per iteration.
#[test]
fn the_trace_solve_reports_its_iterations_to_progress() {
    use std::sync::{Arc, Mutex};
    struct Counting(Arc<Mutex<Vec<(usize, f64)>>>);
    impl hdg::Progress for Counting {
        fn iterations(&mut self) -> Option<hdg::core::pipeline::IterationObserver> {
            let seen = self.0.clone();
            Some(Box::new(move |i, r| seen.lock().unwrap().push((i, r))))
        }
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mesh = hdg::generate::unit_square(8, hdg::mesh::Diagonal::Right).unwrap();
    let problem = hdg::Problem::manufactured(hdg::Manufactured::Sine, 1.0, 0.0);
    let settings = hdg::SolverSettings {
        choice: hdg::SolverChoice::PcgJacobi,
        tolerance: Some(1e-8),
        ..Default::default()
    };
    let run = hdg::Solver::new(mesh, problem)
        .order(2)
        .solver_settings(settings)
        .run(&mut Counting(seen.clone()))
        .unwrap();
    let seen = seen.lock().unwrap();
    let iterations = run.report.solve.iterations;
    assert!(iterations > 5, "{iterations}");
    assert_eq!(seen.len(), iterations);
    assert_eq!(seen.iter().map(|s| s.0).collect::<Vec<_>>(), (1..=iterations).collect::<Vec<_>>());
    assert!(seen.last().unwrap().1 <= 1e-8, "{:?}", seen.last());
}

/// The summary accounts for the program's wall time: its parts (the mesh, the pipeline's
/// stages, the run around them, the outputs, the teardown) leave little unaccounted, and the
/// program's own wall clock agrees with the one measured from outside (the start-up before
/// `main` and the exit after the summary are all it cannot see). The mesh is large enough
/// that its build is a visible share: a build moved outside every part would fail the test.
#[test]
fn the_summary_accounts_for_the_wall_time() {
    let dir = std::env::temp_dir().join(format!("hdg-process-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let vtu = dir.join("u.vtu");
    let args = ["solve", "--mesh", "square:300", "--order", "1", "--json", "--output"];
    let started = std::time::Instant::now();
    let out =
        Command::new(env!("CARGO_BIN_EXE_hdg")).args(args).arg(&vtu).output().expect("runs hdg");
    let outside = started.elapsed().as_secs_f64();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let p = &v["process"];
    let seconds = |key: &str| p[key].as_f64().unwrap_or_else(|| panic!("process.{key} in {p}"));
    let wall = seconds("wall_s");
    let parts = ["mesh_s", "pipeline_s", "around_pipeline_s", "outputs_s", "teardown_s"];
    let accounted: f64 = parts.iter().map(|k| seconds(k)).sum();
    assert!(seconds("mesh_s") > 0.0 && seconds("outputs_s") > 0.0, "{p}");
    assert_eq!(seconds("pipeline_s"), v["timings_s"]["total"].as_f64().expect("the total"));
    assert!((seconds("rest_s") - (wall - accounted)).abs() < 1e-9, "{p}");
    assert!(
        wall - accounted < 0.1 + 0.1 * wall,
        "unaccounted {:.3} s of {wall:.3} s: {p}",
        wall - accounted
    );
    assert!(wall <= outside, "the program's wall {wall:.3} s above the outside's {outside:.3} s");
    assert!(
        outside - wall < 0.3 + 0.1 * outside,
        "outside {outside:.3} s, the program's {wall:.3} s"
    );
    std::fs::remove_dir_all(&dir).ok();
}
