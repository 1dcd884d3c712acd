//! `hdg`: solve Poisson problems with the HDG method from the command line.
use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand, ValueEnum};
use hdg_core::{CoreError, PipelineReport, Progress, Stage, MAX_ORDER};
use hdg_examples::{report_json, solve_cpu, MeshSpec, ProblemKind, SolveSettings, SolverKind};
use hdg_mesh::Diagonal;

#[derive(Parser)]
#[command(
    name = "hdg",
    version,
    about = "High-order HDG solver for -div(kappa grad u) + c u = f"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum BackendKind {
    Cpu,
    Cuda,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Precision {
    F64,
    F32,
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
    #[arg(long, value_enum, default_value_t = Precision::F64)]
    precision: Precision,
    /// Manufactured problem (exact solution known).
    #[arg(long, value_enum, default_value_t = ProblemKind::Sine)]
    problem: ProblemKind,
    /// Relative residual tolerance of the trace solve [default: 1e-12 in f64, 1e-6 in f32].
    #[arg(long, value_parser = parse_tolerance)]
    tol: Option<f64>,
    /// Iteration cap of the trace solve.
    #[arg(long, default_value_t = 100_000)]
    max_iterations: usize,
    /// Krylov method.
    #[arg(long, value_enum, default_value_t = SolverKind::PcgJacobi)]
    solver: SolverKind,
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
}

#[derive(Subcommand)]
enum Command {
    /// Solve one problem and print a summary.
    Solve {
        /// Mesh: square:N (unit square, N x N squares, 2 N^2 triangles).
        #[arg(long)]
        mesh: MeshSpec,
        #[command(flatten)]
        common: Common,
    },
    /// Solve on a sequence of meshes that halve h and print errors and observed rates.
    Convergence {
        /// Number of meshes.
        #[arg(long, value_parser = clap::value_parser!(u64).range(2..=12))]
        levels: u64,
        /// Squares per side of the coarsest mesh.
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..))]
        start: u64,
        #[command(flatten)]
        common: Common,
    },
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
        StageLog {
            start: Instant::now(),
            spinner,
            enabled,
        }
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

fn run_one(
    common: &Common,
    mesh: &MeshSpec,
    log: &mut StageLog,
) -> Result<PipelineReport, CoreError> {
    if common.backend == BackendKind::Cuda {
        hdg_backend_cuda::availability()?;
    }
    if !(0.0..=0.4).contains(&common.perturb) {
        return Err(CoreError::InvalidParameter {
            name: "perturb",
            reason: format!("{} is not in [0, 0.4]", common.perturb),
        });
    }
    let order = common.order as usize;
    let built = mesh.build(common.diagonal.into(), common.perturb, common.seed)?;
    let problem = common.problem.problem(order);
    let tolerance = common.tol.unwrap_or(match common.precision {
        Precision::F64 => 1e-12,
        Precision::F32 => 1e-6,
    });
    let settings = SolveSettings {
        order,
        tolerance,
        max_iterations: common.max_iterations,
        solver: common.solver,
    };
    match common.precision {
        Precision::F64 => solve_cpu::<f64>(&built, &problem, &settings, log),
        Precision::F32 => solve_cpu::<f32>(&built, &problem, &settings, log),
    }
}

fn print_summary(mesh: &MeshSpec, common: &Common, r: &PipelineReport) {
    println!(
        "hdg solve: square:{} ({:?} diagonals), order {}, problem {:?}",
        mesh.n, common.diagonal, r.order, common.problem
    );
    println!(
        "  backend        {} ({} threads), {}",
        r.backend,
        rayon::current_num_threads(),
        r.precision
    );
    println!("  cells          {}", r.cells);
    println!("  trace dofs     {}", r.trace_dofs);
    println!(
        "  trace solve    {}: {} iterations, relative residual {:.2e}{}",
        r.solver,
        r.solve.iterations,
        r.solve.relative_residual,
        if r.solve.converged {
            ""
        } else {
            "  (NOT CONVERGED)"
        }
    );
    if let Some(e) = r.errors {
        println!(
            "  L2 errors      u {:.3e}   q {:.3e}   u* {:.3e}",
            e.u, e.q, e.u_star
        );
    }
    let t = &r.timings;
    println!(
        "  time [s]       setup {:.3}  condense {:.3}  assemble {:.3}  solve {:.3}  recover {:.3}  postprocess {:.3}  total {:.3}",
        t.setup, t.condense, t.assemble, t.solve, t.recover, t.postprocess, t.total
    );
}

fn rate(coarse: f64, fine: f64) -> f64 {
    (coarse / fine).log2()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Solve { mesh, common } => {
            let mut log = StageLog::new(!common.json);
            run_one(common, mesh, &mut log).map(|report| {
                drop(log);
                if common.json {
                    println!("{}", report_json(&report));
                } else {
                    print_summary(mesh, common, &report);
                }
                report.solve.converged
            })
        }
        Command::Convergence {
            levels,
            start,
            common,
        } => convergence(common, *levels as usize, *start as usize),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("hdg: warning: the trace solve did not reach the tolerance");
            ExitCode::from(3)
        }
        Err(e) => {
            eprintln!("hdg: error: {e}");
            ExitCode::from(2)
        }
    }
}

fn convergence(common: &Common, levels: usize, start: usize) -> Result<bool, CoreError> {
    let bar = (!common.json && std::io::stderr().is_terminal())
        .then(|| indicatif::ProgressBar::new(levels as u64));
    let mut rows = Vec::new();
    let mut all_converged = true;
    for level in 0..levels {
        let mesh = MeshSpec { n: start << level };
        let mut log = StageLog::new(false);
        let report = run_one(common, &mesh, &mut log)?;
        all_converged &= report.solve.converged;
        rows.push((mesh.n, report));
        if let Some(b) = &bar {
            b.inc(1);
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let errors: Vec<_> = rows
        .iter()
        .map(|(_, r)| {
            r.errors
                .expect("manufactured problems have exact solutions")
        })
        .collect();
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
            "hdg convergence: order {}, problem {:?}, {:?} diagonals, perturbation {}, {}",
            common.order,
            common.problem,
            common.diagonal,
            common.perturb,
            match common.precision {
                Precision::F64 => "f64",
                Precision::F32 => "f32",
            }
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
        println!(
            "expected rates: u, q: {}; u*: {}",
            common.order + 1,
            common.order + 2
        );
    }
    Ok(all_converged)
}
