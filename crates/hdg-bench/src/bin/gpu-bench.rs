//! gpu-bench: bandwidth of the DBF SpMV on the GPU, against a device-to-device copy measured in
//! the same run.
//!
//! For each order k it builds the HDG trace system (`--dim 2`: unit square, alternating
//! diagonals; `--dim 3`: unit cube in Kuhn tetrahedra; perturbed) with about `--dofs` trace
//! unknowns (condensation and assembly on the CPU
//! backend), checks the device SpMV against the CPU one, and times y = A x in f64 and in f32
//! (the demoted matrix) with CUDA events: median of `--samples` single launches after a
//! warm-up, x alternating between two vectors. Bytes per SpMV are [`DeviceDbf::spmv_bytes`]
//! (active blocks, column table, x and y once: the CPU backend's definition).
//!
//! `--export DIR` writes each f64 matrix in CSR as raw little-endian files for
//! `scripts/cusparse_spmv.py` (cuSPARSE on the very same matrix):
//! `DIR/k{k}/indptr.i64`, `indices.i32`, `values.f64`, and `meta.txt` (key = value lines).
//!
//! `--matrix-free` runs instead the comparison of the matrix-free trace operator with the DBF
//! SpMV ([`run_matrix_free`]): both built by the CUDA backend's own stages (condensation on the
//! device, then `Assembler::assemble` once per [`TraceOperatorKind`]), checked against each
//! other, then timed the same way, in f64 and in f32 (both demoted).
//!
//! `--multigrid` times instead the multigrid preconditioner of `pcg-mg` ([`run_multigrid`]) on
//! the system the CUDA backend builds: its setup, one V-cycle in f32 (what `pcg-mg` applies in
//! an f64 solve) by CUDA events and by the host's clock (their gap is the host's launch work),
//! and the same V-cycle in multiples of the f64 and f32 trace SpMV.
//!
//! `--operators` times instead the error norms' constant operators (the basis and the
//! postprocessing basis at the error rule's points, triangles and tetrahedra of the given
//! orders, f64 and f32; [`run_operators`]) on panels of 1e5 and 1e6 elements, on each path of
//! `CudaBackend::constant_operator`: the backend's kernels (generated or dense), cuBLAS, and the
//! automatic choice between them, so that the choice is checked against measurement in one run.
//! These kernels take microseconds, so each is timed as launches queued behind a long copy
//! (device time, without the host's launch work: [`time_queued`]); the path columns name the
//! generated kernel's form (`u`, `u2`, `rs16`) for the panel. The last columns time the
//! automatic choice once its kernels are compiled at run time for the panel's shape
//! (`DeviceOperator::compile_for_panel`: NVRTC, the strides compiled in), and the compilation.
//!
//! Usage: gpu-bench [--dofs N] [--orders 1,2,3] [--samples 50] [--copy-mib 1024] [--export DIR]
//!        [--matrix-free] [--multigrid] [--operators] [--dim 2|3]
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use cust::event::{Event, EventFlags};
use hdg_backend_cpu::{CpuBackend, DbfMatrix};
use hdg_backend_cuda::{
    CudaBackend, CudaSettings, DeviceDbf, DeviceReal, DeviceTraceOperator, DeviceVector,
    SpmvKernel, TraceOperatorKind,
};
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
    /// Run the matrix-free comparison ([`run_matrix_free`]) instead of the SpMV benchmark.
    matrix_free: bool,
    /// Time the multigrid preconditioner ([`run_multigrid`]) instead.
    multigrid: bool,
    /// Time the error norms' constant operators on each path ([`run_operators`]) instead.
    operators: bool,
    /// 2: unit square, triangles (5 DBF slots); 3: unit cube, tetrahedra (7 slots).
    dim: usize,
}

