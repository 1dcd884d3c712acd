//! gpu-bench: bandwidth of the DBF SpMV on the GPU, against a device-to-device copy measured in
//! the same run.
//!
//! For each order k it builds the 2D HDG trace system (unit square, alternating diagonals,
//! perturbed) with about `--dofs` trace unknowns (condensation and assembly on the CPU
//! backend), checks the device SpMV against the CPU one, and times y = A x in f64 and in f32
//! (the demoted matrix) with CUDA events: median of `--samples` single launches after a
//! warm-up, x alternating between two vectors. Bytes per SpMV are [`DeviceDbf::spmv_bytes`]
//! (active blocks, column table, x and y once: the CPU backend's definition).
//!
//! `--export DIR` writes each f64 matrix in CSR as raw little-endian files for
//! `scripts/cusparse_spmv.py` (cuSPARSE on the very same matrix):
//! `DIR/k{k}/indptr.i64`, `indices.i32`, `values.f64`, and `meta.txt` (key = value lines).
//!
//! Usage: gpu-bench [--dofs N] [--orders 1,2,3] [--samples 50] [--copy-mib 1024] [--export DIR]
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use cust::event::{Event, EventFlags};
use hdg_backend_cpu::{CpuBackend, DbfMatrix};
use hdg_backend_cuda::{CudaBackend, DeviceDbf, DeviceReal, SpmvKernel};
use hdg_core::{
    Assembler, CoreError, DemoteOperator, Discretization, LocalSolver, Manufactured, Problem,
    Result, TraceOperator, VectorOps,
};
use hdg_mesh::{generate, Diagonal};

struct Args {
    dofs: f64,
    orders: Vec<usize>,
    samples: usize,
    copy_mib: usize,
    export: Option<PathBuf>,
}

fn usage() -> String {
    "usage: gpu-bench [--dofs N (1e7)] [--orders 1,2,3,4,5,6] [--samples 50] [--copy-mib 1024] \
     [--export DIR]"
        .into()
}

fn parse_args() -> std::result::Result<Args, String> {
    let mut args =
        Args { dofs: 1e7, orders: (1..=6).collect(), samples: 50, copy_mib: 1024, export: None };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value\n{}", usage()));
        let bad = |v: &str| format!("bad value {v:?} for {flag}\n{}", usage());
        match flag.as_str() {
            "--dofs" => {
                let v = value()?;
                args.dofs = v.parse().map_err(|_| bad(&v))?;
            }
            "--orders" => {
                let v = value()?;
                args.orders = v
                    .split(',')
                    .map(|s| s.trim().parse::<usize>())
                    .collect::<std::result::Result<_, _>>()
                    .map_err(|_| bad(&v))?;
            }
            "--samples" => {
                let v = value()?;
                args.samples = v.parse().map_err(|_| bad(&v))?;
            }
            "--copy-mib" => {
                let v = value()?;
                args.copy_mib = v.parse().map_err(|_| bad(&v))?;
            }
            "--export" => args.export = Some(PathBuf::from(value()?)),
            "-h" | "--help" => return Err(usage()),
            other => return Err(format!("unknown argument {other:?}\n{}", usage())),
        }
    }
    if args.samples == 0 || args.dofs < 1.0 || args.copy_mib == 0 {
        return Err(usage());
    }
    Ok(args)
}

fn main() -> std::process::ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("{msg}");
            return std::process::ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpu-bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn cuda(what: &str) -> impl Fn(cust::error::CudaError) -> CoreError + '_ {
    move |e| CoreError::Backend(format!("{what}: {}", hdg_backend_cuda::error_text(e)))
}

/// Median of the per-launch times (seconds) of `f`, CUDA events around each launch.
fn time_launches(
    backend: &CudaBackend,
    samples: usize,
    warmup: usize,
    mut f: impl FnMut(usize) -> Result<()>,
) -> Result<f64> {
    for i in 0..warmup {
        f(i)?;
    }
    backend.synchronize()?;
    let start = Event::new(EventFlags::DEFAULT).map_err(cuda("event"))?;
    let stop = Event::new(EventFlags::DEFAULT).map_err(cuda("event"))?;
    let mut times = Vec::with_capacity(samples);
    for i in 0..samples {
        start.record(backend.stream()).map_err(cuda("event record"))?;
        f(i)?;
        stop.record(backend.stream()).map_err(cuda("event record"))?;
        stop.synchronize().map_err(cuda("event synchronize"))?;
        times.push(stop.elapsed_time_f32(&start).map_err(cuda("event time"))? as f64 * 1e-3);
    }
    times.sort_by(|a, b| a.partial_cmp(b).expect("finite times"));
    Ok(times[samples / 2])
}

/// Device-to-device copy bandwidth, bytes read + written per second.
fn copy_bandwidth(backend: &CudaBackend, mib: usize, samples: usize) -> Result<f64> {
    let n = mib * (1 << 20) / 8;
    let src = VectorOps::<f64>::zeros(backend, n)?;
    let mut dst = VectorOps::<f64>::zeros(backend, n)?;
    let t = time_launches(backend, samples, 3, |_| backend.copy(&src, &mut dst))?;
    Ok(2.0 * (n * 8) as f64 / t)
}

