//! condense-bench: times the element stages of the CUDA backend in every kernel design that is
//! compiled for a (cell type, order, precision), and prints the selection that
//! `hdg_backend_cuda::design` encodes.
//!
//! For each dimension (2: triangles of a perturbed unit square, 3: Kuhn tetrahedra of a
//! perturbed unit cube), order k and precision it builds a mesh of about `--cells` cells (fewer
//! if the outputs would not fit in `--memory-fraction` of the free device memory), prepares
//! the discretization on the device, and then:
//!
//! - condensation: for each design (thread, block, block-global), median over `--samples`
//!   launches after `--warmup`, each launch timed alone with CUDA events (outputs allocated
//!   once, no synchronisation or check inside the timed region; the kernel forms S, P, A from
//!   the geometry and the reference tables inside it, the loads F_K come precomputed), then a
//!   check of the first `--check` elements against `hdg_backend_cpu::stages::condense::condense_element`
//!   (max |gpu - cpu| / max |cpu| over K_e, b_e, Z, u0; "bitwise" when every value is equal);
//! - recovery (from a random trace vector) and postprocessing, each design, the same way;
//! - cells/s, and GFLOP/s of the condensation with the flop count of
//!   `hdg_backend_cpu::stages::condense::condensation_flops` (the CPU's documented count of the
//!   algorithm; it includes 2 n_q n for the load quadrature, which the GPU kernels do not do:
//!   F_K is computed on the host; the share is printed per row), the same count the PyTorch
//!   comparison uses (`scripts/torch_condense.py`, through meta.txt).
//!
//! At the end: the selection table (fastest design per stage, cell type, order, precision)
//! and the `match` arms for `design::condensation_design` and its siblings.
//!
//! `--export DIR`: for each (cell, k), `DIR/{tri,tet}_k{k}/` gets a batch of `--batch`
//! elements of what the condensation consumes, formed on the host exactly as
//! `condense_element` forms them (f64, element-contiguous, row-major, little-endian): `S.f64`
//! (n x n, SPD), `P.f64` (n x nl), `C.f64` (the trace-trace block A, nl x nl), `F.f64` (n), and
//! this GPU's results for the same elements, `K.f64` (nl x nl) and `b.f64` (nl), plus
//! `meta.txt` (key = value: sizes, the cell count and flop count, our f64 and f32 median
//! times). PyTorch gets pre-formed S, P, C: the forming is inside our timed region, not in
//! theirs, which favours PyTorch.
//!
//! Usage: condense-bench [--cells 1e5] [--dims 2,3] [--orders 1,...,8] [--precisions f64,f32]
//!        [--samples 10] [--warmup 2] [--check 8] [--designs thread,block,block-global]
//!        [--no-local-stages] [--memory-fraction 0.6] [--export DIR] [--batch 32]
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use cust::event::{Event, EventFlags};
use hdg_backend_cpu::stages::condense::{
    condensation_flops, condense_element, form_element_matrices, CondenseScratch, CondensedElement,
};
use hdg_backend_cpu::stages::prepare::ElementInput;
use hdg_backend_cuda::design::{compiled, shared_bytes, ElementSizes};
use hdg_backend_cuda::{
    CondensedArray, CudaBackend, CudaSettings, Design, DevicePrepared, DeviceReal, ElementStage,
    Precision,
};
use hdg_core::geometry::{cell_geometry, GeometryLayout};
use hdg_core::load::element_load;
use hdg_core::{
    CellType, Coefficient, CoreError, Discretization, LocalSolver, Manufactured, Problem, Real,
    Result, VectorOps,
};
use hdg_mesh::Mesh;

struct Args {
    cells: f64,
    dims: Vec<usize>,
    orders: Vec<usize>,
    precisions: Vec<Precision>,
    designs: Vec<Design>,
    samples: usize,
    warmup: usize,
    check: usize,
    local_stages: bool,
    memory_fraction: f64,
    export: Option<PathBuf>,
    batch: usize,
}

fn usage() -> String {
    "usage: condense-bench [--cells 1e5] [--dims 2,3] [--orders 1,2,3,4,5,6,7,8] \
     [--precisions f64,f32] [--samples 10] [--warmup 2] [--check 8] \
     [--designs thread,block,block-global] [--no-local-stages] [--memory-fraction 0.6] \
     [--export DIR] [--batch 32]"
        .into()
}

