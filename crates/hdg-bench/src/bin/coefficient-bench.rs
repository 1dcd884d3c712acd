//! coefficient-bench: what coefficients that vary inside cells, and Neumann/Robin faces, cost
//! in the element stages, against constant coefficients (per-cell kappa and c, Dirichlet).
//!
//! For each dimension (2: triangles of a perturbed unit square, 3: Kuhn tetrahedra of a
//! perturbed unit cube) and order k, on the CPU backend (and, built with `cuda`, the CUDA
//! backend for the variants it runs), in f64:
//!
//! - `constant`: kappa and c one value per cell (the reference-matrix path);
//! - `kappa(x)`: kappa and c functions of x (weighted mass matrices by quadrature);
//! - `tensor`: an anisotropic SPD kappa(x) and c(x);
//! - `mixed`: constant coefficients with Neumann and Robin faces (`--bc mixed`).
//!
//! Per variant: the coefficient evaluation at quadrature points (inside
//! `Discretization::new`), the condensation (median of `--samples` runs of
//! `LocalSolver::condense`, cells/s) and the assembly (median, with the Neumann/Robin terms
//! where there are any). Progress goes to stderr, the table to stdout.
//!
//! Usage: coefficient-bench [--cells2 20000] [--cells3 3000] [--dims 2,3]
//!        [--orders 1,...,8] [--samples 3] [--backends cpu,cuda]
use std::time::Instant;

use hdg_backend_cpu::CpuBackend;
use hdg_core::{Assembler, Coefficient, Discretization, Manufactured, Problem, Result};
use hdg_mesh::Mesh;

struct Args {
    cells: [f64; 2],
    dims: Vec<usize>,
    orders: Vec<usize>,
    samples: usize,
    backends: Vec<String>,
}

fn parse() -> std::result::Result<Args, String> {
    let mut args = Args {
        cells: [2e4, 3e3],
        dims: vec![2, 3],
        orders: (1..=8).collect(),
        samples: 3,
        backends: vec!["cpu".into()],
    };
    let mut it = std::env::args().skip(1);
    let list = |v: String| -> std::result::Result<Vec<usize>, String> {
        v.split(',').map(|s| s.trim().parse().map_err(|_| format!("bad number '{s}'"))).collect()
    };
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let number = || value.parse::<f64>().map_err(|_| format!("{flag}: bad number '{value}'"));
        match flag.as_str() {
            "--cells2" => args.cells[0] = number()?,
            "--cells3" => args.cells[1] = number()?,
            "--dims" => args.dims = list(value.clone())?,
            "--orders" => args.orders = list(value.clone())?,
            "--samples" => args.samples = number()?.max(1.0) as usize,
            "--backends" => args.backends = value.split(',').map(str::to_string).collect(),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(args)
}

const VARIANTS: [&str; 4] = ["constant", "kappa(x)", "tensor", "mixed"];

fn problem(variant: &str, mesh: &Mesh) -> Result<Problem> {
    let n_cells = mesh.n_cells();
    let mut p = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
    p.kappa =
        Coefficient::PerCell((0..n_cells).map(|c| 1.0 + 0.5 * ((c as f64) * 0.37).sin()).collect());
    p.reaction =
        Coefficient::PerCell((0..n_cells).map(|c| 0.5 + 0.5 * ((c as f64) * 0.11).cos()).collect());
    match variant {
        "kappa(x)" => {
            p.kappa = Coefficient::field(|x| 1.0 + x[0] * x[0] + 0.5 * x[1]);
            p.reaction = Coefficient::field(|x| 1.0 + x[0] * x[1]);
        }
        "tensor" => {
            p.kappa = Coefficient::tensor(|x, k| {
                let d = x.len();
                k.fill(0.1);
                for r in 0..d {
                    k[r * d + r] = 1.0 + x[r] * x[r];
                }
            });
            p.reaction = Coefficient::field(|x| 1.0 + x[0] * x[1]);
        }
        "mixed" => p = p.with_mixed_boundary(mesh.dim(), 1.0)?,
        _ => {}
    }
    Ok(p)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Seconds of the coefficient evaluation (the discretization set-up with it, less without),
/// the condensation and the assembly, medians.
fn time_variant<B: Assembler<f64>>(
    backend: &B,
    mesh: &Mesh,
    problem: &Problem,
    k: usize,
    samples: usize,
) -> Result<[f64; 3]> {
    let start = Instant::now();
    let disc = Discretization::<f64>::new(mesh, problem, k)?;
    let setup = start.elapsed().as_secs_f64();
    let prep = backend.prepare(&disc)?;
    let mut condense = Vec::new();
    let mut assemble = Vec::new();
    for _ in 0..samples {
        let start = Instant::now();
        let condensed = backend.condense(&disc, &prep)?;
        condense.push(start.elapsed().as_secs_f64());
        let start = Instant::now();
        let assembled = backend.assemble(&disc, &prep, &condensed)?;
        assemble.push(start.elapsed().as_secs_f64());
        drop(assembled);
    }
    Ok([setup, median(condense), median(assemble)])
}

fn run_backend<B: Assembler<f64>>(backend: &B, name: &str, args: &Args) -> Result<()> {
    println!(
        "| backend | dim | k | cells | variant | set-up s | condense s | cells/s | vs constant \
         | assemble s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for &dim in &args.dims {
        let mesh = hdg_bench::stages::element_benchmark_mesh(dim, args.cells[dim - 2])?;
        for &k in &args.orders {
            let mut constant = f64::NAN;
            for variant in VARIANTS {
                eprintln!("{name} {dim}D k = {k} {variant} ({} cells) ...", mesh.n_cells());
                let problem = problem(variant, &mesh)?;
                match time_variant(backend, &mesh, &problem, k, args.samples) {
                    Ok([setup, condense, assemble]) => {
                        if variant == "constant" {
                            constant = condense;
                        }
                        println!(
                            "| {name} | {dim} | {k} | {} | {variant} | {setup:.3} | {condense:.4} \
                             | {:.3e} | {:.2}x | {assemble:.4} |",
                            mesh.n_cells(),
                            mesh.n_cells() as f64 / condense,
                            condense / constant
                        );
                    }
                    Err(e) => println!(
                        "| {name} | {dim} | {k} | {} | {variant} | - | - | - | - | refused: {e} |",
                        mesh.n_cells()
                    ),
                }
            }
        }
    }
    Ok(())
}

fn main() {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("coefficient-bench: {e}");
            std::process::exit(2);
        }
    };
    for name in args.backends.clone() {
        let result = match name.as_str() {
            "cpu" => run_backend(&CpuBackend::new(), "cpu", &args),
            #[cfg(feature = "cuda")]
            "cuda" => {
                hdg_backend_cuda::CudaBackend::new().and_then(|b| run_backend(&b, "cuda", &args))
            }
            other => {
                eprintln!("coefficient-bench: backend '{other}' is not in this build");
                std::process::exit(2);
            }
        };
        if let Err(e) = result {
            eprintln!("coefficient-bench: {e}");
            std::process::exit(1);
        }
    }
}