/// Median SpMV time and the relative difference from the host reference `y_ref` for `x0`.
/// Times every SpMV kernel; returns the fastest (time, result) and prints all three times.
fn time_spmv<T: DeviceReal>(
    backend: &CudaBackend,
    op: &mut DeviceDbf<T>,
    x0: &[T],
    x1: &[T],
    samples: usize,
) -> Result<(f64, Vec<T>)>
where
    CudaBackend: VectorOps<T, Vector = hdg_backend_cuda::DeviceVector<T>>,
{
    let mut best: Option<(f64, Vec<T>)> = None;
    let mut line = String::new();
    for kernel in [SpmvKernel::Entry, SpmvKernel::EntryUnrolled, SpmvKernel::Row] {
        op.set_spmv_kernel(kernel);
        let (t, y) = time_one(backend, op, x0, x1, samples)?;
        line.push_str(&format!(" {kernel:?} {:.1} us", t * 1e6));
        if best.as_ref().is_none_or(|(b, _)| t < *b) {
            best = Some((t, y));
        }
    }
    op.set_spmv_kernel(SpmvKernel::Row);
    eprintln!("  {} kernels:{line}", T::SUFFIX);
    Ok(best.expect("three kernels timed"))
}

fn time_one<T: DeviceReal>(
    backend: &CudaBackend,
    op: &DeviceDbf<T>,
    x0: &[T],
    x1: &[T],
    samples: usize,
) -> Result<(f64, Vec<T>)>
where
    CudaBackend: VectorOps<T, Vector = hdg_backend_cuda::DeviceVector<T>>,
{
    let xs = [backend.copy_from_host(x0)?, backend.copy_from_host(x1)?];
    let mut y = VectorOps::<T>::zeros(backend, x0.len())?;
    let t = time_launches(backend, samples, 5, |i| op.apply(&xs[i % 2], &mut y))?;
    op.apply(&xs[0], &mut y)?;
    Ok((t, backend.to_host(&y)?))
}

fn rel_inf<T: DeviceReal>(a: &[T], b: &[T]) -> f64 {
    let err = a.iter().zip(b).fold(0.0f64, |m, (x, y)| m.max((x.as_f64() - y.as_f64()).abs()));
    err / b.iter().fold(0.0f64, |m, y| m.max(y.as_f64().abs()))
}

/// The 2D HDG trace matrix of order k with about `dofs` unknowns (n x n square: about
/// 3 n^2 (k + 1) trace unknowns).
fn build(k: usize, dofs: f64) -> Result<DbfMatrix<f64>> {
    let n = ((dofs / (3.0 * (k + 1) as f64)).sqrt().round() as usize).max(2);
    let t = Instant::now();
    let mesh = generate::perturb(&generate::unit_square(n, Diagonal::Alternating)?, 0.2, 3)?;
    let problem = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
    let disc = Discretization::<f64>::new(&mesh, &problem, k)?;
    let cpu = CpuBackend;
    let prep = cpu.prepare(&disc)?;
    let condensed = cpu.condense(&disc, &prep)?;
    let (matrix, _rhs) = cpu.assemble(&disc, &condensed)?;
    eprintln!(
        "k = {k}: {n} x {n} mesh, {} trace unknowns, built on the CPU in {:.1} s",
        matrix.dim(),
        t.elapsed().as_secs_f64()
    );
    Ok(matrix)
}

/// Writes the matrix in CSR (every entry of every active block, columns sorted in each row,
/// as `DbfMatrix::to_csr`) as raw little-endian files; returns nnz.
fn export_csr(m: &DbfMatrix<f64>, dir: &Path) -> Result<usize> {
    std::fs::create_dir_all(dir)?;
    let (nf, slots) = (m.block_size(), m.slots());
    let bsz = nf * nf;
    let (blocks, columns) = (m.blocks(), m.columns());
    let mut indptr = BufWriter::new(File::create(dir.join("indptr.i64"))?);
    let mut indices = BufWriter::new(File::create(dir.join("indices.i32"))?);
    let mut values = BufWriter::new(File::create(dir.join("values.f64"))?);
    let mut nnz: usize = 0;
    indptr.write_all(&0i64.to_le_bytes())?;
    for row in 0..m.n_rows() {
        let mut cols: Vec<(u32, usize)> = (0..slots)
            .map(|a| (columns[row * slots + a], a))
            .filter(|&(c, a)| a == 0 || c as usize != row)
            .collect();
        cols.sort_unstable();
        for i in 0..nf {
            for &(c, a) in &cols {
                let block = &blocks[(row * slots + a) * bsz..][..bsz];
                for j in 0..nf {
                    let col = i32::try_from(c as usize * nf + j).map_err(|_| {
                        CoreError::InvalidParameter {
                            name: "export",
                            reason: "column index exceeds i32".into(),
                        }
                    })?;
                    indices.write_all(&col.to_le_bytes())?;
                    values.write_all(&block[i * nf + j].to_le_bytes())?;
                    nnz += 1;
                }
            }
            indptr.write_all(&(nnz as i64).to_le_bytes())?;
        }
    }
    indptr.flush()?;
    indices.flush()?;
    values.flush()?;
    Ok(nnz)
}

