//! `hdg`: solve Poisson problems with the HDG method from the command line.
use std::io::IsTerminal;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand, ValueEnum};
use hdg_core::{CoreError, PipelineReport, Progress, Stage, MAX_ORDER};
use hdg_examples::problem_file::ProblemFile;
use hdg_examples::{
    measured_json, parse_solver, parse_tau, print_memory, print_report, report_json,
    solve_measured, BackendKind, BoundaryKind, CudaSettings, Measured, MeshKind, MeshSpec,
    Precision, ProblemKind, SolutionOutputs, SolveSettings, TraceOperatorKind,
};
use hdg_linalg::SolverChoice;
use hdg_mesh::Diagonal;

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
    #[arg(long, value_enum, default_value_t = BackendKind::Cpu)]
    backend: BackendKind,
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
    tau: hdg_core::Tau,
    /// With Neumann data on the whole boundary and c = 0 (otherwise refused: u is fixed only up
    /// to a constant), fix the constant by mean(u_h) = 0.
    #[arg(long)]
    mean_zero: bool,
    /// Relative residual tolerance of the trace solve [default: 1e-10 in f64, 1e-6 in f32].
    #[arg(long, value_parser = parse_tolerance)]
    tol: Option<f64>,
    /// Iteration cap of the trace solve.
    #[arg(long, default_value_t = 100_000)]
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
        #[arg(long, default_value_t = 1e-10, value_parser = parse_tolerance)]
        tol: f64,
        /// Iteration cap of every solver.
        #[arg(long, default_value_t = 100_000)]
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
    /// Measure every stage on the CPU for several orders, with baselines from the same run.
    Bench {
        /// Orders to measure (comma separated).
        #[arg(long, value_delimiter = ',', default_value = "1,2,3,4,5,6")]
        orders: Vec<usize>,
        /// Approximate trace unknowns per problem.
        #[arg(long, default_value_t = 1_000_000)]
        dofs: usize,
        /// SpMV repetitions (median reported).
        #[arg(long, default_value_t = 20)]
        repeats: usize,
        /// Skip the trace solve (the slowest stage).
        #[arg(long)]
        no_solve: bool,
        /// Relative residual tolerance of the solve.
        #[arg(long, default_value_t = 1e-10, value_parser = parse_tolerance)]
        tol: f64,
        /// Print JSON instead of Markdown tables.
        #[arg(long)]
        json: bool,
    },
}

fn parse_precision(s: &str) -> Result<Precision, String> {
    s.parse()
}

/// Refuses a generated mesh whose problem cannot fit in the host's memory before building it
/// (the whole CPU pipeline's estimate, the mesh alone for the CUDA backend, whose element data
/// live on the device and are checked there).
fn check_generated_size(mesh: &MeshSpec, common: &Common) -> Result<(), CoreError> {
    mesh.check_size(common.order as usize, common.backend, common.precision)
}

