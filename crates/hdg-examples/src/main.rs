//! `hdg`: solve Poisson problems with the HDG method from the command line.
use std::io::IsTerminal;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Parser, Subcommand, ValueEnum};
use hdg::core::MAX_ORDER;
use hdg::mesh::Diagonal;
use hdg::{
    default_tolerance, Backend, CoreError, Precision, Progress, Run, SolverChoice, SolverSettings,
    Stage, TraceOperatorKind, DEFAULT_MAX_ITERATIONS,
};
use hdg_examples::problem_file::ProblemFile;
use hdg_examples::{
    export_matrix, parse_tau, print_memory, print_report, program_solver, BoundaryKind, MeshKind,
    MeshSpec, ProblemKind, SolutionOutputs,
};

#[derive(Parser)]
#[command(name = "hdg", version, about = "High-order HDG solver for -div(kappa grad u) + c u = f")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum DiagonalKind {
    Right,
    Left,
    Alternating,
}

impl From<DiagonalKind> for Diagonal {
    fn from(d: DiagonalKind) -> Diagonal {
        match d {
            DiagonalKind::Right => Diagonal::Right,
            DiagonalKind::Left => Diagonal::Left,
            DiagonalKind::Alternating => Diagonal::Alternating,
        }
    }
}

/// Options shared by `solve` and `convergence`.
#[derive(clap::Args, Clone)]
struct Common {
    /// Polynomial order k.
    #[arg(long, short = 'k', value_parser = clap::value_parser!(u64).range(1..=MAX_ORDER as u64))]
    order: u64,
    /// Backend.
    #[arg(long, default_value = "cpu", value_parser = backend_parser())]
    backend: Backend,
    /// Floating-point precision.
    #[arg(long, default_value = "f64", value_parser = parse_precision)]
    precision: Precision,
    /// Manufactured problem (exact solution known).
    #[arg(long, value_enum, default_value_t = ProblemKind::Sine)]
    problem: ProblemKind,
    /// Boundary conditions, with data from the exact solution: dirichlet (everywhere) or, on
    /// square:N and cube:N, mixed (Dirichlet on x = 0, Robin with alpha = 1 on x = 1, Neumann
    /// on the other sides).
    #[arg(long, value_enum, default_value_t = BoundaryKind::Dirichlet)]
    bc: BoundaryKind,
    /// Physical groups of a mesh file with Neumann data (comma separated names).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    neumann: Vec<String>,
    /// Physical groups of a mesh file with Robin data, alpha = 1 (comma separated names).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    robin: Vec<String>,
    /// kappa per cell region of a mesh file, NAME=VALUE for each of its physical groups of
    /// cells (comma separated). The problem's source and boundary data stay; its exact
    /// solution belongs to constant kappa, so no errors are computed.
    #[arg(long, value_delimiter = ',', value_name = "NAME=VALUE")]
    kappa: Vec<String>,
    /// Stabilisation: a number (tau on every face), or `kappa-over-h[:SCALE]` for
    /// tau = SCALE kappa / h per cell (the O(1/h) choice: q then converges at order k).
    #[arg(long, default_value = "1", value_parser = parse_tau, value_name = "TAU")]
    tau: hdg::Tau,
    /// With Neumann data on the whole boundary and c = 0 (otherwise refused: u is fixed only up
    /// to a constant), fix the constant by mean(u_h) = 0.
    #[arg(long)]
    mean_zero: bool,
    /// Relative residual tolerance of the trace solve [default: 1e-10 in f64, 1e-6 in f32].
    #[arg(long, value_parser = parse_tolerance)]
    tol: Option<f64>,
    /// Iteration cap of the trace solve.
    #[arg(long, default_value_t = DEFAULT_MAX_ITERATIONS)]
    max_iterations: usize,
    /// Krylov method.
    #[arg(long, value_parser = parse_solver, default_value = "pcg-mg")]
    solver: SolverChoice,
    /// Trace operator: `dbf` (the assembled matrix) or `matrix-free` (element matrices, never
    /// assembled; `--backend cuda` only).
    #[arg(long, default_value = "dbf", value_name = "dbf|matrix-free")]
    operator: TraceOperatorKind,
    /// How each square is cut into two triangles.
    #[arg(long, value_enum, default_value_t = DiagonalKind::Right)]
    diagonal: DiagonalKind,
    /// Random vertex perturbation, as a fraction of the local edge length (0 to 0.4).
    #[arg(long, default_value_t = 0.0)]
    perturb: f64,
    /// Seed of the perturbation.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object instead of the human summary.
    #[arg(long)]
    json: bool,
    /// Write the assembled trace matrix to this Matrix Market file (`solve` only).
    #[arg(long, value_name = "FILE.mtx")]
    export_matrix: Option<std::path::PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Solve one problem and print a summary.
    Solve {
        /// Mesh: square:N (unit square, N x N squares, 2 N^2 triangles), cube:N (unit cube,
        /// N^3 boxes, 6 N^3 tetrahedra) or a Gmsh FILE.msh (format 4.1; physical groups of
        /// boundary lines/triangles become boundary tags).
        #[arg(long)]
        mesh: MeshSpec,
        /// Write the solution (u_h, q_h, u*, per-cell errors, regions, boundary tags) to this
        /// VTK XML file for ParaView.
        #[arg(long, value_name = "FILE.vtu")]
        output: Option<std::path::PathBuf>,
        /// Write a picture of u* (2D) to this PNG file.
        #[arg(long, value_name = "FILE.png")]
        plot: Option<std::path::PathBuf>,
        #[command(flatten)]
        common: Common,
    },
    /// Solve on a sequence of meshes that halve h and print errors and observed rates.
    Convergence {
        /// Number of meshes.
        #[arg(long, value_parser = clap::value_parser!(u64).range(2..=12))]
        levels: u64,
        /// Squares (boxes) per side of the coarsest mesh.
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..))]
        start: u64,
        /// Dimension: 2 (unit square, triangles) or 3 (unit cube, tetrahedra).
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(2..=3))]
        dim: u64,
        /// Also plot the errors against h, with their fitted rates, to this SVG file.
        #[arg(long, value_name = "FILE.svg")]
        plot: Option<std::path::PathBuf>,
        #[command(flatten)]
        common: Common,
    },
    /// Run every solver of the suite on one trace system and print a comparison table.
    Solvers {
        /// Mesh: square:N, cube:N or FILE.msh.
        #[arg(long)]
        mesh: MeshSpec,
        /// Polynomial order k.
        #[arg(long, short = 'k', value_parser = clap::value_parser!(u64).range(1..=MAX_ORDER as u64))]
        order: u64,
        /// Relative residual tolerance.
        #[arg(long, default_value_t = default_tolerance(Precision::F64), value_parser = parse_tolerance)]
        tol: f64,
        /// Iteration cap of every solver.
        #[arg(long, default_value_t = DEFAULT_MAX_ITERATIONS)]
        max_iterations: usize,
        /// Solvers to run (comma separated; default: all).
        #[arg(long, value_delimiter = ',', value_parser = parse_solver)]
        only: Vec<SolverChoice>,
        /// Manufactured problem.
        #[arg(long, value_enum, default_value_t = ProblemKind::Sine)]
        problem: ProblemKind,
        /// Print JSON instead of a Markdown table.
        #[arg(long)]
        json: bool,
    },
    /// Solve the problem a TOML file describes: mesh, coefficients, boundary conditions per
    /// physical group, exact solution, solver and outputs (`hdg_examples::problem_file` has
    /// the format; examples/problems/ has examples).
    Run {
        /// The problem file.
        #[arg(value_name = "FILE.toml")]
        file: std::path::PathBuf,
        /// Print one JSON object instead of the human summary.
        #[arg(long)]
        json: bool,
    },
}

