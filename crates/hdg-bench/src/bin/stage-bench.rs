//! Per-stage measurements of the CPU backend at several orders, with the baselines measured in
//! the same run: memory-copy bandwidth, CSR SpMV on the same matrix (Rayon and `sprs`), faer
//! on the same small dense work (`hdg_bench::stages`).
use std::process::ExitCode;

use clap::Parser;
use hdg_core::{CoreError, MAX_ORDER};

/// Measure every stage on the CPU for several orders, with baselines from the same run.
#[derive(Parser)]
#[command(name = "stage-bench", version)]
struct Args {
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
    #[arg(long, default_value_t = hdg::default_tolerance(hdg::Precision::F64), value_parser = parse_tolerance)]
    tol: f64,
    /// Print JSON instead of Markdown tables.
    #[arg(long)]
    json: bool,
}

fn parse_tolerance(s: &str) -> Result<f64, String> {
    let t: f64 = s.parse().map_err(|_| format!("'{s}' is not a number"))?;
    hdg::check_tolerance(t).map(|()| t).map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let a = Args::parse();
    match bench(&a.orders, a.dofs, a.repeats, !a.no_solve, a.tol, a.json) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stage-bench: error: {e}");
            ExitCode::from(2)
        }
    }
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
    let options = hdg_bench::stages::BenchOptions {
        orders: orders.to_vec(),
        target_dofs: dofs,
        spmv_repeats: repeats,
        solve,
        tolerance: tol,
    };
    let (copy, rows) = hdg_bench::stages::run(&options, |line| eprintln!("{line}"))?;
    let dense = hdg_bench::stages::dense_comparison(orders, 20_000);
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