fn list<V: std::str::FromStr>(v: &str) -> std::result::Result<Vec<V>, ()> {
    v.split(',').map(|s| s.trim().parse::<V>().map_err(|_| ())).collect()
}

fn parse_args() -> std::result::Result<Args, String> {
    let mut args = Args {
        cells: 1e5,
        dims: vec![2, 3],
        orders: (1..=8).collect(),
        precisions: vec![Precision::F64, Precision::F32],
        designs: Design::ALL.to_vec(),
        samples: 10,
        warmup: 2,
        check: 8,
        local_stages: true,
        memory_fraction: 0.6,
        export: None,
        batch: 32,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value\n{}", usage()));
        let bad = |v: &str| format!("bad value {v:?} for {flag}\n{}", usage());
        match flag.as_str() {
            "--cells" => {
                let v = value()?;
                args.cells = v.parse().map_err(|_| bad(&v))?;
            }
            "--dims" => {
                let v = value()?;
                args.dims = list(&v).map_err(|_| bad(&v))?;
            }
            "--orders" => {
                let v = value()?;
                args.orders = list(&v).map_err(|_| bad(&v))?;
            }
            "--precisions" => {
                let v = value()?;
                args.precisions = v
                    .split(',')
                    .map(|s| match s.trim() {
                        "f64" => Ok(Precision::F64),
                        "f32" => Ok(Precision::F32),
                        _ => Err(bad(&v)),
                    })
                    .collect::<std::result::Result<_, _>>()?;
            }
            "--designs" => {
                let v = value()?;
                args.designs = list(&v).map_err(|_| bad(&v))?;
            }
            "--samples" => {
                let v = value()?;
                args.samples = v.parse().map_err(|_| bad(&v))?;
            }
            "--warmup" => {
                let v = value()?;
                args.warmup = v.parse().map_err(|_| bad(&v))?;
            }
            "--check" => {
                let v = value()?;
                args.check = v.parse().map_err(|_| bad(&v))?;
            }
            "--memory-fraction" => {
                let v = value()?;
                args.memory_fraction = v.parse().map_err(|_| bad(&v))?;
            }
            "--batch" => {
                let v = value()?;
                args.batch = v.parse().map_err(|_| bad(&v))?;
            }
            "--no-local-stages" => args.local_stages = false,
            "--export" => args.export = Some(PathBuf::from(value()?)),
            "-h" | "--help" => return Err(usage()),
            other => return Err(format!("unknown argument {other:?}\n{}", usage())),
        }
    }
    let orders_ok =
        args.orders.iter().all(|k| (1..=hdg_backend_cuda::MAX_ELEMENT_ORDER).contains(k));
    let dims_ok = args.dims.iter().all(|d| *d == 2 || *d == 3);
    if args.samples == 0 || args.cells < 1.0 || !orders_ok || !dims_ok || args.batch == 0 {
        return Err(usage());
    }
    if !(0.05..=0.95).contains(&args.memory_fraction) {
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
            eprintln!("condense-bench: {e}");
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
    mut f: impl FnMut() -> Result<()>,
) -> Result<f64> {
    for _ in 0..warmup {
        f()?;
    }
    backend.synchronize()?;
    let start = Event::new(EventFlags::DEFAULT).map_err(cuda("event"))?;
    let stop = Event::new(EventFlags::DEFAULT).map_err(cuda("event"))?;
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples {
        start.record(backend.stream()).map_err(cuda("event record"))?;
        f()?;
        stop.record(backend.stream()).map_err(cuda("event record"))?;
        stop.synchronize().map_err(cuda("event synchronize"))?;
        times.push(stop.elapsed_time_f32(&start).map_err(cuda("event time"))? as f64 * 1e-3);
    }
    times.sort_by(|a, b| a.partial_cmp(b).expect("finite times"));
    Ok(times[samples / 2])
}

/// Values of T the device holds per cell for one (cell, k): the condensation's outputs, the
/// recovered and postprocessed fields, the inputs (geometry, loads, coefficients, faces).
fn values_per_cell(s: &ElementSizes) -> usize {
    s.nl * s.nl + s.nl + s.n * s.nl + s.n + s.n + s.dim * s.n + s.n_post + 64 + s.n
}

/// The problem: the sine solution with per-cell kappa and c (so every coefficient path is
/// exercised), tau = 1.
fn problem(n_cells: usize) -> Problem {
    let mut p = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
    p.kappa =
        Coefficient::PerCell((0..n_cells).map(|c| 1.0 + 0.5 * ((c as f64) * 0.37).sin()).collect());
    p.reaction =
        Coefficient::PerCell((0..n_cells).map(|c| 0.5 + 0.5 * ((c as f64) * 0.11).cos()).collect());
    p
}

/// What the CPU computes for one element: inputs (S, P, A, F) and the condensation's outputs
/// (K, b, Z, u0), from `condense_element` itself.
struct HostElement<T> {
    s: Vec<T>,
    p: Vec<T>,
    a: Vec<T>,
    f: Vec<T>,
    k: Vec<T>,
    b: Vec<T>,
    z: Vec<T>,
    u0: Vec<T>,
}

fn host_element<T: Real>(disc: &Discretization<'_, T>, e: usize) -> Result<HostElement<T>> {
    let t = &disc.tables;
    let mesh = disc.mesh;
    let cell = mesh.cell_type();
    let (d, fpc) = (mesh.dim(), cell.faces_per_cell());
    let (n, nl) = (t.n, t.n_local_trace());
    let vertices: Vec<f64> =
        mesh.cell_vertices(e).iter().flat_map(|&v| mesh.vertex(v).to_vec()).collect();
    let mut geometry = vec![T::zero(); GeometryLayout::new(cell).stride()];
    cell_geometry(cell, &vertices, t.face_parameter_measure, &mut geometry);
    let orientations = mesh.cell_face_orientations(e);
    let tau = &disc.tau[e * fpc..(e + 1) * fpc];
    let (kappa, reaction) = (disc.kappa[e], disc.reaction[e]);
    let input = ElementInput {
        geometry: &geometry,
        vertices: &vertices,
        orientations,
        kappa,
        reaction,
        tau,
        points: None,
    };
    // S, P, A and F exactly as condense_element forms them (the same functions).
    let (mut s, mut p, mut a) =
        (vec![T::zero(); n * n], vec![T::zero(); n * nl], vec![T::zero(); nl * nl]);
    form_element_matrices(t, &input, &mut s, &mut p, &mut a);
    let mut f = vec![T::zero(); n];
    let det = geometry[GeometryLayout::new(cell).det()];
    element_load(t, &vertices, det, &disc.problem.source, &mut vec![0.0; d], &mut f);
    let (mut k, mut b, mut z, mut u0) = (
        vec![T::zero(); nl * nl],
        vec![T::zero(); nl],
        vec![T::zero(); n * nl],
        vec![T::zero(); n],
    );
    let mut scratch = CondenseScratch::new(t);
    condense_element(
        t,
        &input,
        &disc.problem.source,
        &mut scratch,
        CondensedElement {
            trace_matrix: &mut k,
            trace_load: &mut b,
            recovery_operator: &mut z,
            recovery_load: &mut u0,
        },
    )
    .map_err(|(pivot, value)| CoreError::NotPositiveDefinite {
        element: e,
        pivot,
        value: value.as_f64(),
    })?;
    Ok(HostElement { s, p, a, f, k, b, z, u0 })
}

/// max |a - b| / max |b|, and whether a == b everywhere.
fn compare<T: Real>(a: &[T], b: &[T]) -> (f64, bool) {
    let err = a.iter().zip(b).fold(0.0f64, |m, (x, y)| m.max((x.as_f64() - y.as_f64()).abs()));
    let scale = b.iter().fold(0.0f64, |m, y| m.max(y.as_f64().abs()));
    let exact = a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y);
    (if scale > 0.0 { err / scale } else { err }, exact)
}

