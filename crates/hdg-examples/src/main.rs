//! `hdg`: solve Poisson problems with the HDG method from the command line.
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
use hdg_examples::process_clock::{BackendStartTimes, ProcessTimes};
use hdg_examples::{
    export_matrix, manufactured_formula, parse_tau, print_report, program_solver, summary_json,
    tau_name, BoundaryKind, Description, MeshKind, MeshSpec, ProblemKind, SolutionOutputs, Summary,
};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

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
    #[arg(long, default_value = "f64", value_parser = precision_parser())]
    precision: Precision,
    /// Manufactured problem (exact solution known; kappa = 1, c = 0, f and the boundary data
    /// from the exact solution).
    #[arg(long, value_enum, default_value_t = ProblemKind::Sine)]
    problem: ProblemKind,
    /// Boundary conditions, with data from the exact solution: dirichlet (everywhere) or, on
    /// square:N and cube:N, mixed (Dirichlet on x = 0, Robin with alpha = 1 on x = 1, Neumann
    /// on the other sides).
    #[arg(long, value_enum, default_value_t = BoundaryKind::Dirichlet)]
    bc: BoundaryKind,
    /// Stabilisation: a number (tau on every face), or `kappa-over-h[:SCALE]` for
    /// tau = SCALE kappa / h per cell (the O(1/h) choice: q then converges at order k).
    #[arg(long, default_value = "1", value_parser = parse_tau, value_name = "TAU")]
    tau: hdg::Tau,
    #[arg(long, value_parser = parse_tolerance, help = tolerance_help())]
    tol: Option<f64>,
    /// Iteration cap of the trace solve.
    #[arg(long, default_value_t = DEFAULT_MAX_ITERATIONS)]
    max_iterations: usize,
    /// Trace solver (the README's table says what each is).
    #[arg(long, value_parser = solver_parser(), default_value = "pcg-mg")]
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
    /// Also print the trace solver's internals (a preconditioner's setup, levels and
    /// eigenvalue bounds) and the malloc tunables of the run.
    #[arg(long, short = 'v')]
    verbose: bool,
}

/// Options of `solve` alone: boundary groups and regions by name, the matrix export.
#[derive(clap::Args, Clone, Default)]
struct SolveOptions {
    /// Boundary groups with Neumann data (comma separated): physical groups of a mesh file, or
    /// the sides of a generated mesh (square: left, right, bottom, top; cube: x0, x1, y0, y1,
    /// z0, z1).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    neumann: Vec<String>,
    /// Boundary groups with Robin data, alpha = 1 (comma separated; names as for --neumann).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    robin: Vec<String>,
    /// kappa per cell region of a mesh file, NAME=VALUE for each of its physical groups of
    /// cells (comma separated). The problem's source and boundary data stay; its exact
    /// solution belongs to constant kappa, so no errors are computed.
    #[arg(long, value_delimiter = ',', value_name = "NAME=VALUE")]
    kappa: Vec<String>,
    /// With Neumann data on the whole boundary and c = 0 (otherwise refused: u is fixed only up
    /// to a constant), fix the constant by mean(u_h) = 0.
    #[arg(long)]
    mean_zero: bool,
    /// Write the assembled trace matrix to this Matrix Market file.
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
        #[command(flatten)]
        only: SolveOptions,
        /// Under mpirun: how the mesh is split among the ranks [default: metis].
        #[cfg(feature = "distributed")]
        #[arg(long, value_enum)]
        partition: Option<hdg_examples::distributed::PartitionKind>,
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
        #[arg(long, value_delimiter = ',', value_parser = solver_parser())]
        only: Vec<SolverChoice>,
        /// Manufactured problem.
        #[arg(long, value_enum, default_value_t = ProblemKind::Sine)]
        problem: ProblemKind,
        /// Print JSON instead of a Markdown table.
        #[arg(long)]
        json: bool,
    },
    /// Solve the problem a TOML file describes: mesh, coefficients, boundary conditions per
    /// physical group, exact solution, solver and outputs (examples/problems/ has examples and
    /// the format).
    Run {
        /// The problem file.
        #[arg(value_name = "FILE.toml")]
        file: std::path::PathBuf,
        /// Set a key of the file, KEY=VALUE with KEY a dotted path (`discretization.order=4`,
        /// `solver.method=cg`) and VALUE a TOML value (a bare word is taken as a string);
        /// repeatable. Applied before the file is checked.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Shorthand for `--set discretization.order=K`.
        #[arg(long, short = 'k', value_parser = clap::value_parser!(u64).range(1..=MAX_ORDER as u64))]
        order: Option<u64>,
        /// Shorthand for `--set solver.backend=NAME`.
        #[arg(long, value_parser = backend_parser())]
        backend: Option<Backend>,
        /// Print one JSON object instead of the human summary.
        #[arg(long)]
        json: bool,
        /// Also print the trace solver's internals and the malloc tunables of the run.
        #[arg(long, short = 'v')]
        verbose: bool,
        /// Under mpirun: how the mesh is split among the ranks [default: metis].
        #[cfg(feature = "distributed")]
        #[arg(long, value_enum)]
        partition: Option<hdg_examples::distributed::PartitionKind>,
    },
}