fn parse_precision(s: &str) -> Result<Precision, String> {
    s.parse()
}

fn parse_solver(s: &str) -> Result<SolverChoice, String> {
    s.parse()
}

/// The backends by name, listed in the help.
fn backend_parser() -> impl TypedValueParser<Value = Backend> {
    PossibleValuesParser::new(Backend::ALL.map(Backend::name))
        .map(|name| name.parse::<Backend>().expect("a listed backend name"))
}

fn parse_tolerance(s: &str) -> Result<f64, String> {
    let t: f64 = s.parse().map_err(|_| format!("'{s}' is not a number"))?;
    hdg::check_tolerance(t).map(|()| t).map_err(|e| e.to_string())
}

/// Stage log on standard error: a line per stage once a run has taken more than a second
/// (short runs stay quiet), and a live spinner on a terminal.
struct StageLog {
    start: Instant,
    spinner: Option<indicatif::ProgressBar>,
    enabled: bool,
}

impl StageLog {
    fn new(enabled: bool) -> Self {
        let spinner = (enabled && std::io::stderr().is_terminal()).then(|| {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        StageLog { start: Instant::now(), spinner, enabled }
    }
}

impl Progress for StageLog {
    fn started(&mut self, stage: Stage) {
        if let Some(bar) = &self.spinner {
            bar.set_message(format!("{} ...", stage.name()));
        }
    }
    fn finished(&mut self, stage: Stage, seconds: f64) {
        let elapsed = self.start.elapsed().as_secs_f64();
        if self.enabled && (elapsed > 1.0 || seconds > 1.0) {
            let line = format!("[{elapsed:8.2} s] {:<11} {seconds:.3} s", stage.name());
            match &self.spinner {
                Some(bar) => bar.println(line),
                None => eprintln!("{line}"),
            }
        }
    }
}

impl Drop for StageLog {
    fn drop(&mut self) {
        if let Some(bar) = &self.spinner {
            bar.finish_and_clear();
        }
    }
}

/// Whether the tolerance asked for is within the precision's reach (the f32 default tolerance
/// is also the smallest an f32 solve reaches); says why not (stderr).
fn tolerance_reachable(common: &Common, reached: f64) -> bool {
    let floor = default_tolerance(Precision::F32);
    match common.tol {
        Some(tol) if common.precision == Precision::F32 && tol < floor => {
            eprintln!(
                "hdg: warning: --tol {tol:e} is below what f32 reaches (about {floor:e}); the \
                 solve stopped at relative residual {reached:.3e} (use --precision f64)"
            );
            false
        }
        _ => true,
    }
}

/// One solve; also the summary lines of its mesh ([`hdg_examples::BuiltMesh`]).
fn run_one(
    common: &Common,
    mesh: &MeshSpec,
    outputs: &SolutionOutputs,
    log: &mut StageLog,
) -> Result<(Run, Vec<String>), CoreError> {
    if !(0.0..=0.4).contains(&common.perturb) {
        return Err(CoreError::InvalidParameter {
            name: "perturb",
            reason: format!("{} is not in [0, 0.4]", common.perturb),
        });
    }
    let order = common.order as usize;
    mesh.check_size(order, common.backend, common.precision)?;
    let built = mesh.build(common.diagonal.into(), common.perturb, common.seed)?;
    let mut problem = boundary_conditions(common, mesh, &built, common.problem.problem(order))?;
    problem.tau = common.tau.clone();
    problem.mean_zero = common.mean_zero;
    // The problem's lines come after the mesh's and the files written.
    let mut problem_lines = Vec::new();
    if !common.kappa.is_empty() {
        problem_lines.push(format!(
            "kappa per region: {} (the exact solution is that of constant kappa: no errors)",
            common.kappa.join(", ")
        ));
    }
    if !problem.boundary.is_empty() {
        let conditions: Vec<String> = problem
            .boundary
            .iter()
            .map(|(tag, condition)| format!("{} on {tag}", condition.name()))
            .collect();
        problem_lines
            .push(format!("boundary conditions: {} (Dirichlet elsewhere)", conditions.join(", ")));
    }
    let settings = SolverSettings {
        choice: common.solver,
        tolerance: Some(common.tol.unwrap_or(default_tolerance(common.precision))),
        max_iterations: common.max_iterations,
    };
    let run = program_solver(built.mesh, problem)?
        .order(order)
        .backend(common.backend)
        .precision(common.precision)
        .solver_settings(settings)
        .operator(common.operator)
        .keep_solution(outputs.any())
        .keep_operator(common.export_matrix.is_some())
        .run(log)
        .map_err(hdg::Error::into_core)?;
    if let Some(path) = &common.export_matrix {
        export_matrix(&run, path)?;
    }
    let mut lines = built.summary;
    if let Some(solution) = &run.solution {
        lines.extend(outputs.write(solution, built.regions.as_deref())?);
    }
    lines.extend(problem_lines);
    Ok((run, lines))
}

/// The boundary conditions of `--bc`, `--neumann` and `--robin`, with data from the problem's
/// exact solution (kappa = 1), and the region values of `--kappa`.
fn boundary_conditions(
    common: &Common,
    spec: &MeshSpec,
    built: &hdg_examples::BuiltMesh,
    problem: hdg::Problem,
) -> Result<hdg::Problem, CoreError> {
    let bad = |reason: String| CoreError::InvalidParameter { name: "boundary conditions", reason };
    let mut problem = match (common.bc, spec) {
        (BoundaryKind::Dirichlet, _) => problem,
        (BoundaryKind::Mixed, MeshSpec::Generated { .. }) => {
            problem.with_mixed_boundary(built.mesh.dim(), 1.0)?
        }
        (BoundaryKind::Mixed, MeshSpec::File(_)) => {
            return Err(bad("--bc mixed names the sides of square:N and cube:N; for a mesh \
                            file, name its physical groups with --neumann and --robin"
                .into()))
        }
    };
    if !(common.neumann.is_empty() && common.robin.is_empty()) {
        let exact =
            problem.exact.clone().ok_or_else(|| bad("no exact solution for the data".into()))?;
        let Some(file) = &built.file else {
            return Err(bad("--neumann and --robin name physical groups of a mesh file".into()));
        };
        for name in &common.neumann {
            let condition = hdg::BoundaryCondition::neumann_of(&exact, 1.0);
            problem = problem.with_boundary(file.boundary_tag(name)?, condition);
        }
        for name in &common.robin {
            let condition = hdg::BoundaryCondition::robin_of(&exact, 1.0, 1.0);
            problem = problem.with_boundary(file.boundary_tag(name)?, condition);
        }
    }
    if !common.kappa.is_empty() {
        let (Some(groups), Some(regions)) = (&built.file, &built.regions) else {
            return Err(bad("--kappa NAME=VALUE names cell regions of a mesh file".into()));
        };
        let mut values = std::collections::BTreeMap::new();
        for item in &common.kappa {
            let (name, value) = item
                .split_once('=')
                .ok_or_else(|| bad(format!("--kappa '{item}' is not NAME=VALUE")))?;
            let value: f64 = value
                .parse()
                .map_err(|_| bad(format!("--kappa '{item}': '{value}' is no number")))?;
            values.insert(groups.region(name)?, value);
        }
        problem.kappa = hdg::Coefficient::per_region("kappa", regions, &values)?;
        problem.exact = None;
    }
    Ok(problem)
}

fn print_summary(mesh: &MeshSpec, common: &Common, run: &Run, mesh_lines: &[String]) {
    println!(
        "hdg solve: {mesh}{}, order {}, problem {:?}",
        match mesh {
            MeshSpec::Generated { kind: MeshKind::Square, .. } => {
                format!(" ({:?} diagonals)", common.diagonal)
            }
            _ => String::new(),
        },
        run.report.order,
        common.problem
    );
    print_report(run, mesh_lines);
}

fn rate(coarse: f64, fine: f64) -> f64 {
    (coarse / fine).log2()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Each backend's malloc tunables (huge pages for CUDA, freed memory kept for reuse on the
    // CPU), chosen by measurement (hdg_examples::malloc_tunables).
    if let Command::Solve { common, .. } | Command::Convergence { common, .. } = &cli.command {
        hdg_examples::malloc_tunables::enable(common.backend);
    }
    let result = match &cli.command {
        Command::Solve { mesh, output, plot, common } => {
            let mut log = StageLog::new(!common.json);
            let outputs = SolutionOutputs { vtu: output.clone(), png: plot.clone() };
            run_one(common, mesh, &outputs, &mut log).map(|(run, mesh_lines)| {
                drop(log);
                if common.json {
                    let mut json = hdg::json::run(&run);
                    json["mesh_notes"] = serde_json::json!(mesh_lines);
                    println!("{json}");
                } else {
                    print_summary(mesh, common, &run, &mesh_lines);
                    print_memory(&run);
                }
                let reached = run.report.solve.relative_residual;
                run.report.solve.converged && tolerance_reachable(common, reached)
            })
        }
        Command::Convergence { levels, start, dim, plot, common } => {
            let kind = if *dim == 3 { MeshKind::Cube } else { MeshKind::Square };
            convergence(common, kind, *levels as usize, *start as usize, plot.as_deref())
        }
        Command::Solvers { mesh, order, tol, max_iterations, only, problem, json } => {
            solvers(mesh, *order as usize, *tol, *max_iterations, only, *problem, *json)
        }
        Command::Run { file, json } => ProblemFile::load(file).and_then(|problem| {
            hdg_examples::malloc_tunables::enable(problem.backend());
            let mut log = StageLog::new(!*json);
            let solved = problem.solve(&mut log);
            drop(log);
            solved?.finish(*json)
        }),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("hdg: warning: the trace solve did not reach the tolerance");
            ExitCode::from(3)
        }
        Err(e) => {
            // The library names its own options; say where the program takes them.
            let option = match cli.command {
                Command::Run { .. } => "`mean_zero = true` in [equation]",
                _ => "--mean-zero",
            };
            eprintln!("hdg: error: {}", e.to_string().replace("Problem::mean_zero", option));
            // A distinct status for scripts that look for the largest problem that fits.
            if matches!(e, CoreError::OutOfDeviceMemory { .. }) {
                ExitCode::from(4)
            } else {
                ExitCode::from(2)
            }
        }
    }
}

fn convergence(
    common: &Common,
    kind: MeshKind,
    levels: usize,
    start: usize,
    plot: Option<&std::path::Path>,
) -> Result<bool, CoreError> {
    let bar = (!common.json && std::io::stderr().is_terminal())
        .then(|| indicatif::ProgressBar::new(levels as u64));
    let mut rows = Vec::new();
    let mut all_converged = true;
    for level in 0..levels {
        let n = start << level;
        let mesh = MeshSpec::Generated { kind, n };
        let mut log = StageLog::new(false);
        let report = run_one(common, &mesh, &SolutionOutputs::default(), &mut log)?.0.report;
        all_converged &= report.solve.converged;
        rows.push((n, report));
        if let Some(b) = &bar {
            b.inc(1);
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let errors: Vec<_> = rows
        .iter()
        .map(|(_, r)| r.errors.expect("manufactured problems have exact solutions"))
        .collect();
    if let Some(path) = plot {
        use hdg_examples::plot::{convergence_svg, Series};
        let h: Vec<f64> = rows.iter().map(|(n, _)| 1.0 / *n as f64).collect();
        let column = |f: fn(&hdg::ErrorNorms) -> f64| errors.iter().map(f).collect::<Vec<_>>();
        let (u, q, u_star) = (column(|e| e.u), column(|e| e.q), column(|e| e.u_star));
        let k = common.order as f64;
        let title = format!(
            "{}, order {}, {:?}",
            if kind == MeshKind::Cube { "unit cube" } else { "unit square" },
            common.order,
            common.problem
        );
        let series = [
            Series { name: "u", errors: &u, expected: k + 1.0 },
            Series { name: "q", errors: &q, expected: k + 1.0 },
            Series { name: "u*", errors: &u_star, expected: k + 2.0 },
        ];
        convergence_svg(path, &title, &h, &series)?;
        if !common.json {
            eprintln!("plot written to {}", path.display());
        }
    }
    if common.json {
        let table: Vec<_> = rows
            .iter()
            .enumerate()
            .map(|(i, (n, r))| {
                let rates = (i > 0).then(|| {
                    serde_json::json!({
                        "u": rate(errors[i - 1].u, errors[i].u),
                        "q": rate(errors[i - 1].q, errors[i].q),
                        "u_star": rate(errors[i - 1].u_star, errors[i].u_star),
                    })
                });
                let mut row = hdg::json::report(r);
                row["n"] = serde_json::json!(n);
                row["h"] = serde_json::json!(1.0 / *n as f64);
                row["rates"] = serde_json::json!(rates);
                row
            })
            .collect();
        println!("{}", serde_json::Value::Array(table));
    } else {
        println!(
            "hdg convergence: {}, order {}, problem {:?}, {:?} diagonals, perturbation {}, {}",
            match kind {
                MeshKind::Square => "unit square, triangles",
                MeshKind::Cube => "unit cube, tetrahedra",
            },
            common.order,
            common.problem,
            common.diagonal,
            common.perturb,
            common.precision.name()
        );
        println!(
            "{:>6} {:>10} {:>6} {:>11} {:>6} {:>11} {:>6} {:>11} {:>6}",
            "N", "trace dofs", "iters", "|u-u_h|", "rate", "|q-q_h|", "rate", "|u-u*|", "rate"
        );
        for (i, (n, r)) in rows.iter().enumerate() {
            let e = errors[i];
            let fmt_rate = |c: f64, f: f64| {
                if i == 0 {
                    "-".to_string()
                } else {
                    format!("{:.2}", rate(c, f))
                }
            };
            let p = if i == 0 { e } else { errors[i - 1] };
            println!(
                "{:>6} {:>10} {:>6} {:>11.3e} {:>6} {:>11.3e} {:>6} {:>11.3e} {:>6}",
                n,
                r.trace_dofs,
                r.solve.iterations,
                e.u,
                fmt_rate(p.u, e.u),
                e.q,
                fmt_rate(p.q, e.q),
                e.u_star,
                fmt_rate(p.u_star, e.u_star)
            );
        }
        println!("expected rates: u, q: {}; u*: {}", common.order + 1, common.order + 2);
    }
    Ok(all_converged)
}

fn solvers(
    mesh: &MeshSpec,
    order: usize,
    tol: f64,
    max_iterations: usize,
    only: &[SolverChoice],
    problem: ProblemKind,
    json: bool,
) -> Result<bool, CoreError> {
    let built = mesh.build(Diagonal::Right, 0.0, 0)?.mesh;
    let choices = if only.is_empty() { SolverChoice::ALL.to_vec() } else { only.to_vec() };
    let settings = SolverSettings { tolerance: Some(tol), max_iterations, ..Default::default() };
    let solver =
        program_solver(built, problem.problem(order))?.order(order).solver_settings(settings);
    let mut log_row = |r: &hdg::SolverRow| {
        eprintln!(
            "{:<17} {:>6} iterations {:>8.2} s  residual {:.1e}",
            r.solver, r.iterations, r.seconds, r.relative_residual
        )
    };
    let comparison = solver
        .compare_solvers(&choices, &mut hdg::Silent, &mut log_row)
        .map_err(hdg::Error::into_core)?;
    let (dofs, rows) = (comparison.trace_dofs, comparison.rows);
    if json {
        println!(
            "{}",
            serde_json::json!({ "trace_dofs": dofs, "order": order, "threads": hdg::host_threads(), "rows": rows })
        );
        return Ok(rows.iter().all(|r| r.converged));
    }
    println!(
        "{mesh}, order {order}, {dofs} trace dofs, tolerance {tol:e}, {} threads\n",
        hdg::host_threads()
    );
    println!("| solver | converged | iterations | reductions | operator applications | time s | true residual | L2 error u | L2 error u* |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} | {:.3} | {:.1e} | {:.3e} | {:.3e} |",
            r.solver,
            r.converged,
            r.iterations,
            r.reductions,
            r.operator_applications,
            r.seconds,
            r.relative_residual,
            r.error_u,
            r.error_u_star
        );
    }
    for r in rows.iter().filter(|r| !r.notes.is_empty()) {
        println!("\n{}: {}", r.solver, r.notes.join("; "));
    }
    Ok(rows.iter().all(|r| r.converged))
}
