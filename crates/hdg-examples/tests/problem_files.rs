//! `hdg run FILE.toml`: every example problem file runs, the ones with an exact solution
//! converge at the rates theory gives for their solution, a file reproduces the
//! manufactured problem of `hdg solve`, and bad files are refused naming the line.
use std::path::{Path, PathBuf};
use std::process::Command;

fn hdg(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hdg")).args(args).output().expect("runs hdg");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn examples() -> PathBuf {
    repository().join("examples/problems")
}

/// A folder of this test's own under the target directory.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("problem_files").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `hdg run --json` of `text` written to a scratch file; the JSON report.
fn run_text(name: &str, text: &str) -> serde_json::Value {
    let path = scratch("runs").join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    run_json(&path)
}

fn run_json(path: &Path) -> serde_json::Value {
    let (code, out, err) = hdg(&["run", path.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{}: {err}", path.display());
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// The example file `name` with `from` replaced by `to` (which must occur).
fn example_with(name: &str, from: &str, to: &str) -> String {
    let text = std::fs::read_to_string(examples().join(name)).unwrap();
    assert!(text.contains(from), "{name} has no {from}");
    text.replace(from, to)
}

fn errors(report: &serde_json::Value) -> [f64; 3] {
    let e = &report["errors"];
    ["u", "q", "u_star"].map(|k| e[k].as_f64().unwrap_or_else(|| panic!("no error {k}: {e}")))
}

/// log2 of the error ratios of two meshes of which the second halves h.
fn rates(coarse: &serde_json::Value, fine: &serde_json::Value) -> [f64; 3] {
    let (c, f) = (errors(coarse), errors(fine));
    [0, 1, 2].map(|i| (c[i] / f[i]).log2())
}

#[test]
fn every_example_runs() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(examples())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "{files:?}");
    for file in &files {
        let report = run_json(file);
        assert_eq!(report["converged"], true, "{}", file.display());
        let text = std::fs::read_to_string(file).unwrap();
        if text.contains("\n[exact]") {
            for e in errors(&report) {
                assert!(e.is_finite() && e > 0.0, "{}: {report}", file.display());
            }
        } else {
            assert!(report["errors"].is_null(), "{}", file.display());
        }
    }
    // The summary of one, as a person reads it.
    let (code, out, err) = hdg(&["run", examples().join("plate-with-hole.toml").to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    for needle in ["hdg run:", "Neumann on hole (2)", "Robin (alpha 2) on outer (1)", "trace solve"]
    {
        assert!(out.contains(needle), "no {needle} in {out}");
    }
}

/// Smooth solutions: the errors of the square example fall at the rates k+1 (u, q) and k+2
/// (u*) of HDG with coefficients that vary in the cells (k = 3 there), from N = 16 to 32; a
/// wrong source or wrong boundary data would leave an error that does not fall with h.
#[test]
fn the_square_example_converges_at_the_hdg_rates() {
    let coarse = run_json(&examples().join("square-variable-kappa.toml"));
    let fine = run_text(
        "square-32",
        &example_with("square-variable-kappa.toml", "square:16", "square:32"),
    );
    let k = coarse["order"].as_f64().unwrap();
    let [u, q, u_star] = rates(&coarse, &fine);
    assert!(u > k + 1.0 - 0.3 && q > k + 1.0 - 0.3 && u_star > k + 2.0 - 0.3, "{u} {q} {u_star}");
}

/// The cube with a hole: the same rates in 3D (k = 2), from the first to the second mesh
/// (pre-asymptotic on the coarse first mesh: 0.5 below the rates allowed). The Neumann data
/// on the hole use the normal of the mesh's flat faces, so there is no geometric error.
#[test]
fn the_cube_example_converges_at_the_hdg_rates() {
    let meshes = repository().join("examples/meshes");
    let level = |l: u32| {
        let path = meshes.join(format!("cube-with-hole-{l}.msh"));
        run_text(
            &format!("cube-{l}"),
            &example_with(
                "cube-with-hole.toml",
                "../meshes/cube-with-hole-1.msh",
                path.to_str().unwrap(),
            ),
        )
    };
    let (coarse, fine) = (level(0), level(1));
    let k = coarse["order"].as_f64().unwrap();
    let [u, q, u_star] = rates(&coarse, &fine);
    assert!(u > k + 0.5 && q > k + 0.5 && u_star > k + 1.5, "{u} {q} {u_star}");
}

/// The L-shape's corner singularity r^(2/3): u is in H^(1 + 2/3 - eps) only, so on uniformly
/// refined meshes the error of q falls like h^(2/3) and that of u like h^(4/3), whatever the
/// order. Rates near those (and not k+1) show the file describes the singular solution and its
/// gradient correctly.
#[test]
fn the_l_shape_example_converges_at_the_singular_rates() {
    let meshes = repository().join("examples/meshes");
    let level = |l: u32| {
        let path = meshes.join(format!("l-shape-{l}.msh"));
        run_text(
            &format!("l-shape-{l}"),
            &example_with("l-shape.toml", "../meshes/l-shape-2.msh", path.to_str().unwrap()),
        )
    };
    let [u, q, _] = rates(&level(1), &level(2));
    assert!((u - 4.0 / 3.0).abs() < 0.15, "u rate {u}");
    assert!((q - 2.0 / 3.0).abs() < 0.15, "q rate {q}");
}

/// A problem file written for the manufactured problem of `hdg solve --problem expsin --bc
/// mixed` (u = exp(x) sin(2y), Dirichlet on x = 0, Robin with alpha 1 on x = 1, Neumann on
/// y = 0, 1) gives its errors: expressions, names of the sides and the signs of the data agree
/// with the problem built in Rust.
#[test]
fn a_file_reproduces_the_manufactured_problem_of_hdg_solve() {
    let file = r#"
[mesh]
generate = "square:8"

[equation]
source = "3 * exp(x) * sin(2*y)"

[boundary]
default = "exp(x) * sin(2*y)"
right = { robin = "nx * exp(x) * sin(2*y) + ny * 2 * exp(x) * cos(2*y) + exp(x) * sin(2*y)", alpha = 1 }
bottom = { neumann = "nx * exp(x) * sin(2*y) + ny * 2 * exp(x) * cos(2*y)" }
top = { neumann = "nx * exp(x) * sin(2*y) + ny * 2 * exp(x) * cos(2*y)" }

[exact]
u = "exp(x) * sin(2*y)"

[discretization]
order = 3

[solver]
method = "direct"
"#;
    let ours = errors(&run_text("expsin-mixed", file));
    let args = "solve --mesh square:8 --order 3 --problem expsin --bc mixed --solver direct --json";
    let (code, out, err) = hdg(&args.split(' ').collect::<Vec<_>>());
    assert_eq!(code, 0, "{err}");
    let theirs = errors(&serde_json::from_str(out.trim()).unwrap());
    for i in 0..3 {
        assert!((ours[i] - theirs[i]).abs() < 1e-9 * theirs[i], "{ours:?} vs {theirs:?}");
    }
}

/// The outputs are written where `[output]` says, relative to the file: the JSON report, the
/// VTU file (read back here as XML with the cell count of the mesh) and the PNG picture
/// (its PNG signature).
#[test]
fn outputs_are_written_relative_to_the_file() {
    let dir = scratch("outputs");
    let path = dir.join("p.toml");
    let text = "[mesh]\ngenerate = \"square:2\"\n[discretization]\norder = 1\n\
                [output]\njson = \"out/report.json\"\nvtu = \"u.vtu\"\npng = \"u.png\"\n";
    std::fs::create_dir_all(dir.join("out")).unwrap();
    std::fs::write(&path, text).unwrap();
    let (code, out, err) = hdg(&["run", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("wrote") && out.contains("u.vtu") && out.contains("u.png"), "{out}");
    let vtu = std::fs::read_to_string(dir.join("u.vtu")).unwrap();
    assert!(vtu.contains("<VTKFile") && vtu.contains("UnstructuredGrid"), "{vtu:.200}");
    let png = std::fs::read(dir.join("u.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let written = std::fs::read_to_string(dir.join("out/report.json")).unwrap();
    let report: serde_json::Value = serde_json::from_str(&written).unwrap();
    assert_eq!(report["cells"], 8);
    assert_eq!(report["mesh"]["name"], "square:2");
}

/// A bad file: exit status 2, one error line naming the file, the line and the reason.
fn assert_refused(name: &str, text: &str, line: usize, needles: &[&str]) {
    let path = scratch("refusals").join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    let (code, out, err) = hdg(&["run", path.to_str().unwrap()]);
    assert_eq!(code, 2, "{name}: {out}{err}");
    let line_text = format!("{name}.toml, line {line}");
    assert!(err.starts_with("hdg: error: ") && err.contains(&line_text), "{name}: {err}");
    for needle in needles {
        assert!(err.contains(needle), "{name}: no {needle} in {err}");
    }
}

const HEAD: &str = "[mesh]\ngenerate = \"square:4\"\n[discretization]\norder = 2\n";

#[test]
fn an_unknown_key_is_refused_with_its_line() {
    let text = format!("{HEAD}[equation]\nkapa = 1.0\n");
    assert_refused("typo", &text, 6, &["unknown field `kapa`", "expected one of `kappa`"]);
}

#[test]
fn a_value_of_the_wrong_type_is_refused_with_its_line() {
    let text = "[mesh]\ngenerate = \"square:4\"\n[discretization]\norder = \"3\"\n";
    assert_refused("wrong-type", text, 4, &["invalid type: string \"3\""]);
    let text = format!("{HEAD}[equation]\nkappa = true\n");
    assert_refused("wrong-type-kappa", &text, 6, &["boolean", "a number, an expression"]);
}

#[test]
fn an_expression_that_does_not_parse_is_refused_with_its_line() {
    let text = format!("{HEAD}[equation]\nkappa = 1\nsource = \"sin(x\"\n");
    assert_refused("syntax", &text, 7, &["source", "`sin(x`", "not closed"]);
    let text = format!("{HEAD}[equation]\nsource = \"exp(-x^2)\"\n");
    assert_refused("ambiguous", &text, 6, &["sign before a power", "-(a^b)"]);
}

#[test]
fn an_expression_with_an_unknown_variable_is_refused_with_its_line() {
    let text = format!("{HEAD}[exact]\nu = \"r^2\"\n");
    assert_refused("variable", &text, 6, &["exact u", "unknown name `r`", "x, y, z"]);
    let text = format!("{HEAD}[boundary]\nleft = {{ dirichlet = \"nx\" }}\n");
    assert_refused("normal", &text, 6, &["`nx`", "Neumann and Robin data only"]);
    let text = format!("{HEAD}[equation]\nsource = \"z\"\n");
    assert_refused("z-in-2d", &text, 6, &["uses z, but the mesh is 2D"]);
}

#[test]
fn an_unknown_physical_group_is_refused_with_its_line() {
    let mesh = repository().join("examples/meshes/plate-with-hole-0.msh");
    let text = format!(
        "[mesh]\nfile = {:?}\n[discretization]\norder = 1\n[boundary]\nholes = {{ neumann = 1 }}\n",
        mesh.to_str().unwrap()
    );
    assert_refused("group", &text, 6, &["`holes`", "outer (1), hole (2)"]);
    let text = format!("{HEAD}[boundary]\nwest = {{ dirichlet = 1 }}\n");
    assert_refused("side", &text, 6, &["`west`", "left (4)"]);
    let text = format!("{HEAD}[boundary]\n\"9\" = {{ dirichlet = 1 }}\n");
    assert_refused("tag", &text, 6, &["no boundary face has tag 9"]);
}

#[test]
fn a_region_without_a_value_is_refused_with_its_line() {
    let mesh = repository().join("examples/meshes/plate-with-hole-0.msh");
    let head =
        format!("[mesh]\nfile = {:?}\n[discretization]\norder = 1\n", mesh.to_str().unwrap());
    let text = format!("{head}[equation]\nkappa = {{ plate = 1.0 }}\n");
    assert_refused("region", &text, 6, &["kappa has no value for region `ring` (4)"]);
    let text = format!("{head}[equation]\nkappa = {{ plate = 1.0, rings = 2.0 }}\n");
    assert_refused("region-name", &text, 6, &["no region physical group named 'rings'"]);
    let text = format!("{HEAD}[equation]\nkappa = {{ plate = 1.0 }}\n");
    assert_refused("region-generated", &text, 6, &["needs a mesh file with regions"]);
}

/// Neumann data on every side and c = 0: refused, naming the file's key for mean(u) = 0.
#[test]
fn pure_neumann_is_refused_naming_the_key() {
    let sides = "[boundary]\nleft = { neumann = 0 }\nright = { neumann = 0 }\n\
                 top = { neumann = 0 }\nbottom = { neumann = 0 }\n";
    let path = scratch("refusals").join("pure-neumann.toml");
    std::fs::write(&path, format!("{HEAD}{sides}")).unwrap();
    let (code, out, err) = hdg(&["run", path.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("pure Neumann") && err.contains("`mean_zero = true`"), "{err}");
    let report = run_text("mean-zero", &format!("{HEAD}[equation]\nmean_zero = true\n{sides}"));
    assert!(report["iterations"].as_u64().is_some(), "{report}");
}

#[test]
fn a_missing_mesh_file_is_refused_with_its_line() {
    let text = "# a comment\n[mesh]\nfile = \"nowhere.msh\"\n[discretization]\norder = 1\n";
    assert_refused("missing-mesh", text, 3, &["nowhere.msh", "does not exist"]);
}

#[test]
fn other_refusals_name_their_line() {
    let text = format!("{HEAD}[boundary.left]\nrobin = 1.0\n");
    assert_refused("robin-alpha", &text, 5, &["robin needs `alpha`"]);
    let text = format!("{HEAD}[boundary]\nleft = {{ dirichlet = 1, neumann = 2 }}\n");
    assert_refused("two-conditions", &text, 6, &["exactly one of"]);
    let text = format!("{HEAD}[equation]\nkappa = \"x - 2\"\n");
    assert_refused("negative-kappa", &text, 6, &["kappa `x - 2`", "not > 0"]);
    let text = "[mesh]\ngenerate = \"square:4\"\n[discretization]\norder = 99\n";
    assert_refused("order", text, 4, &["order 99"]);
    let text = format!("{HEAD}[solver]\nbackend = \"gpu\"\n");
    assert_refused("backend", &text, 6, &["unknown variant `gpu`"]);
    let text = format!("{HEAD}[solver]\nmethod = \"cgg\"\n");
    assert_refused("method", &text, 6, &["unknown solver 'cgg'"]);
    let (code, _, err) = hdg(&["run", "/nonexistent/problem.toml"]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot read /nonexistent/problem.toml"), "{err}");
}

/// A small problem file with an exact solution, for the tests of the summary and of `--set`.
fn small_file(name: &str) -> PathBuf {
    let path = scratch("small").join(format!("{name}.toml"));
    let text = "[mesh]\ngenerate = \"square:4\"\n[equation]\nkappa = \"1 + x\"\nsource = \"0\"\n\
                [boundary]\nleft = { neumann = \"-(1 + x)\" }\ndefault = \"x\"\n\
                [exact]\nu = \"x\"\n[discretization]\norder = 1\n";
    std::fs::write(&path, text).unwrap();
    path
}

/// The summary of `hdg run` states the problem: the PDE, kappa as the file gives it, the
/// exact solution and the condition of each boundary group; then the residual with its
/// tolerance.
#[test]
fn the_run_summary_states_the_problem() {
    let path = small_file("summary");
    let (code, out, err) = hdg(&["run", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    for needle in [
        "-div(kappa grad u) + c u = f",
        "kappa = 1 + x",
        "exact solution u = x",
        "Neumann on left (4)",
        "Dirichlet (default data) on bottom (1), right (2), top (3)",
        "true relative residual ||b - A x|| / ||b||",
        "(tolerance 1e-",
    ] {
        assert!(out.contains(needle), "no `{needle}` in {out}");
    }
}

/// `--set KEY=VALUE` changes any key of the file before it is checked (the JSON report shows
/// the order asked for), `--order` is its shorthand, and a key the format does not have is
/// refused naming it.
#[test]
fn set_overrides_keys_of_the_file_and_unknown_keys_are_refused() {
    let path = small_file("set");
    let file = path.to_str().unwrap();
    let order = |args: &[&str]| {
        let (code, out, err) = hdg(&[&["run", file, "--json"][..], args].concat());
        assert_eq!(code, 0, "{args:?}: {err}");
        let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(v["order"], v["options"]["order"], "{v}");
        v["order"].as_u64().unwrap()
    };
    assert_eq!(order(&[]), 1);
    assert_eq!(order(&["--set", "discretization.order=3"]), 3);
    assert_eq!(order(&["--order", "2"]), 2);
    // A bare word is a string: the solver by name.
    let (code, out, err) = hdg(&["run", file, "--json", "--set", "solver.method=cg"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"solver\":\"cg\""), "{out}");

    let (code, _, err) = hdg(&["run", file, "--set", "discretization.ordr=3"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("ordr"), "{err}");
    let (code, _, err) = hdg(&["run", file, "--set", "discretization.order=\"high\""]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--set") || err.contains("integer"), "{err}");
    let (code, _, err) = hdg(&["run", file, "--set", "discretization.order.x=1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("`discretization.order` is a value"), "{err}");
    let (code, _, err) = hdg(&["run", file, "--set", "order"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("KEY=VALUE"), "{err}");
}

/// `hdg run` accounts for its wall time as `hdg solve` does, up to its report (made before the
/// outputs are written): the parts add up to the wall time since the program started within a
/// small slack, the pipeline is the stages' total, and the mesh (large enough here to be a
/// visible share) is counted.
#[test]
fn a_run_accounts_for_its_wall_time() {
    let file = examples().join("square-variable-kappa.toml");
    let args = ["run", file.to_str().unwrap(), "--json", "--set", "mesh.generate=square:300"];
    let started = std::time::Instant::now();
    let (code, out, err) = hdg(&args);
    let outside = started.elapsed().as_secs_f64();
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    let p = &v["process"];
    let seconds = |key: &str| p[key].as_f64().unwrap_or_else(|| panic!("process.{key} in {p}"));
    let wall = seconds("wall_s");
    let parts = ["mesh_s", "pipeline_s", "around_pipeline_s", "outputs_s", "teardown_s"];
    let accounted: f64 = parts.iter().map(|k| seconds(k)).sum();
    assert!(seconds("mesh_s") > 0.0, "{p}");
    assert_eq!(seconds("pipeline_s"), v["timings_s"]["total"].as_f64().expect("the total"));
    assert!((seconds("rest_s") - (wall - accounted)).abs() < 1e-9, "{p}");
    assert!(wall - accounted < 0.1 + 0.1 * wall, "unaccounted {:.3} s: {p}", wall - accounted);
    assert!(wall <= outside, "the program's wall {wall:.3} s above the outside's {outside:.3} s");
}