/// One timed row.
#[derive(Clone, Debug)]
struct Timing {
    stage: ElementStage,
    design: Design,
    seconds: f64,
}

/// Everything measured for one (cell, k, precision).
struct CaseReport {
    cells: usize,
    flops_per_element: f64,
    timings: Vec<Timing>,
}

fn label(cell: CellType) -> &'static str {
    match cell {
        CellType::Triangle => "tri",
        CellType::Tetrahedron => "tet",
    }
}

/// Runs every stage in every design for one (mesh, k, precision).
#[allow(clippy::too_many_arguments)]
fn run_case<T: DeviceReal>(
    g: &CudaBackend,
    mesh: &Mesh,
    problem: &Problem,
    k: usize,
    args: &Args,
    host: &[HostElement<T>],
    export: Option<&mut ExportBatch>,
) -> Result<CaseReport> {
    let cell = mesh.cell_type();
    let precision = Precision::of::<T>();
    let t_setup = Instant::now();
    let disc = Discretization::<T>::new(mesh, problem, k)?;
    let prep: DevicePrepared<T> = LocalSolver::<T>::prepare(g, &disc)?;
    let n_cells = prep.n_cells();
    let flops = condensation_flops(&disc.tables);
    let nq = disc.tables.load_rule.n_points() as f64;
    let load_share = 2.0 * nq * disc.tables.n as f64 / flops;
    eprintln!(
        "  {} k = {k} {}: {n_cells} cells, setup {:.1} s ({})",
        label(cell),
        precision.name(),
        t_setup.elapsed().as_secs_f64(),
        prep.kernel_image()
    );
    let mut timings = Vec::new();
    let check = host.len();
    for &design in &args.designs {
        if !compiled(ElementStage::Condense, cell, k, design) {
            continue;
        }
        let bytes = shared_bytes(ElementStage::Condense, design, cell, k, precision);
        let mut out = g.allocate_condensed(&disc, &prep)?;
        out.poison()?;
        let timed = time_launches(g, args.samples, args.warmup, || {
            g.condense_with(&disc, &prep, design, &mut out)
        });
        let seconds = match timed {
            Ok(s) => s,
            Err(e) => {
                println!(
                    "{:>4} {k:>2} {:>4} {:>8} {:>13} | skipped ({bytes} B shared): {e}",
                    label(cell),
                    precision.name(),
                    n_cells,
                    design.name()
                );
                continue;
            }
        };
        g.check_condensed(&out)?;
        // Check the first elements against the CPU's condense_element.
        let (mut err, mut exact) = (0.0f64, true);
        for (array, pick) in [
            (CondensedArray::TraceMatrices, 0usize),
            (CondensedArray::TraceLoads, 1),
            (CondensedArray::RecoveryOperator, 2),
            (CondensedArray::RecoveryLoad, 3),
        ] {
            let gpu = out.gather_to_host(array, 0, check)?;
            let cpu: Vec<T> = host
                .iter()
                .flat_map(|h| match pick {
                    0 => h.k.clone(),
                    1 => h.b.clone(),
                    2 => h.z.clone(),
                    _ => h.u0.clone(),
                })
                .collect();
            let (e, x) = compare(&gpu, &cpu);
            err = err.max(e);
            exact &= x;
        }
        println!(
            "{:>4} {k:>2} {:>4} {:>8} {:>13} | {:>10.3} {:>11.4e} {:>9.1} {:>8.1}% | {:>9.2e} {}",
            label(cell),
            precision.name(),
            n_cells,
            design.name(),
            seconds * 1e3,
            n_cells as f64 / seconds,
            flops * n_cells as f64 / seconds * 1e-9,
            100.0 * load_share,
            err,
            if exact { "bitwise" } else { "" }
        );
        timings.push(Timing { stage: ElementStage::Condense, design, seconds });
    }
    let Some(best) = timings
        .iter()
        .filter(|t| t.stage == ElementStage::Condense)
        .min_by(|a, b| a.seconds.partial_cmp(&b.seconds).expect("finite"))
        .cloned()
    else {
        return Err(CoreError::Backend(format!("no condensation design ran for {cell:?} k = {k}")));
    };
    if let Some(batch) = export {
        batch.record::<T>(&best, &disc, &prep, g, host)?;
    }
    if args.local_stages {
        let mut condensed = g.allocate_condensed(&disc, &prep)?;
        g.condense_with(&disc, &prep, best.design, &mut condensed)?;
        g.check_condensed(&condensed)?;
        let trace: Vec<T> =
            (0..disc.trace_dofs()).map(|i| T::from_f64_lossy(((i as f64) * 0.731).sin())).collect();
        let trace = g.copy_from_host(&trace)?;
        let mut reference: Option<(Vec<T>, Vec<T>)> = None;
        for &design in &args.designs {
            if !compiled(ElementStage::Recover, cell, k, design) {
                continue;
            }
            let mut fields = g.allocate_fields(&disc, &prep)?;
            fields.poison()?;
            let seconds = match time_launches(g, args.samples, args.warmup, || {
                g.recover_with(&disc, &prep, &condensed, &trace, design, &mut fields)
            }) {
                Ok(s) => s,
                Err(e) => {
                    println!("  recover {} skipped: {e}", design.name());
                    continue;
                }
            };
            g.check_recovered(&fields)?;
            let h = LocalSolver::<T>::fields_to_host(g, &fields)?;
            let diff = match &reference {
                None => {
                    reference = Some((h.u, h.q));
                    0.0
                }
                Some((u, q)) => compare(&h.u, u).0.max(compare(&h.q, q).0),
            };
            println!(
                "{:>4} {k:>2} {:>4} {:>8} {:>13} | recover     {:>10.3} ms {:>11.4e} cells/s | vs first design {diff:.2e}",
                label(cell),
                precision.name(),
                n_cells,
                design.name(),
                seconds * 1e3,
                n_cells as f64 / seconds,
            );
            timings.push(Timing { stage: ElementStage::Recover, design, seconds });
        }
        let fields = g.recover(&disc, &prep, &condensed, &trace)?;
        drop(condensed);
        let mut reference: Option<Vec<T>> = None;
        for &design in &args.designs {
            if !compiled(ElementStage::Postprocess, cell, k, design) {
                continue;
            }
            let mut post = g.allocate_postprocessed(&disc, &prep)?;
            post.poison()?;
            let seconds = match time_launches(g, args.samples, args.warmup, || {
                g.postprocess_with(&disc, &prep, &fields, design, &mut post)
            }) {
                Ok(s) => s,
                Err(e) => {
                    println!("  postprocess {} skipped: {e}", design.name());
                    continue;
                }
            };
            g.check_postprocessed(&post)?;
            let u_star = post.to_host()?;
            let diff = match &reference {
                None => {
                    reference = Some(u_star);
                    0.0
                }
                Some(r) => compare(&u_star, r).0,
            };
            println!(
                "{:>4} {k:>2} {:>4} {:>8} {:>13} | postprocess {:>10.3} ms {:>11.4e} cells/s | vs first design {diff:.2e}",
                label(cell),
                precision.name(),
                n_cells,
                design.name(),
                seconds * 1e3,
                n_cells as f64 / seconds,
            );
            timings.push(Timing { stage: ElementStage::Postprocess, design, seconds });
        }
    }
    Ok(CaseReport { cells: n_cells, flops_per_element: flops, timings })
}