/// The help of `--tol`, with the library's defaults.
fn tolerance_help() -> String {
    format!(
        "Relative residual tolerance of the trace solve [default: {:e} in f64, {:e} in f32]",
        default_tolerance(Precision::F64),
        default_tolerance(Precision::F32)
    )
}

/// The precisions by name, listed in the help.
fn precision_parser() -> impl TypedValueParser<Value = Precision> {
    PossibleValuesParser::new(Precision::ALL.map(Precision::name))
        .map(|name| name.parse::<Precision>().expect("a listed precision name"))
}

/// The trace solvers by name ([`SolverChoice::ALL`]), listed in the help.
fn solver_parser() -> impl TypedValueParser<Value = SolverChoice> {
    PossibleValuesParser::new(SolverChoice::ALL.map(SolverChoice::name))
        .map(|name| name.parse::<SolverChoice>().expect("a listed solver name"))
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

/// Progress on standard error. On a terminal: a spinner with the stage running and its time
/// (during the trace solve its iteration and residual, or that a direct factorisation runs).
/// Elsewhere (a log file, a test) plain lines only, no escape codes: the bar's draw target
/// hides itself. Once a run has taken more than a second, a line when each stage starts and
/// ends (short runs stay quiet), and during a long iterative solve a line every
/// [`StageLog::LOG_EVERY`] seconds.
struct StageLog {
    start: Instant,
    /// The spinner; None when progress is off (`--json`).
    bar: Option<ProgressBar>,
    /// The trace solver's name, for the solve stage's message.
    solver: SolverChoice,
}

impl StageLog {
    /// Seconds between the lines of a long iterative solve when the spinner is hidden.
    const LOG_EVERY: f64 = 10.0;

    fn new(enabled: bool, solver: SolverChoice) -> Self {
        let bar = enabled.then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            if !bar.is_hidden() {
                bar.enable_steady_tick(Duration::from_millis(120));
            }
            bar
        });
        StageLog { start: Instant::now(), bar, solver }
    }

    /// A line above the spinner, or on standard error where the spinner is hidden.
    fn line(&self, line: String) {
        match &self.bar {
            Some(bar) if !bar.is_hidden() => bar.println(line),
            Some(_) => eprintln!("{line}"),
            None => {}
        }
    }
}

impl Progress for StageLog {
    fn started(&mut self, stage: Stage) {
        let Some(bar) = &self.bar else { return };
        let message = match (stage, self.solver) {
            (Stage::Solve, SolverChoice::Direct) => "solve: sparse Cholesky factorisation".into(),
            (Stage::Solve, solver) => format!("solve: {solver}"),
            _ => format!("{} ...", stage.name()),
        };
        // The spinner's clock shows the stage's own time (a factorisation's, say).
        bar.reset_elapsed();
        bar.set_message(message);
        let elapsed = self.start.elapsed().as_secs_f64();
        if elapsed > 1.0 {
            self.line(format!("[{elapsed:8.2} s] {:<11} started", stage.name()));
        }
    }

    fn finished(&mut self, stage: Stage, seconds: f64) {
        let elapsed = self.start.elapsed().as_secs_f64();
        if elapsed > 1.0 || seconds > 1.0 {
            self.line(format!("[{elapsed:8.2} s] {:<11} done in {seconds:.3} s", stage.name()));
        }
    }

