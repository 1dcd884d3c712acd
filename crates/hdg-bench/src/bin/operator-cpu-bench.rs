//! The pipeline's constant operators on the CPU: the backend's panel loop
//! (`hdg_backend_cpu::constant_operator`) against faer's GEMM on the same panels, all threads.
//!
//!     cargo run --release -p hdg-examples --bin operator-cpu-bench -- [--n 100000,1000000] [--reps 5]
//!
//! C = A B with beta = 0, B of k rows and n element columns (element index fastest, the layout
//! of the generated CUDA kernels), f64 and f32, for the operators of
//! `hdg_bench::operators` (face 0 only). Times are the median of `--reps` runs after one
//! warm-up; both results are checked against each other (relative to the sum of magnitudes).
//! Cases whose panels exceed `--max-bytes` (default 4e9) are skipped. Prints a Markdown table.
use std::error::Error;
use std::time::Instant;

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use hdg_backend_cpu::constant_operator::{PanelOperator, PanelReal};
use hdg_core::constant_operator::{Beta, ConstOperator};

const USAGE: &str =
    "usage: operator-cpu-bench [--n N1,N2,..] [--reps R] [--max-bytes B] [--only NAME,..]";

fn main() {
    if let Err(e) = run() {
        eprintln!("operator-cpu-bench: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn Error>> {
    let (mut sizes, mut reps, mut max_bytes) = (vec![100_000usize, 1_000_000], 5usize, 4e9);
    let mut only: Vec<String> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(USAGE);
        match arg.as_str() {
            "--n" => {
                sizes = value()?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()
                    .map_err(|_| USAGE)?
            }
            "--reps" => reps = value()?.parse().map_err(|_| USAGE)?,
            "--max-bytes" => max_bytes = value()?.parse().map_err(|_| USAGE)?,
            "--only" => only = value()?.split(',').map(String::from).collect(),
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => return Err(format!("unknown argument '{other}'\n{USAGE}").into()),
        }
    }
    if reps == 0 {
        return Err(USAGE.into());
    }
    println!("threads: {}, median of {reps}", rayon::current_num_threads());
    println!();
    println!("| operator | prec | n | m x k | nnz | ours ms | GFLOP/s (useful) | GB/s | faer ms | faer / ours |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for op in hdg_bench::operators::pipeline_operators(false, false)? {
        if !only.is_empty() && !only.iter().any(|o| o == op.name()) {
            continue;
        }
        for &n in &sizes {
            for bytes in [8usize, 4] {
                if ((op.m() + op.k()) * n * bytes) as f64 > max_bytes {
                    println!("| {} | f{} | {n:.0e} | {} x {} | {} | skipped: panels over --max-bytes |||||", op.name(), bytes * 8, op.m(), op.k(), op.nnz());
                    continue;
                }
                let row = if bytes == 8 {
                    case::<f64>(&op, n, reps)?
                } else {
                    case::<f32>(&op, n, reps)?
                };
                println!("{row}");
            }
        }
    }
    Ok(())
}

/// One operator, precision and panel width: the Markdown row.
fn case<T: PanelReal + faer::traits::ComplexField>(
    op: &ConstOperator,
    n: usize,
    reps: usize,
) -> Result<String, Box<dyn Error>> {
    let (m, k) = (op.m(), op.k());
    let panel = PanelOperator::<T>::new(op)?;
    let a: Vec<T> = op.values().iter().map(|&v| T::from_f64_lossy(v)).collect();
    let b: Vec<T> =
        (0..k * n).map(|i| T::from_f64_lossy(((i * 7919) % 1000) as f64 / 500.0 - 1.0)).collect();
    let mut ours = vec![T::zero(); m * n];
    let mut theirs = vec![T::zero(); m * n];
    let t_ours =
        median(reps, || panel.apply(Beta::Zero, n, &b, n, &mut ours, n).map_err(Into::into))?;
    let t_faer = median(reps, || {
        let lhs = MatRef::from_row_major_slice(&a, m, k);
        let rhs = MatRef::from_row_major_slice(&b, k, n);
        let dst = MatMut::from_row_major_slice_mut(&mut theirs, m, n);
        matmul(dst, Accum::Replace, lhs, rhs, T::one(), Par::rayon(0));
        Ok(())
    })?;
    // Both against each other, relative to the sum of magnitudes of each output.
    let tol = if std::mem::size_of::<T>() == 8 { 1e-12 } else { 1e-4 };
    for i in (0..m).step_by(m.div_ceil(7)) {
        for e in (0..n).step_by(n.div_ceil(101)) {
            let scale: f64 = (0..k).map(|j| (a[i * k + j] * b[j * n + e]).abs().as_f64()).sum();
            let diff = (ours[i * n + e] - theirs[i * n + e]).abs().as_f64();
            if diff > tol * scale.max(f64::MIN_POSITIVE) {
                return Err(format!(
                    "{}: C[{i}][{e}] ours and faer's differ by {diff:e}",
                    op.name()
                )
                .into());
            }
        }
    }
    let bytes = ((m + k) * n * std::mem::size_of::<T>()) as f64;
    let flops = 2.0 * op.nnz() as f64 * n as f64;
    Ok(format!(
        "| {} | f{} | {n:.0e} | {m} x {k} | {} | {:.3} | {:.1} | {:.1} | {:.3} | {:.2} |",
        op.name(),
        8 * std::mem::size_of::<T>(),
        op.nnz(),
        t_ours * 1e3,
        flops / t_ours * 1e-9,
        bytes / t_ours * 1e-9,
        t_faer * 1e3,
        t_faer / t_ours,
    ))
}

/// Median seconds of `reps` runs after one warm-up.
fn median(
    reps: usize,
    mut f: impl FnMut() -> Result<(), Box<dyn Error>>,
) -> Result<f64, Box<dyn Error>> {
    f()?;
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let start = Instant::now();
        f()?;
        times.push(start.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Ok(times[reps / 2])
}