/// The exported batch of one (cell, k): host inputs in f64 and both precisions' timings.
struct ExportBatch {
    dir: PathBuf,
    meta: Vec<(String, String)>,
}

impl ExportBatch {
    /// Writes the inputs (f64 only) and our outputs, and records the timings of `best`.
    fn record<T: DeviceReal>(
        &mut self,
        best: &Timing,
        disc: &Discretization<'_, T>,
        prep: &DevicePrepared<T>,
        g: &CudaBackend,
        host: &[HostElement<T>],
    ) -> Result<()> {
        let precision = Precision::of::<T>();
        let p = precision.name();
        self.meta.push((format!("ours_{p}_seconds"), format!("{:e}", best.seconds)));
        self.meta.push((format!("ours_{p}_design"), best.design.name().to_string()));
        if precision != Precision::F64 {
            return Ok(());
        }
        // Our K and b for the same elements (the fastest design, run once more).
        let mut out = g.allocate_condensed(disc, prep)?;
        g.condense_with(disc, prep, best.design, &mut out)?;
        g.check_condensed(&out)?;
        let count = host.len();
        let k = out.gather_to_host(CondensedArray::TraceMatrices, 0, count)?;
        let b = out.gather_to_host(CondensedArray::TraceLoads, 0, count)?;
        drop(out);
        std::fs::create_dir_all(&self.dir)?;
        let write = |name: &str, values: &mut dyn Iterator<Item = f64>| -> Result<()> {
            let mut bytes = Vec::new();
            for v in values {
                bytes.extend_from_slice(&v.to_le_bytes());
            }
            std::fs::write(self.dir.join(name), bytes)?;
            Ok(())
        };
        write("S.f64", &mut host.iter().flat_map(|h| h.s.iter().map(|v| v.as_f64())))?;
        write("P.f64", &mut host.iter().flat_map(|h| h.p.iter().map(|v| v.as_f64())))?;
        write("C.f64", &mut host.iter().flat_map(|h| h.a.iter().map(|v| v.as_f64())))?;
        write("F.f64", &mut host.iter().flat_map(|h| h.f.iter().map(|v| v.as_f64())))?;
        write("K.f64", &mut k.iter().map(|v| v.as_f64()))?;
        write("b.f64", &mut b.iter().map(|v| v.as_f64()))?;
        Ok(())
    }

