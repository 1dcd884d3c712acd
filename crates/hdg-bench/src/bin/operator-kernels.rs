//! Writes the pipeline's constant operators and their generated CUDA kernels for the device
//! benchmark (`crates/hdg-backend-cuda/scripts/operator_bench.py`; BENCHMARKS.md, section
//! 'Constant operators').
//!
//!     cargo run --release -p hdg-examples --bin operator-kernels -- --out target/operator-kernels
//!     cargo run --release -p hdg-examples --bin operator-kernels -- --out DIR --beta 1
//!
//! For triangles and tetrahedra at k = 1..=8: the volume basis at the error quadrature points
//! (`ElementTables::error_basis`, points x n, named `tri-k3-error-basis`) and the reference
//! face trace matrices of orientation 0 (`face_trace(f, 0)`, n x n_f, `tet-k5-face-trace-f0`);
//! with `--post` also the postprocessing basis at the error points (`tri-k6-error-basis-post`).
//! Each operator goes to `ops/NAME.json` (`{name, m, k, values (row-major f64), nnz}`) with its
//! kernels, f32 and f64, unrolled, unrolled on pairs of columns and row-split (chunks of
//! `--rows-per-thread` rows, default `codegen::DEFAULT_ROWS_PER_THREAD`; a list such as 8,16,32
//! exports one row-split kernel per entry, the default always among them, and
//! `codegen::choose_narrow`'s variant where it is another), in
//! `kernels/KERNEL.cu` (`C = A B`, or with `--beta 1` `C = A B + C`), and
//! `manifest.json` lists them with their launch geometry and the automatic choice
//! (`codegen::choose`; where `codegen::choose_narrow` differs, `chosen_narrow` marks the kernel
//! that the backend takes on panels narrower than the device's resident threads,
//! `codegen::wide_panel`; and `codegen::gemm_wins`: cuBLAS in place of the kernels once
//! loaded); `checks/` holds, per operator and precision, a panel and the CPU's
//! result for it, which every kernel must reproduce to the bit (`operator_bench.py --bitwise`).
//! With `--fixed-strides N,N,..` each precision also gets, per N, the kernels of the automatic
//! choice (`choose` and `choose_narrow`) with the leading dimensions N compiled in
//! (`codegen::Strides::Fixed`, what `DeviceOperator::compile_for_panel` compiles at run time),
//! marked `fixed_n`: `operator_bench.py` times them on panels of n = N only.
//! Operators with more than `--max-entries` entries (default 20000: the
//! tetrahedron error bases from k = 6, whose unrolled kernels would be megabytes of source)
//! are listed under `skipped` and not written: the output is then about 53 MB (beta = 0).
use std::error::Error;
use std::path::{Path, PathBuf};

use hdg_backend_cpu::constant_operator::{PanelOperator, PanelReal};
use hdg_backend_cuda::codegen::{
    choices, compiled_beats_gemm, fixed_choices, gemm_wins, generate_with, Beta, ConstOperator,
    GeneratedKernel, Precision, Strides, Variant, BLOCK_X, DEFAULT_ROWS_PER_THREAD,
};
use hdg_core::real::convert_slice;
use serde_json::{json, Value};

const USAGE: &str =
    "usage: operator-kernels --out DIR [--max-entries N] [--beta 0|1] [--rows-per-thread R,R,..] [--post] [--fixed-strides N,N,..]";