/// The benchmark mesh of order `k` with about `dofs` trace unknowns: the unit square with
/// alternating diagonals (3 N^2 faces of k+1 unknowns) or the unit cube cut into 6 N^3
/// tetrahedra (about 12 N^3 faces of (k+1)(k+2)/2 unknowns), perturbed by 0.2 (seed 3).
fn bench_mesh(dim: usize, k: usize, dofs: f64) -> Result<(hdg_mesh::Mesh, String)> {
    let (mesh, label) = if dim == 3 {
        let n_f = ((k + 1) * (k + 2) / 2) as f64;
        let n = ((dofs / (12.0 * n_f)).cbrt().round() as usize).max(2);
        (generate::unit_cube(n)?, format!("cube:{n}"))
    } else {
        let n = ((dofs / (3.0 * (k + 1) as f64)).sqrt().round() as usize).max(2);
        (generate::unit_square(n, Diagonal::Alternating)?, format!("square:{n}"))
    };
    Ok((generate::perturb(&mesh, 0.2, 3)?, label))
}

fn usage() -> String {
    "usage: gpu-bench [--dofs N (1e7)] [--orders 1,2,3,4,5,6] [--samples 50] [--copy-mib 1024] \
     [--export DIR] [--matrix-free] [--multigrid] [--operators] [--dim 2|3]"
        .into()
}