    fn write_meta(&self) -> Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let mut f = File::create(self.dir.join("meta.txt"))?;
        for (k, v) in &self.meta {
            writeln!(f, "{k} = {v}")?;
        }
        Ok(())
    }
}

/// Checks the host reference itself: K = A - P^T S^-1 P and b = P^T S^-1 F from the exported
/// S, P, A, F (a plain f64 Cholesky) against condense_element's K and b.
fn check_export_inputs(host: &[HostElement<f64>], s: &ElementSizes) -> f64 {
    let (n, nl) = (s.n, s.nl);
    let mut worst = 0.0f64;
    for h in host {
        let mut l = h.s.clone();
        if hdg_backend_cpu::dense::cholesky(n, &mut l).is_err() {
            return f64::INFINITY;
        }
        let mut w = h.p.clone();
        hdg_backend_cpu::dense::forward_substitution(n, nl, &l, &mut w);
        let mut k = h.a.clone();
        hdg_backend_cpu::dense::subtract_gram(n, nl, &w, &mut k);
        let mut w0 = h.f.clone();
        hdg_backend_cpu::dense::forward_substitution(n, 1, &l, &mut w0);
        let mut b = vec![0.0; nl];
        hdg_backend_cpu::dense::transpose_times(n, nl, &w, &w0, &mut b);
        worst = worst.max(compare(&k, &h.k).0).max(compare(&b, &h.b).0);
    }
    worst
}