fn main() {
    if let Err(e) = run() {
        eprintln!("operator-kernels: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn Error>> {
    let mut out: Option<PathBuf> = None;
    let mut max_entries = 20_000usize;
    let mut beta = Beta::Zero;
    let mut rows_per_thread = vec![DEFAULT_ROWS_PER_THREAD];
    let mut post_bases = false;
    let mut fixed_strides = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--out" => out = Some(args.next().ok_or(USAGE)?.into()),
            "--max-entries" => {
                max_entries = args.next().ok_or(USAGE)?.parse().map_err(|_| USAGE)?;
            }
            "--beta" => {
                beta = match args.next().as_deref() {
                    Some("0") => Beta::Zero,
                    Some("1") => Beta::One,
                    _ => return Err(USAGE.into()),
                };
            }
            "--rows-per-thread" => {
                let list = args.next().ok_or(USAGE)?;
                rows_per_thread = list
                    .split(',')
                    .map(|r| r.trim().parse().ok().filter(|&r: &usize| r > 0))
                    .collect::<Option<_>>()
                    .ok_or_else(|| {
                        format!("--rows-per-thread: '{list}' is not a list of counts")
                    })?;
                // The row-split kernel `codegen::choose` picks is always exported, so that every
                // operator has its automatic choice in the manifest.
                if !rows_per_thread.contains(&DEFAULT_ROWS_PER_THREAD) {
                    rows_per_thread.push(DEFAULT_ROWS_PER_THREAD);
                }
            }
            "--post" => post_bases = true,
            "--fixed-strides" => {
                let list = args.next().ok_or(USAGE)?;
                fixed_strides = list
                    .split(',')
                    .map(|r| r.trim().parse().ok().filter(|&n: &usize| n > 0))
                    .collect::<Option<_>>()
                    .ok_or_else(|| format!("--fixed-strides: '{list}' is not a list of widths"))?;
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => return Err(format!("unknown argument '{other}'\n{USAGE}").into()),
        }
    }
    let out = out.ok_or(USAGE)?;
    std::fs::create_dir_all(out.join("ops"))?;
    std::fs::create_dir_all(out.join("kernels"))?;
    std::fs::create_dir_all(out.join("checks"))?;

    let mut operators = Vec::new();
    let mut skipped = Vec::new();
    for op in hdg_bench::operators::pipeline_operators(true, post_bases)? {
        if op.m() * op.k() > max_entries {
            skipped.push(json!({
                "name": op.name(), "m": op.m(), "k": op.k(),
                "reason": format!("more than {max_entries} entries (--max-entries)"),
            }));
        } else {
            operators.push(export(&out, &op, beta, &rows_per_thread, &fixed_strides)?);
        }
    }
    let manifest = json!({
        "generator": "hdg_backend_cuda::codegen",
        "beta": if beta == Beta::One { 1 } else { 0 },
        "block_x": BLOCK_X,
        "layout": "B: k rows of n values (ldb), C: m rows of n values (ldc), element index fastest",
        "signature": "extern \"C\" __global__ void NAME(int n, const T* b, int ldb, T* c, int ldc)",
        "grid": "(ceil(n / block[0]), grid_y)",
        "operators": operators,
        "skipped": skipped,
    });
    std::fs::write(out.join("manifest.json"), serde_json::to_string_pretty(&manifest)?)?;
    println!(
        "wrote {} operators ({} skipped) to {}",
        manifest["operators"].as_array().map_or(0, Vec::len),
        manifest["skipped"].as_array().map_or(0, Vec::len),
        out.display()
    );
    Ok(())
}

/// Writes the operator's values and its kernels; returns its manifest entry.
fn export(
    out: &Path,
    op: &ConstOperator,
    beta: Beta,
    rows_per_thread: &[usize],
    fixed_strides: &[usize],
) -> Result<Value, Box<dyn Error>> {
    let file = format!("ops/{}.json", op.name());
    let values = json!({
        "name": op.name(), "m": op.m(), "k": op.k(), "values": op.values(), "nnz": op.nnz(),
    });
    std::fs::write(out.join(&file), serde_json::to_string(&values)?)?;
    let mut kernels = Vec::new();
    let mut checks = Vec::new();
    for precision in [Precision::F64, Precision::F32] {
        checks.push(write_check(out, op, precision, beta)?);
        let [choice, narrow] = choices(op, precision)?;
        let mut variants = vec![Variant::Unrolled, Variant::UnrolledPairs];
        let splits =
            rows_per_thread.iter().map(|&rows_per_thread| Variant::RowSplit { rows_per_thread });
        for variant in splits.chain([narrow]) {
            if !variants.contains(&variant) {
                variants.push(variant);
            }
        }
        let mut generated = Vec::new();
        for variant in variants {
            generated
                .push((generate_with(op, precision, beta, variant, Strides::Arguments)?, None));
        }
        for &n in fixed_strides {
            // The automatic choice, as `DeviceOperator::compile_for_panel` compiles it.
            let [wide, narrow] = fixed_choices(op, precision, n, n)?;
            let strides = Strides::Fixed { ldb: n, ldc: n };
            for variant in if narrow == wide { vec![wide] } else { vec![narrow, wide] } {
                generated.push((generate_with(op, precision, beta, variant, strides)?, Some(n)));
            }
        }
        for (kernel, fixed_n) in generated {
            let GeneratedKernel { variant, .. } = kernel;
            let cu = format!("kernels/{}.cu", kernel.name);
            std::fs::write(out.join(&cu), &kernel.source)?;
            kernels.push(json!({
                // Compiled for panels of n = ldb = ldc = fixed_n only (absent: any panel).
                "fixed_n": fixed_n,
                "name": kernel.name,
                "file": cu,
                "precision": match precision { Precision::F32 => "f32", Precision::F64 => "f64" },
                "variant": variant.tag(),
                "chosen": variant == choice,
                // The backend's choice on panels narrower than the device's resident threads
                // where `choose_narrow` differs from `choose` (codegen::wide_panel).
                "chosen_narrow": variant == narrow && narrow != choice,
                // Whether the backend applies the operator with cuBLAS once it is loaded.
                "gemm": gemm_wins(kernel.m, kernel.b_rows_used, kernel.nnz, precision),
                // Whether kernels compiled for a narrow panel's shape replace cuBLAS there.
                "compiled_beats_gemm_narrow": compiled_beats_gemm(precision, false),
                "block": [kernel.block.0, kernel.block.1],
                "columns_per_thread": kernel.columns_per_thread,
                "grid_y": kernel.grid_y,
                "rows_per_thread": kernel.rows_per_thread,
                "nnz": kernel.nnz,
                "flops_per_column": kernel.flops_per_column,
                "b_rows_loaded": kernel.b_rows_loaded,
                "b_rows_used": kernel.b_rows_used,
            }));
        }
    }
    Ok(json!({
        "name": op.name(), "m": op.m(), "k": op.k(), "nnz": op.nnz(), "file": file,
        "kernels": kernels, "checks": checks,
    }))
}

/// Elements of the bitwise check panel: odd, so that the pair kernels' last column is alone.
const CHECK_N: usize = 129;

/// Writes `checks/NAME_PREC.bin`: B (k x CHECK_N, leading dimension CHECK_N + 1, even as the
/// pair kernels need), with beta = 1 the C it starts from (m x CHECK_N, same leading dimension,
/// padding 0), and then the C = A B (+ C) that the CPU panel loop computes, raw little-endian in
/// the precision. Every generated kernel of that precision must reproduce C to the bit on the
/// device (`operator_bench.py --bitwise`).
fn write_check(
    out: &Path,
    op: &ConstOperator,
    precision: Precision,
    beta: Beta,
) -> Result<Value, Box<dyn Error>> {
    let (n, ld) = (CHECK_N, CHECK_N + 1);
    // Deterministic values in [-1, 1) with all mantissa bits used, zero in the padding.
    let panel = |rows: usize, shift: f64| -> Vec<f64> {
        (0..rows * ld)
            .map(|i| match i % ld < n {
                true => ((i as f64 + shift) * 0.618_033_988_749_895).fract() * 2.0 - 1.0,
                false => 0.0,
            })
            .collect()
    };
    let b = panel(op.k(), 0.5);
    let c_in = match beta {
        Beta::Zero => vec![0.0; op.m() * ld],
        Beta::One => panel(op.m(), 0.25),
    };
    let bytes = match precision {
        Precision::F64 => check_bytes::<f64>(op, beta, (n, ld), &b, &c_in)?,
        Precision::F32 => check_bytes::<f32>(op, beta, (n, ld), &b, &c_in)?,
    };
    let p = precision.name();
    let file = format!("checks/{}_{p}.bin", op.name());
    std::fs::write(out.join(&file), bytes)?;
    let beta = if beta == Beta::One { 1 } else { 0 };
    Ok(json!({ "precision": p, "file": file, "n": n, "ld": ld, "beta": beta }))
}

/// B and, with beta = 1, the starting C rounded to `T`, then the CPU panel loop's C, as the
/// little-endian bytes of `T` (the check file's contents).
fn check_bytes<T: PanelReal>(
    op: &ConstOperator,
    beta: Beta,
    (n, ld): (usize, usize),
    b: &[f64],
    c_in: &[f64],
) -> Result<Vec<u8>, Box<dyn Error>> {
    let (b, c_in) = (convert_slice::<T>(b), convert_slice::<T>(c_in));
    let mut c = c_in.clone();
    PanelOperator::<T>::new(op)?.apply(beta, n, &b, ld, &mut c, ld)?;
    let start = if beta == Beta::One { &c_in[..] } else { &[] };
    let mut bytes = Vec::new();
    for v in b.iter().chain(start).chain(&c) {
        // as_f64 is exact, so this gives T's own bits.
        match T::PRECISION {
            Precision::F64 => bytes.extend_from_slice(&v.as_f64().to_le_bytes()),
            Precision::F32 => bytes.extend_from_slice(&(v.as_f64() as f32).to_le_bytes()),
        }
    }
    Ok(bytes)
}