fn parse_tolerance(s: &str) -> Result<f64, String> {
    let t: f64 = s.parse().map_err(|_| format!("'{s}' is not a number"))?;
    if t.is_finite() && t > 0.0 && t < 1.0 {
        Ok(t)
    } else {
        Err(format!("tolerance must be in (0, 1), got {s}"))
    }
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

/// The trace solve's default relative tolerance in a precision: also the smallest an f32 solve
/// reaches (its true residual stalls there or above: BENCHMARKS.md), below which a requested
/// tolerance is reported as out of reach.
fn default_tolerance(precision: Precision) -> f64 {
    match precision {
        Precision::F64 => 1e-10,
        Precision::F32 => 1e-6,
    }
}

/// Whether the tolerance asked for is within the precision's reach; says why not (stderr).
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
) -> Result<(Measured, Vec<String>), CoreError> {
    if !(0.0..=0.4).contains(&common.perturb) {
        return Err(CoreError::InvalidParameter {
            name: "perturb",
            reason: format!("{} is not in [0, 0.4]", common.perturb),
        });
    }
    let order = common.order as usize;
    check_generated_size(mesh, common)?;
    let built = mesh.build(common.diagonal.into(), common.perturb, common.seed)?;
    let mut problem = boundary_conditions(common, mesh, &built, common.problem.problem(order))?;
    problem.tau = common.tau.clone();
    problem.mean_zero = common.mean_zero;
    let tolerance = common.tol.unwrap_or(default_tolerance(common.precision));
    let settings = SolveSettings {
        order,
        tolerance,
        max_iterations: common.max_iterations,
        solver: common.solver,
        operator: common.operator,
        cuda: CudaSettings::from_environment()?,
        keep_solution: outputs.any(),
    };
    let measured = solve_measured(
        common.backend,
        &built.mesh,
        &problem,
        &settings,
        common.precision,
        common.export_matrix.as_deref(),
        log,
    )?;
    let mut lines = built.summary;
    if let Some(solution) = &measured.solution {
        lines.extend(outputs.write(solution, built.regions.as_deref())?);
    }
    if !common.kappa.is_empty() {
        lines.push(format!(
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
        lines.push(format!("boundary conditions: {} (Dirichlet elsewhere)", conditions.join(", ")));
    }
    Ok((measured, lines))
}

/// The boundary conditions of `--bc`, `--neumann` and `--robin`, with data from the problem's
/// exact solution (kappa = 1), and the region values of `--kappa`.
fn boundary_conditions(
    common: &Common,
    spec: &MeshSpec,
    built: &hdg_examples::BuiltMesh,
    problem: hdg_core::Problem,
) -> Result<hdg_core::Problem, CoreError> {
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
            let condition = hdg_core::BoundaryCondition::neumann_of(&exact, 1.0);
            problem = problem.with_boundary(file.boundary_tag(name)?, condition);
        }
        for name in &common.robin {
            let condition = hdg_core::BoundaryCondition::robin_of(&exact, 1.0, 1.0);
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
        problem.kappa = hdg_core::Coefficient::per_region("kappa", regions, &values)?;
        problem.exact = None;
    }
    Ok(problem)
}

fn print_summary(mesh: &MeshSpec, common: &Common, r: &PipelineReport, mesh_lines: &[String]) {
    println!(
        "hdg solve: {mesh}{}, order {}, problem {:?}",
        match mesh {
            MeshSpec::Generated { kind: MeshKind::Square, .. } => {
                format!(" ({:?} diagonals)", common.diagonal)
            }
            _ => String::new(),
        },
        r.order,
        common.problem
    );
    print_report(r, common.operator, mesh_lines);
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
            run_one(common, mesh, &outputs, &mut log).map(|(measured, mesh_lines)| {
                drop(log);
                if common.json {
                    let mut json = measured_json(&measured);
                    json["operator"] = common.operator.name().into();
                    json["mesh_notes"] = serde_json::json!(mesh_lines);
                    println!("{json}");
                } else {
                    print_summary(mesh, common, &measured.report, &mesh_lines);
                    print_memory(&measured);
                }
                let reached = measured.report.solve.relative_residual;
                measured.report.solve.converged && tolerance_reachable(common, reached)
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
        Command::Bench { orders, dofs, repeats, no_solve, tol, json } => {
            bench(orders, *dofs, *repeats, !*no_solve, *tol, *json)
        }
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("hdg: warning: the trace solve did not reach the tolerance");
            ExitCode::from(3)
        }
        Err(e) => {
            eprintln!("hdg: error: {e}");
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
        let column = |f: fn(&hdg_core::ErrorNorms) -> f64| errors.iter().map(f).collect::<Vec<_>>();
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
                let mut row = report_json(r);
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

fn bench(
    orders: &[usize],
    dofs: usize,
    repeats: usize,
    solve: bool,
    tol: f64,
    json: bool,
) -> Result<bool, CoreError> {
    if let Some(&k) = orders.iter().find(|&&k| !(1..=MAX_ORDER).contains(&k)) {
        return Err(CoreError::InvalidOrder { order: k, min: 1, max: MAX_ORDER });
    }
    if dofs < 100 || repeats == 0 {
        return Err(CoreError::InvalidParameter {
            name: "bench size",
            reason: "need --dofs >= 100 and --repeats >= 1".into(),
        });
    }
    let options = hdg_examples::bench::BenchOptions {
        orders: orders.to_vec(),
        target_dofs: dofs,
        spmv_repeats: repeats,
        solve,
        tolerance: tol,
    };
    let (copy, rows) = hdg_examples::bench::run(&options, |line| eprintln!("{line}"))?;
    let dense = hdg_examples::bench::dense_comparison(orders, 20_000);
    if json {
        println!(
            "{}",
            serde_json::json!({ "threads": rayon::current_num_threads(), "copy_gbs": copy, "stages": rows, "dense": dense })
        );
        return Ok(true);
    }
    println!("threads: {}, memory copy bandwidth: {copy:.2} GB/s (read + write, best of 6 copies of 256 MiB)\n", rayon::current_num_threads());
    println!("| k | N | cells | trace dofs | setup s | condense s | cells/s | GFLOP/s | assemble s | recover s | postprocess s |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {:.3} | {:.3} | {:.3e} | {:.2} | {:.3} | {:.3} | {:.3} |",
            r.order,
            r.n,
            r.cells,
            r.trace_dofs,
            r.setup_s,
            r.condense_s,
            r.condense_cells_per_s,
            r.condense_gflops,
            r.assemble_s,
            r.recover_s,
            r.postprocess_s
        );
    }
    println!("\n| k | DBF SpMV ms | GB/s | of copy | CSR (Rayon) ms | CSR (sprs, serial) ms | DBF speed-up vs CSR (Rayon) | DBF B/dof | CSR B/dof | recovery B/dof |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.0} | {:.0} | {:.0} |",
            r.order,
            r.dbf_spmv_s * 1e3,
            r.dbf_spmv_gbs,
            r.dbf_fraction_of_copy,
            r.csr_parallel_spmv_s * 1e3,
            r.csr_serial_spmv_s * 1e3,
            r.dbf_speedup_over_csr_parallel,
            r.matrix_bytes_per_dof,
            r.csr_bytes_per_dof,
            r.recovery_bytes_per_dof
        );
    }
    if solve {
        println!("\n| k | solve iterations | solve s | true relative residual | L2 error u | L2 error u* |");
        println!("|---|---|---|---|---|---|");
        for r in &rows {
            println!(
                "| {} | {} | {:.2} | {:.1e} | {:.2e} | {:.2e} |",
                r.order,
                r.solve_iterations.unwrap_or(0),
                r.solve_s.unwrap_or(0.0),
                r.solve_relative_residual.unwrap_or(0.0),
                r.error_u,
                r.error_u_star
            );
        }
    }
    println!("\n| k | n | 3 n_f | ours us/element | faer us/element | faer / ours |");
    println!("|---|---|---|---|---|---|");
    for d in &dense {
        println!(
            "| {} | {} | {} | {:.3} | {:.3} | {:.2} |",
            d.order, d.n, d.nl, d.ours_us_per_element, d.faer_us_per_element, d.faer_over_ours
        );
    }
    Ok(true)
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
    let (dofs, rows) = hdg_examples::compare::compare(
        &built,
        &problem.problem(order),
        order,
        tol,
        max_iterations,
        &choices,
        |line| eprintln!("{line}"),
    )?;
    if json {
        println!(
            "{}",
            serde_json::json!({ "trace_dofs": dofs, "order": order, "threads": rayon::current_num_threads(), "rows": rows })
        );
        return Ok(rows.iter().all(|r| r.converged));
    }
    println!(
        "{mesh}, order {order}, {dofs} trace dofs, tolerance {tol:e}, {} threads\n",
        rayon::current_num_threads()
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