/// Host references of the first `count` elements, for a precision.
fn host_elements<T: Real>(
    mesh: &Mesh,
    problem: &Problem,
    k: usize,
    count: usize,
) -> Result<Vec<HostElement<T>>> {
    let disc = Discretization::<T>::new(mesh, problem, k)?;
    (0..count.min(mesh.n_cells())).map(|e| host_element(&disc, e)).collect()
}

fn run(args: &Args) -> Result<()> {
    let g = CudaBackend::new()?.with_settings(CudaSettings::from_environment()?)?;
    println!("device: {}", g.describe());
    println!(
        "median of {} launches after {} warm-up launches, each timed alone with CUDA events; \
         GFLOP/s with hdg_backend_cpu::stages::condense::condensation_flops (load share: its 2 n_q n \
         load-quadrature term, not done on the GPU); err: max |gpu - cpu| / max |cpu| over \
         K_e, b_e, Z, u0 of the first {} elements against condense_element",
        args.samples, args.warmup, args.check
    );
    println!(
        "{:>4} {:>2} {:>4} {:>8} {:>13} | {:>10} {:>11} {:>9} {:>9} | {:>9}",
        "cell", "k", "prec", "cells", "design", "ms", "cells/s", "GFLOP/s", "load", "err"
    );
    let mut results: BTreeMap<(usize, usize, &'static str), CaseReport> = BTreeMap::new();
    for &dim in &args.dims {
        let cell = if dim == 2 { CellType::Triangle } else { CellType::Tetrahedron };
        for &k in &args.orders {
            let sizes = ElementSizes::new(cell, k);
            // As many cells as fit in the memory fraction, up to --cells.
            let (free, _) = g.memory_info()?;
            let fit = args.memory_fraction * free as f64 / (8 * values_per_cell(&sizes)) as f64;
            let target = args.cells.min(fit);
            let t_mesh = Instant::now();
            let mesh = hdg_bench::stages::element_benchmark_mesh(dim, target)?;
            let problem = problem(mesh.n_cells());
            eprintln!(
                "{} k = {k}: mesh of {} cells ({} wanted, {:.0} fit) in {:.1} s",
                label(cell),
                mesh.n_cells(),
                args.cells,
                fit,
                t_mesh.elapsed().as_secs_f64()
            );
            let mut export = args.export.as_ref().map(|dir| ExportBatch {
                dir: dir.join(format!("{}_k{k}", label(cell))),
                meta: vec![
                    ("cell".into(), label(cell).into()),
                    ("dim".into(), dim.to_string()),
                    ("k".into(), k.to_string()),
                    ("n".into(), sizes.n.to_string()),
                    ("nl".into(), sizes.nl.to_string()),
                    ("cells".into(), mesh.n_cells().to_string()),
                ],
            });
            for &precision in &args.precisions {
                let report = match precision {
                    Precision::F64 => {
                        let host = host_elements::<f64>(
                            &mesh,
                            &problem,
                            k,
                            args.check.max(if export.is_some() { args.batch } else { 0 }),
                        )?;
                        if let Some(batch) = export.as_mut() {
                            let worst = check_export_inputs(&host, &sizes);
                            eprintln!("  export: K, b from the exported S, P, C, F vs condense_element: {worst:.2e}");
                            batch.meta.push(("batch".into(), host.len().to_string()));
                            batch.meta.push(("host_reference_error".into(), format!("{worst:e}")));
                        }
                        run_case::<f64>(&g, &mesh, &problem, k, args, &host, export.as_mut())
                    }
                    Precision::F32 => {
                        let host = host_elements::<f32>(&mesh, &problem, k, args.check.max(1))?;
                        run_case::<f32>(&g, &mesh, &problem, k, args, &host, export.as_mut())
                    }
                };
                match report {
                    Ok(r) => {
                        if let Some(batch) = export.as_mut() {
                            if !batch.meta.iter().any(|(key, _)| key == "flops_per_element") {
                                batch.meta.push((
                                    "flops_per_element".into(),
                                    format!("{:e}", r.flops_per_element),
                                ));
                            }
                        }
                        results.insert((dim, k, precision.name()), r);
                    }
                    Err(e) => {
                        println!("{:>4} {k:>2} {:>4}: failed: {e}", label(cell), precision.name())
                    }
                }
            }
            if let Some(batch) = &export {
                batch.write_meta()?;
            }
        }
    }
    print_selection(&results);
    Ok(())
}

/// (stage, dimension, precision) of a line of the suggested dispatch.
type ArmKey = (ElementStage, usize, &'static str);

fn print_selection(results: &BTreeMap<(usize, usize, &'static str), CaseReport>) {
    println!();
    println!(
        "selection (fastest design; in brackets: its speed-up over the slowest design that ran)"
    );
    println!(
        "{:>4} {:>2} {:>4} {:>8} | {:>24} | {:>24} | {:>24}",
        "cell", "k", "prec", "cells", "condense", "recover", "postprocess"
    );
    let mut arms: BTreeMap<ArmKey, Vec<(usize, Design)>> = BTreeMap::new();
    for ((dim, k, prec), r) in results {
        let cell = if *dim == 2 { "tri" } else { "tet" };
        let mut cols = Vec::new();
        for stage in ElementStage::ALL {
            let rows: Vec<&Timing> = r.timings.iter().filter(|t| t.stage == stage).collect();
            let best =
                rows.iter().min_by(|a, b| a.seconds.partial_cmp(&b.seconds).expect("finite"));
            let worst =
                rows.iter().max_by(|a, b| a.seconds.partial_cmp(&b.seconds).expect("finite"));
            match (best, worst) {
                (Some(b), Some(w)) => {
                    cols.push(format!("{} ({:.2}x)", b.design.name(), w.seconds / b.seconds));
                    arms.entry((stage, *dim, prec)).or_default().push((*k, b.design));
                }
                _ => cols.push("-".into()),
            }
        }
        println!(
            "{cell:>4} {k:>2} {prec:>4} {:>8} | {:>24} | {:>24} | {:>24}",
            r.cells, cols[0], cols[1], cols[2]
        );
    }
    println!();
    println!("suggested dispatch (stage, cell, precision: order -> design), for src/design.rs:");
    for ((stage, dim, prec), list) in &arms {
        let cell = if *dim == 2 { "Triangle" } else { "Tetrahedron" };
        let entries: Vec<String> = list.iter().map(|(k, d)| format!("{k} => {:?}", d)).collect();
        println!("  {stage} {cell} {prec}: {}", entries.join(", "));
    }
}