    fn iterations(&mut self) -> Option<hdg::core::pipeline::IterationObserver> {
        let bar = self.bar.clone()?;
        let (solver, start) = (self.solver, self.start);
        let hidden = bar.is_hidden();
        // Drawing is rate-limited here: the observer runs once per iteration.
        let every = if hidden { Self::LOG_EVERY } else { 0.1 };
        let mut last = Instant::now();
        Some(Box::new(move |iteration, residual| {
            if last.elapsed().as_secs_f64() < every {
                return;
            }
            last = Instant::now();
            let message =
                format!("solve: {solver}, iteration {iteration}, residual {residual:.2e}");
            if hidden {
                eprintln!("[{:8.2} s] {message}", start.elapsed().as_secs_f64());
            } else {
                bar.set_message(message);
            }
        }))
    }
}

impl Drop for StageLog {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Says, for an f32 solve that did not meet its tolerance, when that tolerance lies below what
/// f32 reaches (the f32 default tolerance is also about the smallest an f32 solve reaches).
fn explain_unmet_f32_tolerance(common: &Common, reached: f64) {
    let floor = default_tolerance(Precision::F32);
    if let Some(tol) = common.tol.filter(|&t| common.precision == Precision::F32 && t < floor) {
        eprintln!(
            "hdg: warning: --tol {tol:e} is below what f32 reaches (about {floor:e}); the \
             solve stopped at relative residual {reached:.3e} (use --precision f64)"
        );
    }
}

/// One solve, and what its summary says about it.
fn run_one(
    common: &Common,
    only: &SolveOptions,
    mesh: &MeshSpec,
    outputs: &SolutionOutputs,
    log: &mut StageLog,
) -> Result<(Run, Summary), CoreError> {
    let Prepared { solver, mut summary, regions, mesh_seconds, start } =
        prepare(common, only, mesh, outputs, 0)?;
    let (started, backend) = wait_for(start);
    let solver = solver.on_started(started?);
    let started = Instant::now();
    let mut run = solver.run(log).map_err(hdg::Error::into_core)?;
    let run_seconds = started.elapsed().as_secs_f64();
    let started = Instant::now();
    if let Some(path) = &only.export_matrix {
        export_matrix(&run, path)?;
    }
    if let Some(solution) = &run.solution {
        summary.notes.extend(outputs.write(solution, regions.as_deref())?);
    }
    let outputs_seconds = started.elapsed().as_secs_f64();
    let started = Instant::now();
    // The summary needs the report only: the fields and the trace matrix go now, so that
    // their freeing is counted.
    drop((run.solution.take(), run.trace_matrix.take()));
    summary.process = Some(ProcessTimes::now(
        mesh_seconds,
        backend,
        run_seconds,
        run.report.timings.total,
        outputs_seconds,
        started.elapsed().as_secs_f64(),
    ));
    Ok((run, summary))
}

/// A solve of `hdg solve` ready to run: the solver with every option, what the summary says,
/// and the mesh file's regions (for the VTU output).
struct Prepared {
    solver: hdg::Solver,
    summary: Summary,
    regions: Option<Vec<u32>>,
    /// Seconds spent building or reading the mesh.
    mesh_seconds: f64,
    /// The backend, started beside the mesh: [`wait_for`] it.
    start: hdg::BackendStart,
}

/// The backend's start, and how long it took and was waited for.
fn wait_for(
    start: hdg::BackendStart,
) -> (Result<hdg::StartedBackend, CoreError>, BackendStartTimes) {
    let waiting = Instant::now();
    let started = start.wait().map_err(hdg::Error::into_core);
    let seconds = started.as_ref().map_or(0.0, hdg::StartedBackend::seconds);
    (started, BackendStartTimes { seconds, waited: waiting.elapsed().as_secs_f64() })
}

/// Checks the options and builds the mesh, the problem and the solver of one solve, the
/// backend started on `device` (modulo the devices seen) on another thread meanwhile.
fn prepare(
    common: &Common,
    only: &SolveOptions,
    mesh: &MeshSpec,
    outputs: &SolutionOutputs,
    device: usize,
) -> Result<Prepared, CoreError> {
    // A file name of another format is refused before the solve, not after it.
    outputs.check()?;
    if let Some(path) = &only.export_matrix {
        hdg::matrix_market::check_path(path)?;
    }
    if !(0.0..=0.4).contains(&common.perturb) {
        return Err(CoreError::InvalidParameter {
            name: "perturb",
            reason: format!("{} is not in [0, 0.4]", common.perturb),
        });
    }
    let order = common.order as usize;
    mesh.check_size(order, common.backend, common.precision)?;
    let start = common.backend.start_on(device);
    let started = Instant::now();
    let built = mesh.build(common.diagonal.into(), common.perturb, common.seed)?;
    let mesh_seconds = started.elapsed().as_secs_f64();
    let mut problem =
        boundary_conditions(common, only, mesh, &built, common.problem.problem(order))?;
    problem.tau = common.tau.clone();
    problem.mean_zero = only.mean_zero;
    let exact = manufactured_formula(common.problem, built.mesh.dim(), order);
    let description = Description {
        kappa: if only.kappa.is_empty() {
            "1".into()
        } else {
            format!("per region: {}", only.kappa.join(", "))
        },
        reaction: "0".into(),
        source: format!("-div(grad u) of {exact} (kappa = 1)"),
        // The exact solution is that of constant kappa.
        exact: problem.exact.is_some().then_some(exact),
        boundary: built.boundary_description(&problem, " (data from the exact solution)"),
        mean_zero: only.mean_zero,
    };
    let tolerance = common.tol.unwrap_or(default_tolerance(common.precision));
    let settings = SolverSettings {
        choice: common.solver,
        // None: the default rule, which also accepts the precision's attainable accuracy.
        tolerance: common.tol,
        max_iterations: common.max_iterations,
    };
    let solver = program_solver(built.mesh, problem)?
        .order(order)
        .backend(common.backend)
        .precision(common.precision)
        .solver_settings(settings)
        .operator(common.operator)
        .keep_solution(outputs.any())
        .keep_operator(only.export_matrix.is_some());
    let diagonals = match mesh {
        MeshSpec::Generated { kind: MeshKind::Square, .. } => {
            format!(" ({:?} diagonals)", common.diagonal).to_lowercase()
        }
        _ => String::new(),
    };
    let perturbed = if common.perturb > 0.0 {
        format!(", vertices perturbed by {} (seed {})", common.perturb, common.seed)
    } else {
        String::new()
    };
    let summary = Summary {
        heading: format!("hdg solve: {mesh}, order {order}"),
        mesh: format!("{mesh}{diagonals}{perturbed}"),
        notes: built.summary,
        problem: description,
        tolerance,
        max_iterations: common.max_iterations,
        tau: tau_name(&common.tau),
        verbose: common.verbose,
        process: None,
        #[cfg(feature = "distributed")]
        partition: None,
    };
    Ok(Prepared { solver, summary, regions: built.regions, mesh_seconds, start })
}

/// The boundary conditions of `--bc`, `--neumann` and `--robin`, with data from the problem's
/// exact solution (kappa = 1), and the region values of `--kappa`.
fn boundary_conditions(
    common: &Common,
    only: &SolveOptions,
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
    if !(only.neumann.is_empty() && only.robin.is_empty()) {
        let exact =
            problem.exact.clone().ok_or_else(|| bad("no exact solution for the data".into()))?;
        for name in &only.neumann {
            let condition = hdg::BoundaryCondition::neumann_of(&exact, 1.0);
            problem = problem.with_boundary(built.boundary_tag(name)?, condition);
        }
        for name in &only.robin {
            let condition = hdg::BoundaryCondition::robin_of(&exact, 1.0, 1.0);
            problem = problem.with_boundary(built.boundary_tag(name)?, condition);
        }
    }
    if !only.kappa.is_empty() {
        let (Some(groups), Some(regions)) = (&built.file, &built.regions) else {
            return Err(bad("--kappa NAME=VALUE names cell regions of a mesh file".into()));
        };
        let mut values = std::collections::BTreeMap::new();
        for item in &only.kappa {
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

/// The `--set` overrides of `hdg run`, with `--order` and `--backend` as two more.
fn overrides(
    set: &[String],
    order: Option<u64>,
    backend: Option<Backend>,
) -> Result<Vec<(String, String)>, CoreError> {
    let mut pairs = Vec::new();
    for item in set {
        let (key, value) = item.split_once('=').ok_or_else(|| CoreError::InvalidParameter {
            name: "--set",
            reason: format!("'{item}' is not KEY=VALUE (say, discretization.order=4)"),
        })?;
        pairs.push((key.trim().to_string(), value.trim().to_string()));
    }
    if let Some(order) = order {
        pairs.push(("discretization.order".into(), order.to_string()));
    }
    if let Some(backend) = backend {
        pairs.push(("solver.backend".into(), format!("\"{}\"", backend.name())));
    }
    Ok(pairs)
}

fn rate(coarse: f64, fine: f64) -> f64 {
    (coarse / fine).log2()
}

/// The command line. Under mpirun (feature `distributed`) only rank 0 prints what the parser
/// says (an error, `--help`, `--version`); every rank exits with its status.
fn parse() -> Cli {
    #[cfg(feature = "distributed")]
    if hdg_examples::distributed::launched_by_mpi()
        && hdg_examples::distributed::launcher_rank() != 0
    {
        return Cli::try_parse().unwrap_or_else(|e| std::process::exit(e.exit_code()));
    }
    Cli::parse()
}

fn main() -> ExitCode {
    hdg_examples::process_clock::start();
    let cli = parse();
    #[cfg(feature = "distributed")]
    {
        if hdg_examples::distributed::launched_by_mpi() {
            return over_mpi::main(&cli);
        }
        if let Command::Solve { partition: Some(_), .. } | Command::Run { partition: Some(_), .. } =
            &cli.command
        {
            eprintln!("hdg: error: --partition splits a run over MPI ranks: start hdg with mpirun");
            return ExitCode::from(2);
        }
    }
    // Each backend's malloc tunables (huge pages for CUDA, freed memory kept for reuse on the
    // CPU), chosen by measurement (hdg_examples::malloc_tunables).
    if let Command::Solve { common, .. } | Command::Convergence { common, .. } = &cli.command {
        hdg_examples::malloc_tunables::enable(common.backend);
    }
    let result = match &cli.command {
        Command::Solve { mesh, output, plot, common, only, .. } => {
            let mut log = StageLog::new(!common.json, common.solver);
            let outputs = SolutionOutputs { vtu: output.clone(), png: plot.clone() };
            run_one(common, only, mesh, &outputs, &mut log).map(|(run, summary)| {
                drop(log);
                if common.json {
                    println!("{}", summary_json(&run, &summary));
                } else {
                    print_report(&run, &summary);
                }
                // Converged means the true residual met the tolerance (hdg_linalg::StoppingRule).
                if !run.report.solve.converged {
                    explain_unmet_f32_tolerance(common, run.report.solve.relative_residual);
                }
                run.report.solve.converged
            })
        }
        Command::Convergence { levels, start, dim, plot, common } => {
            let kind = if *dim == 3 { MeshKind::Cube } else { MeshKind::Square };
            convergence(common, kind, *levels as usize, *start as usize, plot.as_deref())
        }
        Command::Solvers { mesh, order, tol, max_iterations, only, problem, json } => {
            solvers(mesh, *order as usize, *tol, *max_iterations, only, *problem, *json)
        }
        Command::Run { file, set, order, backend, json, verbose, .. } => {
            overrides(set, *order, *backend)
                .and_then(|pairs| ProblemFile::load_with(file, &pairs))
                .and_then(|problem| {
                    hdg_examples::malloc_tunables::enable(problem.backend());
                    let mut log = StageLog::new(!*json, problem.solver());
                    let solved = problem.solve(&mut log);
                    drop(log);
                    let mut solved = solved?;
                    solved.summary.verbose = *verbose;
                    solved.finish(*json)
                })
        }
    };
    explain(&result, &cli.command);
    ExitCode::from(status(&result))
}

/// The exit status of a run: 0 when the trace solve converged, 3 when it did not, 4 out of
/// device memory (for scripts that look for the largest problem that fits), 2 for any other
/// failure.
fn status(result: &Result<bool, CoreError>) -> u8 {
    match result {
        Ok(true) => 0,
        Ok(false) => 3,
        Err(CoreError::OutOfDeviceMemory { .. }) => 4,
        Err(_) => 2,
    }
}

/// Says on standard error why a run did not succeed.
fn explain(result: &Result<bool, CoreError>, command: &Command) {
    match result {
        Ok(true) => {}
        Ok(false) => eprintln!("hdg: warning: the trace solve did not reach the tolerance"),
        Err(e) => {
            // The library names its own options; say where the program takes them.
            let option = match command {
                Command::Run { .. } => "`mean_zero = true` in [equation]",
                _ => "--mean-zero",
            };
            eprintln!("hdg: error: {}", e.to_string().replace("Problem::mean_zero", option));
        }
    }
}

/// `hdg solve` and `hdg run` over the MPI ranks that mpirun started (feature `distributed`;
/// `hdg_examples::distributed` says what differs from a run on one process).
#[cfg(feature = "distributed")]
mod over_mpi {
    use super::*;
    use hdg::distributed::{self, Communicator};
    use hdg_examples::distributed::{
        agree_status, check_operator, launcher_rank, refuse, summary_run, write_vtu, PartitionKind,
    };

    /// Starts MPI, runs the command over the ranks, and returns the status every rank agrees
    /// on; the rank whose failure it is says why.
    pub fn main(cli: &Cli) -> ExitCode {
        // The malloc tunables run the program again (malloc_tunables), which must come before
        // MPI starts: a process that exec()s after MPI_Init leaves MPI unable to start again.
        match &cli.command {
            Command::Solve { common, .. } => hdg_examples::malloc_tunables::enable(common.backend),
            Command::Run { file, set, order, backend, .. } => {
                let problem = overrides(set, *order, *backend)
                    .and_then(|pairs| ProblemFile::load_with(file, &pairs));
                if let Ok(problem) = problem {
                    hdg_examples::malloc_tunables::enable(problem.backend());
                }
            }
            _ => {}
        }
        let universe = match distributed::initialize() {
            Ok(universe) => universe,
            Err(e) => {
                if launcher_rank() == 0 {
                    eprintln!("hdg: error: {e}");
                }
                return ExitCode::from(2);
            }
        };
        let world = universe.world();
        let one_process = |command: &str| CoreError::InvalidParameter {
            name: "command",
            reason: format!(
                "hdg {command} runs on one process: start it without mpirun (over MPI ranks: \
                 hdg solve, hdg run)"
            ),
        };
        let result = match &cli.command {
            Command::Solve { mesh, output, plot, common, only, partition } => {
                let outputs = SolutionOutputs { vtu: output.clone(), png: plot.clone() };
                solve(&world, mesh, &outputs, common, only, partition.unwrap_or_default())
            }
            Command::Run { file, set, order, backend, json, verbose, partition } => {
                let partition = partition.unwrap_or_default();
                run(&world, file, set, *order, *backend, *json, *verbose, partition)
            }
            Command::Convergence { .. } => Err(one_process("convergence")),
            Command::Solvers { .. } => Err(one_process("solvers")),
        };
        let (status, speaker) = agree_status(&world, status(&result));
        if speaker {
            explain(&result, &cli.command);
        }
        ExitCode::from(status)
    }

    /// `hdg solve` over the ranks: rank 0 prints the summary or the JSON.
    fn solve(
        world: &Communicator,
        mesh: &MeshSpec,
        outputs: &SolutionOutputs,
        common: &Common,
        only: &SolveOptions,
        partition: PartitionKind,
    ) -> Result<bool, CoreError> {
        let rank0 = distributed::rank(world) == 0;
        if outputs.png.is_some() {
            let instead = "write --output FILE.vtu (a .pvtu, one piece per rank) or run without \
                           mpirun";
            return Err(refuse("--plot draws the whole solution", instead));
        }
        if only.export_matrix.is_some() {
            let instead = "run without mpirun to export it";
            return Err(refuse("--export-matrix writes the whole trace matrix", instead));
        }
        check_operator(common.operator)?;
        if let Some(path) = &outputs.vtu {
            distributed::output::pvtu_path(path).map_err(hdg::Error::into_core)?;
        }
        // The outputs are written here, not by `prepare`'s one-process writers.
        let device = distributed::node_rank(world);
        let Prepared { solver, mut summary, regions, mesh_seconds, start } =
            prepare(common, only, mesh, &SolutionOutputs::default(), device)?;
        // A start that failed on one rank fails on all (none waits in the run's collectives).
        let (started, backend) = wait_for(start);
        let solver = solver.on_started(hdg::core::distributed::agree(world, started)?);
        // The pieces need each rank's fields on the host; without them they stay on the device.
        let solver = solver.keep_solution(outputs.vtu.is_some());
        let mut log = StageLog::new(rank0 && !common.json, common.solver);
        let started = Instant::now();
        let run = solver
            .run_distributed_with(world, &partition.partitioner(), &mut log)
            .map_err(hdg::Error::into_core)?;
        let run_seconds = started.elapsed().as_secs_f64();
        drop(log);
        let started = Instant::now();
        if let Some(path) = &outputs.vtu {
            summary.notes.push(write_vtu(world, &run, path, regions.as_deref())?);
        }
        let outputs_seconds = started.elapsed().as_secs_f64();
        let (summarized, partitioned) = summary_run(world, &run, partition);
        summary.partition = Some(partitioned);
        let started = Instant::now();
        drop(run);
        let run = summarized;
        // Rank 0's account: the partitioning is part of the run around the pipeline.
        summary.process = Some(ProcessTimes::now(
            mesh_seconds,
            backend,
            run_seconds,
            run.report.timings.total,
            outputs_seconds,
            started.elapsed().as_secs_f64(),
        ));
        if rank0 {
            if common.json {
                println!("{}", summary_json(&run, &summary));
            } else {
                print_report(&run, &summary);
            }
            if !run.report.solve.converged {
                explain_unmet_f32_tolerance(common, run.report.solve.relative_residual);
            }
        }
        Ok(run.report.solve.converged)
    }

    /// `hdg run FILE` over the ranks: rank 0 prints the summary or the JSON and writes the
    /// JSON report.
    #[allow(clippy::too_many_arguments)]
    fn run(
        world: &Communicator,
        file: &std::path::Path,
        set: &[String],
        order: Option<u64>,
        backend: Option<Backend>,
        json: bool,
        verbose: bool,
        partition: PartitionKind,
    ) -> Result<bool, CoreError> {
        let rank0 = distributed::rank(world) == 0;
        let problem = ProblemFile::load_with(file, &overrides(set, order, backend)?)?;
        let mut log = StageLog::new(rank0 && !json, problem.solver());
        let solved = problem.solve_distributed(world, partition, &mut log);
        drop(log);
        let (mut solved, run) = solved?;
        solved.summary.verbose = verbose;
        solved.finish_distributed(world, &run, json)
    }
}

fn convergence(
    common: &Common,
    kind: MeshKind,
    levels: usize,
    start: usize,
    plot: Option<&std::path::Path>,
) -> Result<bool, CoreError> {
    if let Some(path) = plot {
        hdg_examples::plot::check_svg_path(path)?;
    }
    let bar = (!common.json)
        .then(|| ProgressBar::with_draw_target(Some(levels as u64), ProgressDrawTarget::stderr()));
    let mut rows = Vec::new();
    let mut all_converged = true;
    for level in 0..levels {
        let n = start << level;
        let mesh = MeshSpec::Generated { kind, n };
        let mut log = StageLog::new(false, common.solver);
        let outputs = SolutionOutputs::default();
        let report = run_one(common, &SolveOptions::default(), &mesh, &outputs, &mut log)?.0.report;
        all_converged &= report.solve.converged;
        rows.push((n, report));
        if let Some(b) = &bar {
            b.inc(1);
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let dim = if kind == MeshKind::Cube { 3 } else { 2 };
    let Some(errors) = rows.iter().map(|(_, r)| r.errors).collect::<Option<Vec<_>>>() else {
        return Err(CoreError::InvalidParameter {
            name: "convergence",
            reason: "a run had no exact solution to measure errors against".into(),
        });
    };
    if let Some(path) = plot {
        use hdg_examples::plot::{convergence_svg, Series};
        let h: Vec<f64> = rows.iter().map(|(n, _)| 1.0 / *n as f64).collect();
        let column = |f: fn(&hdg::ErrorNorms) -> f64| errors.iter().map(f).collect::<Vec<_>>();
        let (u, q, u_star) = (column(|e| e.u), column(|e| e.q), column(|e| e.u_star));
        let k = common.order as f64;
        let title = format!(
            "{}, order {}, {}",
            if kind == MeshKind::Cube { "unit cube" } else { "unit square" },
            common.order,
            manufactured_formula(common.problem, dim, common.order as usize)
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
            "hdg convergence: -div(grad u) = f on the {}, {} (f and the data from it), order {}, \
             {:?} diagonals, perturbation {}, {}",
            match kind {
                MeshKind::Square => "unit square, triangles",
                MeshKind::Cube => "unit cube, tetrahedra",
            },
            manufactured_formula(common.problem, dim, common.order as usize),
            common.order,
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