fn parse_args() -> std::result::Result<Args, String> {
    let mut args = Args {
        dofs: 1e7,
        orders: (1..=6).collect(),
        samples: 50,
        copy_mib: 1024,
        export: None,
        matrix_free: false,
        multigrid: false,
        operators: false,
        dim: 2,
    };
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
            "--matrix-free" => args.matrix_free = true,
            "--multigrid" => args.multigrid = true,
            "--operators" => args.operators = true,
            "--dim" => {
                let v = value()?;
                args.dim = v.parse().ok().filter(|d| *d == 2 || *d == 3).ok_or_else(|| bad(&v))?;
            }
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
    let result = if args.matrix_free {
        run_matrix_free(&args)
    } else if args.multigrid {
        run_multigrid(&args)
    } else if args.operators {
        run_operators(&args)
    } else {
        run(&args)
    };
    match result {
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
    f: impl FnMut(usize) -> Result<()>,
) -> Result<f64> {
    time_rounds(backend, samples, 1, warmup, None, f)
}

/// Device time of one launch of `f`, for kernels of microseconds: a copy of `hold.0` into
/// `hold.1` holds the stream while `samples` launches queue behind it, then events around
/// them, time / samples; the median of 5 rounds. (Events around a single launch also count the
/// host's launch work wherever it exceeds the kernel's time.)
fn time_queued(
    backend: &CudaBackend,
    hold: &mut (DeviceVector<f64>, DeviceVector<f64>),
    samples: usize,
    warmup: usize,
    f: impl FnMut(usize) -> Result<()>,
) -> Result<f64> {
    time_rounds(backend, 5, samples, warmup, Some(hold), f)
}

/// The median over `rounds` of the time (seconds) of `per_round` launches of `f` between two
/// CUDA events, divided by `per_round`; with `hold`, a copy queued before each round's first
/// event. `f` gets the launch's index.
fn time_rounds(
    backend: &CudaBackend,
    rounds: usize,
    per_round: usize,
    warmup: usize,
    mut hold: Option<&mut (DeviceVector<f64>, DeviceVector<f64>)>,
    mut f: impl FnMut(usize) -> Result<()>,
) -> Result<f64> {
    for i in 0..warmup {
        f(i)?;
    }
    backend.synchronize()?;
    let start = Event::new(EventFlags::DEFAULT).map_err(cuda("event"))?;
    let stop = Event::new(EventFlags::DEFAULT).map_err(cuda("event"))?;
    let mut times = Vec::with_capacity(rounds);
    for round in 0..rounds {
        if let Some((src, dst)) = hold.as_deref_mut() {
            backend.copy(src, dst)?;
        }
        start.record(backend.stream()).map_err(cuda("event record"))?;
        for i in 0..per_round {
            f(round * per_round + i)?;
        }
        stop.record(backend.stream()).map_err(cuda("event record"))?;
        stop.synchronize().map_err(cuda("event synchronize"))?;
        let seconds = stop.elapsed_time_f32(&start).map_err(cuda("event time"))? as f64 * 1e-3;
        times.push(seconds / per_round as f64);
    }
    times.sort_by(|a, b| a.partial_cmp(b).expect("finite times"));
    Ok(times[rounds / 2])
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
fn build(dim: usize, k: usize, dofs: f64) -> Result<DbfMatrix<f64>> {
    let t = Instant::now();
    let (mesh, label) = bench_mesh(dim, k, dofs)?;
    let problem = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
    let disc = Discretization::<f64>::new(&mesh, &problem, k)?;
    let cpu = CpuBackend;
    let prep = cpu.prepare(&disc)?;
    let condensed = cpu.condense(&disc, &prep)?;
    let (matrix, _rhs) = cpu.assemble(&disc, &prep, &condensed)?;
    eprintln!(
        "k = {k}: {label} mesh, {} trace unknowns, built on the CPU in {:.1} s",
        matrix.dim(),
        t.elapsed().as_secs_f64()
    );
    Ok(matrix)
}

/// Writes the matrix's CSR export (`hdg_core::dbf::to_csr`) as raw little-endian files
/// (row pointers i64, columns i32, values f64); returns nnz.
fn export_csr(m: &DbfMatrix<f64>, dir: &Path) -> Result<usize> {
    std::fs::create_dir_all(dir)?;
    let csr = m.to_host_csr()?;
    if csr.n_cols > i32::MAX as usize {
        return Err(CoreError::InvalidParameter {
            name: "export",
            reason: "column index exceeds i32".into(),
        });
    }
    let mut indptr = BufWriter::new(File::create(dir.join("indptr.i64"))?);
    let mut indices = BufWriter::new(File::create(dir.join("indices.i32"))?);
    let mut values = BufWriter::new(File::create(dir.join("values.f64"))?);
    for &p in &csr.indptr {
        indptr.write_all(&(p as i64).to_le_bytes())?;
    }
    for (&c, &v) in csr.indices.iter().zip(&csr.values) {
        indices.write_all(&(c as i32).to_le_bytes())?;
        values.write_all(&v.to_le_bytes())?;
    }
    indptr.flush()?;
    indices.flush()?;
    values.flush()?;
    Ok(csr.indices.len())
}

fn run(args: &Args) -> Result<()> {
    let backend = CudaBackend::new()?.with_settings(CudaSettings::from_environment()?)?;
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
        let host = build(args.dim, k, args.dofs)?;
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

// ---------------------------------------------------------------------------------------------
// The matrix-free operator against the DBF SpMV (--matrix-free).

/// The f64 DBF matrix and matrix-free operator of the 2D problem of order k with about `dofs`
/// trace unknowns (the mesh of [`build`]), both built on the device by the CUDA backend:
/// prepare, condense, then assemble once per kind from the same condensation (freed after).
fn build_on_device(
    backend: &CudaBackend,
    dim: usize,
    k: usize,
    dofs: f64,
) -> Result<(DeviceTraceOperator<f64>, DeviceTraceOperator<f64>, usize)> {
    let t = Instant::now();
    let (mesh, label) = bench_mesh(dim, k, dofs)?;
    let problem = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
    let disc = Discretization::<f64>::new(&mesh, &problem, k)?;
    let prep = LocalSolver::<f64>::prepare(backend, &disc)?;
    let condensed = LocalSolver::<f64>::condense(backend, &disc, &prep)?;
    let dbf_backend = backend.clone().with_trace_operator(TraceOperatorKind::Dbf);
    let mf_backend = backend.clone().with_trace_operator(TraceOperatorKind::MatrixFree);
    let (dbf, _) = Assembler::<f64>::assemble(&dbf_backend, &disc, &prep, &condensed)?;
    let (mf, _) = Assembler::<f64>::assemble(&mf_backend, &disc, &prep, &condensed)?;
    backend.synchronize()?;
    eprintln!(
        "k = {k}: {label} mesh, {} cells, {} trace unknowns, built on the device in {:.1} s \
         (DBF {:.2} GB, matrix-free {:.2} GB)",
        mesh.n_cells(),
        dbf.dim(),
        t.elapsed().as_secs_f64(),
        dbf.memory_bytes() as f64 * 1e-9,
        mf.memory_bytes() as f64 * 1e-9
    );
    Ok((dbf, mf, mesh.n_cells()))
}

/// Median time of one application of `op`, x alternating between `xs[0]` and `xs[1]`.
fn time_operator<T: DeviceReal>(
    backend: &CudaBackend,
    op: &DeviceTraceOperator<T>,
    xs: &[hdg_backend_cuda::DeviceVector<T>; 2],
    samples: usize,
) -> Result<f64>
where
    CudaBackend: VectorOps<T, Vector = hdg_backend_cuda::DeviceVector<T>>,
{
    let mut y = VectorOps::<T>::zeros(backend, op.dim())?;
    time_launches(backend, samples, 5, |i| op.apply(&xs[i % 2], &mut y))
}

/// One precision of the comparison: checks that both operators give the same A x, then times
/// the DBF SpMV (every kernel; the fastest counts) and the matrix-free application.
struct Comparison {
    dbf_seconds: f64,
    mf_seconds: f64,
    dbf_bytes: usize,
    mf_bytes: usize,
    difference: f64,
}

fn compare_operators<T: DeviceReal>(
    backend: &CudaBackend,
    dbf: &mut DeviceTraceOperator<T>,
    mf: &DeviceTraceOperator<T>,
    samples: usize,
    tolerance: f64,
) -> Result<Comparison>
where
    CudaBackend: VectorOps<T, Vector = hdg_backend_cuda::DeviceVector<T>>,
{
    let n = dbf.dim();
    let x0: Vec<T> = (0..n).map(|i| T::from_f64_lossy(((i as f64) * 0.618).sin())).collect();
    let x1: Vec<T> = (0..n).map(|i| T::from_f64_lossy(((i as f64) * 0.377).cos())).collect();
    let xs = [backend.copy_from_host(&x0)?, backend.copy_from_host(&x1)?];
    // The results first: the two operators must agree before their times mean anything.
    let mut y = VectorOps::<T>::zeros(backend, n)?;
    dbf.apply(&xs[0], &mut y)?;
    let y_dbf = backend.to_host(&y)?;
    mf.apply(&xs[0], &mut y)?;
    let y_mf = backend.to_host(&y)?;
    let difference = rel_inf(&y_mf, &y_dbf);
    // A NaN difference fails too.
    if difference.is_nan() || difference > tolerance {
        return Err(CoreError::Backend(format!(
            "matrix-free and DBF results differ by {difference:e} (relative, max norm) > \
             {tolerance:e} in {}",
            T::SUFFIX
        )));
    }
    let mut line = String::new();
    let mut dbf_seconds = f64::INFINITY;
    for kernel in [SpmvKernel::Entry, SpmvKernel::EntryUnrolled, SpmvKernel::Row] {
        if let Some(m) = dbf.as_dbf_mut() {
            m.set_spmv_kernel(kernel);
        }
        let t = time_operator(backend, dbf, &xs, samples)?;
        line.push_str(&format!(" {kernel:?} {:.1} us", t * 1e6));
        dbf_seconds = dbf_seconds.min(t);
    }
    if let Some(m) = dbf.as_dbf_mut() {
        m.set_spmv_kernel(SpmvKernel::Row);
    }
    let mf_seconds = time_operator(backend, mf, &xs, samples)?;
    eprintln!("  {} DBF kernels:{line}; matrix-free {:.1} us", T::SUFFIX, mf_seconds * 1e6);
    Ok(Comparison {
        dbf_seconds,
        mf_seconds,
        dbf_bytes: dbf.apply_bytes(),
        mf_bytes: mf.apply_bytes(),
        difference,
    })
}

/// `--matrix-free`: for each order, the matrix-free application against the DBF SpMV on the
/// same problem (both built on the device from the same condensation), f64 and f32 (both
/// operators demoted). Prints time per application, bytes per application (DBF:
/// `DeviceDbf::spmv_bytes`, active blocks + column table + x + y; matrix-free:
/// `MatrixFreeOperator::apply_bytes`, packed K_e + cell-row table + x + y_e written and read +
/// row-cell tables + y), effective bandwidth (bytes / time, and as a share of the copy
/// bandwidth) and the ratios.
fn run_matrix_free(args: &Args) -> Result<()> {
    let backend = CudaBackend::new()?.with_settings(CudaSettings::from_environment()?)?;
    println!("device: {}", backend.describe());
    let copy = copy_bandwidth(&backend, args.copy_mib, args.samples)?;
    println!(
        "device-to-device copy ({} MiB): {:.1} GB/s (read + write)",
        args.copy_mib,
        copy * 1e-9
    );
    println!("matrix-free trace operator vs DBF SpMV (median of {} launches)", args.samples);
    println!(
        "{:>2} {:>3} {:>11} {:>9} {:>4} | {:>9} {:>9} {:>7} {:>5} | {:>9} {:>9} {:>7} {:>5} | {:>7} {:>7} {:>8}",
        "k",
        "n_f",
        "unknowns",
        "cells",
        "prec",
        "DBF us",
        "DBF MB",
        "GB/s",
        "copy",
        "MF us",
        "MF MB",
        "GB/s",
        "copy",
        "speedup",
        "bytes",
        "diff"
    );
    for &k in &args.orders {
        let (mut dbf, mf, cells) = build_on_device(&backend, args.dim, k, args.dofs)?;
        let (n, nf) = (dbf.dim(), dbf.block_size());
        let f64_result = compare_operators(&backend, &mut dbf, &mf, args.samples, 1e-12)?;
        let f32_result = {
            let mut dbf32 = DemoteOperator::<CudaBackend>::demote(&dbf)?;
            let mf32 = DemoteOperator::<CudaBackend>::demote(&mf)?;
            compare_operators(&backend, &mut dbf32, &mf32, args.samples, 1e-5)?
        };
        drop((dbf, mf));
        for (precision, r) in [("f64", &f64_result), ("f32", &f32_result)] {
            let dbf_bw = r.dbf_bytes as f64 / r.dbf_seconds;
            let mf_bw = r.mf_bytes as f64 / r.mf_seconds;
            println!(
                "{k:>2} {nf:>3} {n:>11} {cells:>9} {precision:>4} | {:>9.1} {:>9.1} {:>7.1} {:>4.0}% | {:>9.1} {:>9.1} {:>7.1} {:>4.0}% | {:>7.2} {:>7.2} {:>8.1e}",
                r.dbf_seconds * 1e6,
                r.dbf_bytes as f64 * 1e-6,
                dbf_bw * 1e-9,
                100.0 * dbf_bw / copy,
                r.mf_seconds * 1e6,
                r.mf_bytes as f64 * 1e-6,
                mf_bw * 1e-9,
                100.0 * mf_bw / copy,
                r.dbf_seconds / r.mf_seconds,
                r.mf_bytes as f64 / r.dbf_bytes as f64,
                r.difference
            );
        }
    }
    let copy_end = copy_bandwidth(&backend, args.copy_mib, args.samples)?;
    println!("device-to-device copy at the end: {:.1} GB/s", copy_end * 1e-9);
    println!(
        "DBF MB = active blocks + column table (4 B per slot) + x + y (DeviceDbf::spmv_bytes); \
         the DBF time is its fastest SpMV kernel"
    );
    println!(
        "MF MB = packed K_e (nl (nl + 1) / 2 per cell) + cell-row table (4 B per cell face) + x + \
         y_e written and read back + row-cell tables (5 B per row and side) + y \
         (MatrixFreeOperator::apply_bytes)"
    );
    println!(
        "speedup = DBF time / MF time; bytes = MF MB / DBF MB; diff = max |y_MF - y_DBF| / \
         max |y_DBF| (checked before timing)"
    );
    Ok(())
}

/// The multigrid preconditioner on the device: setup, one f32 V-cycle (CUDA events and host
/// clock), and its cost in trace SpMVs.
fn run_multigrid(args: &Args) -> Result<()> {
    use hdg_core::{Preconditioner, VertexSpace};
    use hdg_linalg::{Multigrid, MultigridSettings};
    let backend = CudaBackend::new()?.with_settings(CudaSettings::from_environment()?)?;
    println!("device: {}", backend.describe());
    println!(
        "{:>2} {:>3} {:>11} | {:>9} {:>9} | {:>9} {:>9} {:>9} | {:>8} {:>8} | levels",
        "k",
        "n_f",
        "unknowns",
        "setup ms",
        "space ms",
        "cycle ms",
        "host ms",
        "f64 spmv",
        "x f64",
        "x f32"
    );
    for &k in &args.orders {
        let (mesh, label) = bench_mesh(args.dim, k, args.dofs)?;
        let problem = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
        let disc = Discretization::<f64>::new(&mesh, &problem, k)?;
        let prep = LocalSolver::<f64>::prepare(&backend, &disc)?;
        let condensed = LocalSolver::<f64>::condense(&backend, &disc, &prep)?;
        let dbf_backend = backend.clone().with_trace_operator(TraceOperatorKind::Dbf);
        let (op, rhs) = Assembler::<f64>::assemble(&dbf_backend, &disc, &prep, &condensed)?;
        drop(condensed);
        let low = DemoteOperator::<CudaBackend>::demote(&op)?;
        let settings = MultigridSettings::auto(mesh.dim(), k);
        let t = Instant::now();
        let space = VertexSpace::new(&disc, settings.split_ratio)?;
        let space_seconds = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let mg =
            Multigrid::<f32, CudaBackend>::new(&backend, &low, &space, &disc.topology, &settings)?;
        backend.synchronize()?;
        let setup_seconds = t.elapsed().as_secs_f64();
        let r64 = backend.to_host(&rhs)?;
        let r32: Vec<f32> = r64.iter().map(|&v| v as f32).collect();
        let xs32 = [backend.copy_from_host(&r32)?, backend.copy_from_host(&r32)?];
        let mut z32 = VectorOps::<f32>::zeros(&backend, r32.len())?;
        let cycle = time_launches(&backend, args.samples.min(20), 2, |i| {
            mg.apply(&backend, &xs32[i % 2], &mut z32)
        })?;
        let t = Instant::now();
        for i in 0..5 {
            mg.apply(&backend, &xs32[i % 2], &mut z32)?;
        }
        backend.synchronize()?;
        let host = t.elapsed().as_secs_f64() / 5.0;
        let xs64 = [rhs, backend.copy_from_host(&r64)?];
        let mut y64 = VectorOps::<f64>::zeros(&backend, r64.len())?;
        let spmv64 =
            time_launches(&backend, args.samples, 5, |i| op.apply(&xs64[i % 2], &mut y64))?;
        // The same cycle in f64 on the operator itself (what single_precision = false runs).
        let cycle64 = {
            let mg64 = Multigrid::<f64, CudaBackend>::new(
                &backend,
                &op,
                &space,
                &disc.topology,
                &settings,
            )?;
            time_launches(&backend, args.samples.min(20), 2, |i| {
                mg64.apply(&backend, &xs64[i % 2], &mut y64)
            })?
        };
        let spmv32 =
            time_launches(&backend, args.samples, 5, |i| low.apply(&xs32[i % 2], &mut z32))?;
        println!(
            "{k:>2} {:>3} {:>11} | {:>9.1} {:>9.1} | {:>9.3} {:>9.3} {:>9.3} {:>9.3} | {:>8.1} {:>8.1} | {label}: {:?}",
            op.block_size(),
            op.dim(),
            setup_seconds * 1e3,
            space_seconds * 1e3,
            cycle * 1e3,
            host * 1e3,
            cycle64 * 1e3,
            spmv64 * 1e3,
            cycle / spmv64,
            cycle / spmv32,
            mg.level_sizes()
        );
        for note in mg.notes() {
            println!("     {note}");
        }
    }
    println!(
        "cycle ms: one f32 V-cycle by CUDA events (median); host ms: the same by the host's clock \
         (launches included); f64 cycle: the V-cycle built in f64 on the f64 operator; x f64, \
         x f32: the f32 cycle in trace SpMVs of that precision"
    );
    Ok(())
}

/// The error norms' evaluation operators of triangles and tetrahedra at the orders asked, each
/// applied to panels of 1e5 and 1e6 elements in f64 and f32 on every path of
/// `CudaBackend::constant_operator`: the kernels (cuBLAS off: the built-in generated kernel or
/// the dense fallback), cuBLAS, and the automatic choice. Medians of `--samples` launches (CUDA
/// events, B alternating between two panels); the results of the paths are compared first.
/// cuBLAS is loaded first (its one-time cost is printed), so "auto" is the choice of a program
/// that has loaded it.
fn run_operators(args: &Args) -> Result<()> {
    use hdg_backend_cuda::CublasUse;
    let base = CudaBackend::new()?;
    println!("device: {}", base.describe());
    // What the first use of cuBLAS costs: the library and the handle, then the first GEMM.
    let clock = Instant::now();
    base.load_cublas()?;
    let load = clock.elapsed().as_secs_f64();
    let first = {
        let a = vec![1.0f64; 144 * 45];
        let always = CudaSettings { cublas: CublasUse::Always, ..CudaSettings::auto() };
        let backend = base.clone().with_settings(always)?;
        let op = backend.constant_operator("first-gemm", 144, 45, &a)?;
        let b = VectorOps::<f64>::zeros(&backend, 45 * 1000)?;
        let mut c = VectorOps::<f64>::zeros(&backend, 144 * 1000)?;
        let clock = Instant::now();
        op.apply(&backend, 1000, &b, 1000, &mut c, 1000)?;
        backend.synchronize()?;
        clock.elapsed().as_secs_f64()
    };
    println!(
        "cuBLAS: library and handle {:.1} ms, first GEMM (144 x 45, 1000 elements) {:.1} ms",
        load * 1e3,
        first * 1e3
    );
    let with = |cublas| base.clone().with_settings(CudaSettings { cublas, ..CudaSettings::auto() });
    let paths = [with(CublasUse::Never)?, with(CublasUse::Always)?, with(CublasUse::Auto)?];
    // What holds the stream while the timed launches queue (time_queued): a copy of 2 x 512
    // MiB, a few hundred microseconds.
    let hold_len = 64 << 20;
    let mut hold =
        (VectorOps::<f64>::zeros(&base, hold_len)?, VectorOps::<f64>::zeros(&base, hold_len)?);
    println!(
        "| operator | prec | n | m x k | nnz | kernels ms (path) | cuBLAS ms | auto ms (path) | \
         auto / best | compiled ms (path) | compile s | compiled / auto |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for &k in &args.orders {
        let elements = hdg_bench::operators::element_pairs(k)
            .map_err(|e| CoreError::Backend(e.to_string()))?;
        for [element, post] in &elements {
            let pair =
                hdg_core::tables::error_evaluation_operators(element.as_ref(), post.as_ref())
                    .map_err(|e| CoreError::Backend(e.to_string()))?;
            for op in &pair {
                for n in [100_000, 1_000_000] {
                    operator_row::<f64>(&paths, &mut hold, op, n, args.samples)?;
                    operator_row::<f32>(&paths, &mut hold, op, n, args.samples)?;
                }
            }
        }
    }
    Ok(())
}

/// One row of [`run_operators`]: `op` over n elements in T on the three backends (kernels,
/// cuBLAS, auto).
fn operator_row<T: DeviceReal>(
    paths: &[CudaBackend; 3],
    hold: &mut (DeviceVector<f64>, DeviceVector<f64>),
    op: &hdg_core::constant_operator::ConstOperator,
    n: usize,
    samples: usize,
) -> Result<()>
where
    CudaBackend: VectorOps<T, Vector = hdg_backend_cuda::DeviceVector<T>>,
{
    let (m, k) = (op.m(), op.k());
    let entries = op.entries(T::PRECISION).map_err(|e| CoreError::Backend(e.to_string()))?;
    let a: Vec<T> = entries.iter().map(|&v| T::from_f64_lossy(v)).collect();
    let nnz = a.iter().filter(|&&v| v != T::zero()).count();
    let backend = &paths[0];
    let b: Vec<T> = (0..k * n).map(|i| T::from_f64_lossy(((i as f64) * 0.618).sin())).collect();
    let bs = [backend.copy_from_host(&b)?, backend.copy_from_host(&b)?];
    let mut c = VectorOps::<T>::zeros(backend, m * n)?;
    // The check runs on the first columns only: the whole C of the largest operators is
    // gigabytes.
    let n_check = n.min(20_000);
    let mut c_check = VectorOps::<T>::zeros(backend, m * n_check)?;
    let mut times = Vec::new();
    let mut first: Option<Vec<T>> = None;
    for path in paths {
        let device = path.constant_operator(op.name(), m, k, &a)?;
        device.apply(path, n_check, &bs[0], n, &mut c_check, n_check)?;
        let got = path.to_host(&c_check)?;
        // The paths must agree (rounding: relative to the largest value) before timing.
        if let Some(first) = &first {
            let scale = first.iter().fold(0.0f64, |s, v| s.max(v.as_f64().abs()));
            let diff = first
                .iter()
                .zip(&got)
                .fold(0.0f64, |d, (x, y)| d.max((x.as_f64() - y.as_f64()).abs()));
            let tol = 2e3 * T::UNIT_ROUNDOFF * scale;
            if diff.is_nan() || diff > tol {
                return Err(CoreError::Backend(format!(
                    "{}: the {} path differs from the kernels' by {diff:e} (> {tol:e})",
                    op.name(),
                    device.path()
                )));
            }
        } else {
            first = Some(got);
        }
        let t = time_queued(path, hold, samples, 3, |i| {
            device.apply(path, n, &bs[i % 2], n, &mut c, n)
        })?;
        let label = match device.generated_variant(path, n, &bs[0], n, &c, n) {
            Some(variant) => format!("{} {}", device.path(), variant.tag()),
            None => device.path().to_string(),
        };
        times.push((t * 1e3, label));
    }
    // The automatic choice with kernels compiled for this panel: checked on the first columns
    // (compiled for that shape too) against the kernels' path, then timed.
    let auto_backend = &paths[2];
    let mut device = auto_backend.constant_operator(op.name(), m, k, &a)?;
    device.compile_for_panel(auto_backend, n, n_check)?;
    device.apply(auto_backend, n_check, &bs[0], n, &mut c_check, n_check)?;
    let got = auto_backend.to_host(&c_check)?;
    if let Some(first) = &first {
        if device.path_for_panel(auto_backend, n_check, n, n_check) != device.path() {
            let same =
                first.iter().zip(&got).all(|(x, y)| x.as_f64().to_bits() == y.as_f64().to_bits());
            if !same {
                return Err(CoreError::Backend(format!(
                    "{}: the compiled kernels do not give the built-in kernels' bits",
                    op.name()
                )));
            }
        }
    }
    let clock = Instant::now();
    device.compile_for_panel(auto_backend, n, n)?;
    let compile = clock.elapsed().as_secs_f64();
    let compiled = time_queued(auto_backend, hold, samples, 3, |i| {
        device.apply(auto_backend, n, &bs[i % 2], n, &mut c, n)
    })? * 1e3;
    let compiled_path = match device.generated_variant(auto_backend, n, &bs[0], n, &c, n) {
        Some(variant) => {
            format!("{} {}", device.path_for_panel(auto_backend, n, n, n), variant.tag())
        }
        None => device.path_for_panel(auto_backend, n, n, n).to_string(),
    };
    let [(kernels, kernel_path), (cublas, _), (auto, auto_path)] =
        [times[0].clone(), times[1].clone(), times[2].clone()];
    println!(
        "| {} | {} | {:.0e} | {m} x {k} | {nnz} | {kernels:.4} ({kernel_path}) | {cublas:.4} | \
         {auto:.4} ({auto_path}) | {:.2} | {compiled:.4} ({compiled_path}) | {compile:.2} | {:.2} |",
        op.name(),
        T::NAME,
        n as f64,
        auto / kernels.min(cublas),
        compiled / auto
    );
    Ok(())
}