fn run(args: &Args) -> Result<()> {
    let backend = CudaBackend::new()?;
    println!("device: {}", backend.describe());
    let copy = copy_bandwidth(&backend, args.copy_mib, args.samples)?;
    println!(
        "device-to-device copy ({} MiB): {:.1} GB/s (read + write)",
        args.copy_mib,
        copy * 1e-9
    );
    println!(
        "{:>2} {:>3} {:>11} {:>12} | {:>9} {:>8} {:>6} {:>9} | {:>9} {:>8} {:>6} {:>9}",
        "k",
        "n_f",
        "unknowns",
        "nnz",
        "f64 us",
        "GB/s",
        "copy",
        "err",
        "f32 us",
        "GB/s",
        "copy",
        "err"
    );
    for &k in &args.orders {
        let host = build(k, args.dofs)?;
        let n = host.dim();
        let nf = host.block_size();
        let nnz = host.n_active_blocks() * nf * nf;
        let x0: Vec<f64> = (0..n).map(|i| ((i as f64) * 0.618).sin()).collect();
        let x1: Vec<f64> = (0..n).map(|i| ((i as f64) * 0.377).cos()).collect();
        let mut y_ref = vec![0.0; n];
        host.apply(&x0, &mut y_ref)?;
        let t_up = Instant::now();
        let mut dev = DeviceDbf::upload(&backend, &host)?;
        eprintln!(
            "k = {k}: uploaded {:.2} GB in {:.1} s",
            dev.memory_bytes() as f64 * 1e-9,
            t_up.elapsed().as_secs_f64()
        );
        let (t64, y64) = time_spmv(&backend, &mut dev, &x0, &x1, args.samples)?;
        let err64 = rel_inf(&y64, &y_ref);
        let bytes64 = dev.spmv_bytes();
        let (t32, err32, bytes32) = {
            let mut low = DemoteOperator::<CudaBackend>::demote(&dev)?;
            let host_low = DemoteOperator::<CpuBackend>::demote(&host)?;
            let x0f: Vec<f32> = x0.iter().map(|&v| v as f32).collect();
            let x1f: Vec<f32> = x1.iter().map(|&v| v as f32).collect();
            let mut y_ref32 = vec![0.0f32; n];
            host_low.apply(&x0f, &mut y_ref32)?;
            let (t32, y32) = time_spmv(&backend, &mut low, &x0f, &x1f, args.samples)?;
            (t32, rel_inf(&y32, &y_ref32), low.spmv_bytes())
        };
        drop(dev);
        let (bw64, bw32) = (bytes64 as f64 / t64, bytes32 as f64 / t32);
        println!(
            "{k:>2} {nf:>3} {n:>11} {nnz:>12} | {:>9.1} {:>8.1} {:>5.0}% {err64:>9.1e} | {:>9.1} {:>8.1} {:>5.0}% {err32:>9.1e}",
            t64 * 1e6,
            bw64 * 1e-9,
            100.0 * bw64 / copy,
            t32 * 1e6,
            bw32 * 1e-9,
            100.0 * bw32 / copy
        );
        if let Some(dir) = &args.export {
            let sub = dir.join(format!("k{k}"));
            let t = Instant::now();
            let written = export_csr(&host, &sub)?;
            debug_assert_eq!(written, nnz);
            let mut meta = File::create(sub.join("meta.txt"))?;
            writeln!(meta, "k = {k}")?;
            writeln!(meta, "n_f = {nf}")?;
            writeln!(meta, "n = {n}")?;
            writeln!(meta, "nnz = {written}")?;
            writeln!(meta, "slots = {}", host.slots())?;
            writeln!(meta, "block_rows = {}", host.n_rows())?;
            writeln!(meta, "spmv_bytes_f64 = {bytes64}")?;
            writeln!(meta, "spmv_bytes_f32 = {bytes32}")?;
            writeln!(meta, "dbf_f64_seconds = {t64:e}")?;
            writeln!(meta, "dbf_f32_seconds = {t32:e}")?;
            writeln!(meta, "copy_bytes_per_second = {copy:e}")?;
            eprintln!(
                "k = {k}: exported CSR to {} in {:.1} s",
                sub.display(),
                t.elapsed().as_secs_f64()
            );
        }
    }
    // The copy again at the end: the clock or the board may have changed during the run.
    let copy_end = copy_bandwidth(&backend, args.copy_mib, args.samples)?;
    println!("device-to-device copy at the end: {:.1} GB/s", copy_end * 1e-9);
    println!(
        "bytes per SpMV = active blocks + column table (4 B per slot) + x + y (DbfMatrix::spmv_bytes)"
    );
    Ok(())
}
