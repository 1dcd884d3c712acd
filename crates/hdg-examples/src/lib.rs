//! The pieces of the `hdg` program that tests and benchmarks reuse: mesh specifications, the
//! problem catalogue, and one solve with a chosen backend and precision.
pub mod bench;
pub mod compare;
pub mod malloc_tunables;
pub mod operators;
pub mod plot;
pub mod problem_file;

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use hdg_backend_cpu::CpuBackend;
pub use hdg_backend_cuda::{CudaSettings, TraceOperatorKind};
use hdg_core::{
    solve, Assembler, Backend, CoreError, DemoteOperator, HostCsr, Manufactured, MixedPrecisionOps,
    MultigridOps, PipelineOptions, PipelineOutput, PipelineReport, Problem, Progress, Real,
    TraceOperator,
};
use hdg_linalg::{MixedPrecisionRefinement, SolverChoice, Suite};
use hdg_mesh::{generate, Diagonal, Mesh};

/// The domain of a [`MeshSpec`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MeshKind {
    /// The unit square, N x N squares, each cut into 2 triangles.
    Square,
    /// The unit cube, N x N x N boxes, each cut into 6 tetrahedra (Kuhn split).
    Cube,
}

/// A mesh given on the command line: `square:N` is the unit square cut into N x N squares,
/// each split into two triangles; `cube:N` is the unit cube cut into N x N x N boxes, each
/// split into six tetrahedra; a path ending in `.msh` is a Gmsh file
/// ([`hdg_mesh::gmsh::read`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MeshSpec {
    /// A generated square or cube.
    Generated {
        /// Square or cube.
        kind: MeshKind,
        /// Squares (boxes) per side.
        n: usize,
    },
    /// A Gmsh `.msh` file.
    File(PathBuf),
}

impl FromStr for MeshSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.ends_with(".msh") {
            return Ok(MeshSpec::File(PathBuf::from(s)));
        }
        let (kind, size) = s
            .split_once(':')
            .ok_or_else(|| format!("mesh '{s}' is not of the form square:N, cube:N or FILE.msh"))?;
        let kind = match kind {
            "square" => MeshKind::Square,
            "cube" => MeshKind::Cube,
            _ => return Err(format!("unknown mesh kind '{kind}' (known: square, cube)")),
        };
        let n: usize =
            size.parse().map_err(|_| format!("mesh size '{size}' is not a positive integer"))?;
        if n == 0 {
            return Err("mesh size N must be at least 1".into());
        }
        Ok(MeshSpec::Generated { kind, n })
    }
}

impl std::fmt::Display for MeshSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MeshSpec::Generated { kind: MeshKind::Square, n } => write!(f, "square:{n}"),
            MeshSpec::Generated { kind: MeshKind::Cube, n } => write!(f, "cube:{n}"),
            MeshSpec::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// A mesh with the lines a summary prints about it.
#[derive(Clone, Debug)]
pub struct BuiltMesh {
    /// The mesh.
    pub mesh: Mesh,
    /// Boundary faces per tag (with the tag's name where the file names it), cells flipped
    /// and what a mesh file held that is not used: one line each.
    pub summary: Vec<String>,
    /// The mesh file's physical groups (names to tags), for a mesh read from a file.
    pub file: Option<hdg_mesh::gmsh::PhysicalGroups>,
    /// Each cell's region (physical group tag, 0 for none), for a mesh read from a file.
    pub regions: Option<Vec<u32>>,
}

impl MeshSpec {
    /// Builds (or reads) the mesh, optionally perturbed. `diagonal` applies to squares only
    /// (the cube's Kuhn split is fixed).
    pub fn build(
        &self,
        diagonal: Diagonal,
        perturbation: f64,
        seed: u64,
    ) -> Result<BuiltMesh, CoreError> {
        let mut summary = Vec::new();
        let (mut file, mut regions) = (None, None);
        let (mesh, names) = match self {
            MeshSpec::Generated { kind: MeshKind::Square, n } => {
                (generate::unit_square(*n, diagonal)?, None)
            }
            MeshSpec::Generated { kind: MeshKind::Cube, n } => (generate::unit_cube(*n)?, None),
            MeshSpec::File(path) => {
                let read = hdg_mesh::gmsh::read(path)?;
                if read.flipped_cells > 0 {
                    summary.push(format!(
                        "{} of {} cells were negatively oriented in the file and were flipped",
                        read.flipped_cells,
                        read.mesh.n_cells()
                    ));
                }
                summary.extend(read.notes.iter().cloned());
                let dim = read.mesh.dim();
                let names: Vec<(u32, String)> = read
                    .mesh
                    .boundary_tag_counts()
                    .iter()
                    .map(|&(t, _)| {
                        let name = if t == hdg_mesh::gmsh::UNTAGGED {
                            "untagged".to_string()
                        } else {
                            read.groups.name(dim - 1, t).unwrap_or("unnamed").to_string()
                        };
                        (t, name)
                    })
                    .collect();
                file = Some(read.groups);
                regions = Some(read.cell_regions);
                (read.mesh, Some(names))
            }
        };
        let tags: Vec<String> = mesh
            .boundary_tag_counts()
            .iter()
            .map(|&(t, count)| {
                match names.as_ref().and_then(|n| n.iter().find(|(tag, _)| *tag == t)) {
                    Some((t, name)) if *t == hdg_mesh::gmsh::UNTAGGED => format!("{name}: {count}"),
                    Some((t, name)) => format!("{name} ({t}): {count}"),
                    None => format!("{t}: {count}"),
                }
            })
            .collect();
        summary.insert(0, format!("boundary faces per tag: {}", tags.join(", ")));
        let mesh =
            if perturbation > 0.0 { generate::perturb(&mesh, perturbation, seed)? } else { mesh };
        Ok(BuiltMesh { mesh, summary, file, regions })
    }
}

impl MeshSpec {
    /// Refuses a generated mesh whose problem cannot fit in the host's memory before building
    /// it (the whole CPU pipeline's estimate at order `order`; the mesh alone for the CUDA
    /// backend, whose element data live on the device and are checked there). Mesh files pass:
    /// their size is known once read.
    ///
    /// # Errors
    /// [`CoreError::OutOfHostMemory`] with the estimate.
    pub fn check_size(
        &self,
        order: usize,
        backend: BackendKind,
        precision: Precision,
    ) -> Result<(), CoreError> {
        let MeshSpec::Generated { kind, n } = self else { return Ok(()) };
        let n = *n as u64;
        let (cell, cells) = match kind {
            MeshKind::Square => {
                (hdg_core::CellType::Triangle, n.saturating_mul(n).saturating_mul(2))
            }
            MeshKind::Cube => (
                hdg_core::CellType::Tetrahedron,
                n.saturating_mul(n).saturating_mul(n).saturating_mul(6),
            ),
        };
        let value_bytes = match precision {
            Precision::F64 => 8,
            Precision::F32 => 4,
        };
        let estimate = match backend {
            BackendKind::Cpu => {
                hdg_core::resources::pipeline_bytes(cell, cells, order, value_bytes)
            }
            BackendKind::Cuda => hdg_core::resources::mesh_bytes(cell, cells),
        };
        hdg_core::resources::check_host_memory(&format!("{self} ({cells} cells)"), estimate)
    }
}

/// Parses tau: a positive number (tau on every face), or `kappa-over-h[:SCALE]` for
/// tau = SCALE kappa / h per cell ([`hdg_core::Tau::KappaOverH`]).
pub fn parse_tau(s: &str) -> Result<hdg_core::Tau, String> {
    let positive = |v: &str| -> Result<f64, String> {
        match v.parse::<f64>() {
            Ok(t) if t.is_finite() && t > 0.0 => Ok(t),
            _ => Err(format!("'{v}' is not a positive number")),
        }
    };
    match s.split_once(':') {
        _ if s == "kappa-over-h" => Ok(hdg_core::Tau::KappaOverH { scale: 1.0 }),
        Some(("kappa-over-h", scale)) => Ok(hdg_core::Tau::KappaOverH { scale: positive(scale)? }),
        _ => positive(s)
            .map(hdg_core::Tau::Constant)
            .map_err(|e| format!("{e}: tau is a positive number or kappa-over-h[:SCALE]")),
    }
}

/// The boundary conditions the program sets up (`--bc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BoundaryKind {
    /// Dirichlet data on the whole boundary.
    Dirichlet,
    /// Dirichlet on x = 0, Robin (alpha = 1) on x = 1, Neumann elsewhere
    /// ([`Problem::with_mixed_boundary`]).
    Mixed,
}

/// The manufactured problems the program knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ProblemKind {
    /// u = sin(pi x) sin(pi y) (sin(pi z) in 3D)
    Sine,
    /// u = exp(x) sin(2 y) (cosh(z) in 3D)
    Expsin,
    /// a polynomial of degree K (reproduced exactly)
    Poly,
}

impl ProblemKind {
    /// The problem for order `order`.
    pub fn problem(self, order: usize) -> Problem {
        let solution = match self {
            ProblemKind::Sine => Manufactured::Sine,
            ProblemKind::Expsin => Manufactured::ExpSin,
            ProblemKind::Poly => Manufactured::Polynomial(order),
        };
        Problem::manufactured(solution, 1.0, 0.0)
    }
}

pub use hdg_core::Precision;

/// Parses a solver name of the suite (for clap).
pub fn parse_solver(name: &str) -> Result<SolverChoice, String> {
    SolverChoice::ALL.into_iter().find(|c| c.name() == name).ok_or_else(|| {
        let names: Vec<_> = SolverChoice::ALL.iter().map(|c| c.name()).collect();
        format!("unknown solver '{name}' (known: {})", names.join(", "))
    })
}

/// Everything one solve needs besides the mesh and the problem.
#[derive(Clone, Debug)]
pub struct SolveSettings {
    /// Polynomial order.
    pub order: usize,
    /// Relative residual tolerance.
    pub tolerance: f64,
    /// Iteration cap.
    pub max_iterations: usize,
    /// Trace solver.
    pub solver: SolverChoice,
    /// Trace operator: the assembled DBF matrix, or matrix-free (CUDA backend only).
    pub operator: TraceOperatorKind,
    /// Tuning overrides of the CUDA backend (the `hdg` program reads them from the
    /// environment: [`CudaSettings::from_environment`]).
    pub cuda: CudaSettings,
    /// Copy the solution to the host ([`Measured::solution`]) for output files.
    pub keep_solution: bool,
}

impl SolveSettings {
    fn suite(&self) -> Suite {
        Suite {
            choice: self.solver,
            tolerance: self.tolerance,
            max_iterations: self.max_iterations,
        }
    }

    /// Mixed-precision refinement with this run's tolerance.
    pub fn mixed(&self) -> MixedPrecisionRefinement {
        MixedPrecisionRefinement {
            tolerance: self.tolerance,
            ..MixedPrecisionRefinement::default()
        }
    }
}

/// The backend a run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendKind {
    /// Rayon on the host.
    Cpu,
    /// CUDA (builds with `--features cuda`).
    Cuda,
}

/// Runs the pipeline on the chosen backend; with `export_matrix`, also writes the assembled
/// trace matrix (Dirichlet unknowns eliminated) as a Matrix Market file.
pub fn solve_on(
    backend: BackendKind,
    mesh: &Mesh,
    problem: &Problem,
    settings: &SolveSettings,
    precision: Precision,
    export_matrix: Option<&Path>,
    progress: &mut dyn Progress,
) -> Result<PipelineReport, CoreError> {
    solve_measured(backend, mesh, problem, settings, precision, export_matrix, progress)
        .map(|m| m.report)
}

/// Peak device memory of a run on the CUDA backend (sampled from a background thread every
/// [`MEMORY_SAMPLE_INTERVAL`]: see `hdg_backend_cuda::CudaBackend::watch_memory` for what the
/// figure includes and its resolution).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeviceMemory {
    /// The largest device memory in use during the run, above what was in use at its start
    /// (the context, the kernels, other processes), bytes.
    pub peak_bytes: u64,
    /// Device memory in use when the run started, bytes.
    pub baseline_used_bytes: u64,
    /// The device's memory, bytes.
    pub total_bytes: u64,
    /// Samples taken.
    pub samples: u64,
    /// Interval between samples, seconds.
    pub interval_s: f64,
}

/// How often a CUDA run samples the device memory in use.
pub const MEMORY_SAMPLE_INTERVAL: std::time::Duration = std::time::Duration::from_micros(500);

/// A run's report with the memory it used.
#[derive(Debug)]
pub struct Measured {
    /// The pipeline's report.
    pub report: PipelineReport,
    /// The solution on the host, if [`SolveSettings::keep_solution`].
    pub solution: Option<hdg::Solution>,
    /// Peak device memory (CUDA runs only).
    pub device_memory: Option<DeviceMemory>,
    /// The process's peak resident set size so far (Linux `VmHWM`), bytes, where known.
    pub host_peak_rss_bytes: Option<u64>,
}

/// The process's peak resident set size (`VmHWM` of `/proc/self/status`), bytes; `None` where
/// there is no such file (not Linux).
pub fn host_peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 =
        line.trim_start_matches("VmHWM:").trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

/// [`solve_on`], with the peak device memory (CUDA) and the host's peak resident set size.
pub fn solve_measured(
    backend: BackendKind,
    mesh: &Mesh,
    problem: &Problem,
    settings: &SolveSettings,
    precision: Precision,
    export_matrix: Option<&Path>,
    progress: &mut dyn Progress,
) -> Result<Measured, CoreError> {
    if backend == BackendKind::Cpu && settings.operator != TraceOperatorKind::Dbf {
        return Err(CoreError::InvalidParameter {
            name: "operator",
            reason: format!(
                "the {} trace operator exists on the CUDA backend only (use --backend cuda, or \
                 --operator dbf on the CPU)",
                settings.operator
            ),
        });
    }
    let ((report, solution), device_memory) = match backend {
        BackendKind::Cpu => (
            run_all(
                &CpuBackend::new(),
                mesh,
                problem,
                settings,
                precision,
                export_matrix,
                progress,
            )?,
            None,
        ),
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => {
            let cuda = hdg_backend_cuda::CudaBackend::new()?
                .with_trace_operator(settings.operator)
                .with_settings(settings.cuda.clone())?;
            let watch = cuda.watch_memory(MEMORY_SAMPLE_INTERVAL)?;
            let run = run_all(&cuda, mesh, problem, settings, precision, export_matrix, progress)?;
            let peak = watch.stop()?;
            let memory = DeviceMemory {
                peak_bytes: peak.peak_bytes() as u64,
                baseline_used_bytes: peak.baseline_used_bytes as u64,
                total_bytes: peak.total_bytes as u64,
                samples: peak.samples,
                interval_s: peak.interval.as_secs_f64(),
            };
            (run, Some(memory))
        }
        #[cfg(not(feature = "cuda"))]
        BackendKind::Cuda => return Err(hdg_backend_cuda::availability().unwrap_err()),
    };
    Ok(Measured { report, solution, device_memory, host_peak_rss_bytes: host_peak_rss_bytes() })
}

/// One backend, both precisions, every solver (mixed precision in f64 only): the report, and
/// the solution on the host if the settings keep it.
fn run_all<B>(
    backend: &B,
    mesh: &Mesh,
    problem: &Problem,
    settings: &SolveSettings,
    precision: Precision,
    export_matrix: Option<&Path>,
    progress: &mut dyn Progress,
) -> Result<(PipelineReport, Option<hdg::Solution>), CoreError>
where
    B: Backend<f64> + Backend<f32> + MixedPrecisionOps + MultigridOps<f64> + MultigridOps<f32>,
    <B as Assembler<f64>>::Operator: DemoteOperator<B>,
{
    let options = PipelineOptions {
        keep_operator: export_matrix.is_some(),
        full_trace: settings.keep_solution,
    };
    let suite = settings.suite();
    let order = settings.order;
    let finish = |out| finish(backend, mesh, problem, export_matrix, out);
    match (precision, settings.solver) {
        (Precision::F64, SolverChoice::Mixed) => {
            let mixed = settings.mixed();
            finish(solve::<f64, B>(backend, mesh, problem, order, &mixed, options, progress)?)
        }
        (Precision::F32, SolverChoice::Mixed) => Err(CoreError::InvalidParameter {
            name: "solver",
            reason: "mixed precision refines an f64 solution: use --precision f64".into(),
        }),
        (Precision::F64, _) => {
            finish(solve::<f64, B>(backend, mesh, problem, order, &suite, options, progress)?)
        }
        (Precision::F32, _) => self::finish(
            backend,
            mesh,
            problem,
            export_matrix,
            solve::<f32, B>(backend, mesh, problem, order, &suite, options, progress)?,
        ),
    }
}

/// What a run leaves: the matrix file if asked for, the report, the solution on the host if
/// the pipeline copied the full trace.
fn finish<T: Real, B: Backend<T>>(
    backend: &B,
    mesh: &Mesh,
    problem: &Problem,
    export_matrix: Option<&Path>,
    out: PipelineOutput<T, B>,
) -> Result<(PipelineReport, Option<hdg::Solution>), CoreError> {
    if let (Some(path), Some((matrix, _))) = (export_matrix, &out.operator) {
        write_matrix_market(&matrix.to_host_csr()?, path)?;
    }
    // The solution owns its mesh: copied only when the run kept the solution.
    let solution = match out.full_trace {
        Some(_) => {
            hdg::Solution::from_output(backend, Arc::new(mesh.clone()), problem.clone(), &out)?
        }
        None => None,
    };
    Ok((out.report, solution))
}

/// Files a solve writes its solution to: a VTU file for ParaView, a PNG picture (2D).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SolutionOutputs {
    /// VTK XML unstructured grid ([`hdg::vtu::write`]).
    pub vtu: Option<PathBuf>,
    /// A picture of u* ([`plot::solution_png`]).
    pub png: Option<PathBuf>,
}

impl SolutionOutputs {
    /// Whether any file is asked for (the solution must then be kept).
    pub fn any(&self) -> bool {
        self.vtu.is_some() || self.png.is_some()
    }

    /// Writes the files asked for; one line per file saying what it holds. `regions` (a
    /// region tag per cell, from a mesh file) go into the VTU file.
    ///
    /// # Errors
    /// [`CoreError::Io`] when a file cannot be written, [`CoreError::InvalidParameter`] for a
    /// picture of a 3D solution.
    pub fn write(
        &self,
        solution: &hdg::Solution,
        regions: Option<&[u32]>,
    ) -> Result<Vec<String>, CoreError> {
        let mut lines = Vec::new();
        if let Some(path) = &self.vtu {
            let options =
                hdg::vtu::Options { regions: regions.map(<[u32]>::to_vec), ..Default::default() };
            hdg::vtu::write(solution, path, &options).map_err(|e| match e {
                hdg::Error::Core(e) => e,
                other => CoreError::Io(other.to_string()),
            })?;
            lines.push(format!("wrote {} (u_h, q_h, u* for ParaView)", path.display()));
        }
        if let Some(path) = &self.png {
            let picture = plot::solution_png(solution, plot::PictureField::UStar, path, 800)?;
            lines.push(format!(
                "wrote {} (u*, {} x {} pixels, colours from {:.4e} to {:.4e})",
                path.display(),
                picture.size.0,
                picture.size.1,
                picture.range.0,
                picture.range.1
            ));
        }
        Ok(lines)
    }
}

/// The lines of a solve's summary after its title: backend, cells (with `mesh_lines`, the
/// mesh's and the problem's notes), trace dofs, the trace solve, the L2 errors (q's as `-`
/// where the exact gradient is unknown) and the stage times.
pub fn print_report(r: &PipelineReport, operator: TraceOperatorKind, mesh_lines: &[String]) {
    println!(
        "  backend        {} ({} threads), {}, {} trace operator",
        r.backend,
        rayon::current_num_threads(),
        r.precision,
        operator
    );
    println!("  cells          {}", r.cells);
    for line in mesh_lines {
        println!("                 {line}");
    }
    println!("  trace dofs     {}", r.trace_dofs);
    println!(
        "  trace solve    {}: {} iterations, relative residual {:.2e}{}",
        r.solver,
        r.solve.iterations,
        r.solve.relative_residual,
        if r.solve.converged { "" } else { "  (NOT CONVERGED)" }
    );
    for note in &r.solve.notes {
        println!("                 {note}");
    }
    if let Some(e) = r.errors {
        let q = if e.q.is_nan() { "-".to_string() } else { format!("{:.3e}", e.q) };
        println!("  L2 errors      u {:.3e}   q {q}   u* {:.3e}", e.u, e.u_star);
    }
    let t = &r.timings;
    println!(
        "  time [s]       setup {:.3}  condense {:.3}  assemble {:.3}  solve {:.3}  recover {:.3}  postprocess {:.3}  total {:.3}",
        t.setup, t.condense, t.assemble, t.solve, t.recover, t.postprocess, t.total
    );
}

/// The memory lines of a summary: the device's peak (CUDA) and the host's peak RSS.
pub fn print_memory(m: &Measured) {
    const GIB: f64 = (1u64 << 30) as f64;
    let dofs = m.report.trace_dofs.max(1) as f64;
    if let Some(d) = m.device_memory {
        println!(
            "  device memory  peak {:.3} GiB above the {:.3} GiB in use at the start ({:.1} bytes per trace dof; {} samples every {:.1} ms; device {:.1} GiB)",
            d.peak_bytes as f64 / GIB,
            d.baseline_used_bytes as f64 / GIB,
            d.peak_bytes as f64 / dofs,
            d.samples,
            d.interval_s * 1e3,
            d.total_bytes as f64 / GIB
        );
    }
    if let Some(rss) = m.host_peak_rss_bytes {
        let tunables = std::env::var("GLIBC_TUNABLES")
            .map(|t| format!("; GLIBC_TUNABLES={t}"))
            .unwrap_or_default();
        println!(
            "  host memory    peak RSS {:.3} GiB ({:.1} bytes per trace dof{tunables})",
            rss as f64 / GIB,
            rss as f64 / dofs
        );
    }
}

/// A host CSR matrix as an `sprs` matrix (for its Matrix Market writer and CSR SpMV).
pub fn to_sprs(csr: HostCsr) -> sprs::CsMat<f64> {
    sprs::CsMat::new((csr.n, csr.n_cols), csr.indptr, csr.indices, csr.values)
}

/// Writes a host CSR matrix as a Matrix Market coordinate file.
pub fn write_matrix_market(csr: &HostCsr, path: &Path) -> Result<(), CoreError> {
    sprs::io::write_matrix_market(path, &to_sprs(csr.clone())).map_err(CoreError::from)
}

/// [`report_json`] with the memory figures: `device_memory` (null on the CPU) with
/// `peak_bytes`, `peak_bytes_per_trace_dof`, `baseline_used_bytes`, `total_bytes`, `samples`,
/// `interval_s`; `host_peak_rss_bytes` (null where unknown); and `glibc_tunables`, the
/// process's `GLIBC_TUNABLES` (null where unset; [`malloc_tunables`] sets it for `hdg`'s runs).
pub fn measured_json(m: &Measured) -> serde_json::Value {
    let mut json = report_json(&m.report);
    let dofs = m.report.trace_dofs.max(1) as f64;
    json["device_memory"] = match m.device_memory {
        Some(d) => serde_json::json!({
            "peak_bytes": d.peak_bytes,
            "peak_bytes_per_trace_dof": d.peak_bytes as f64 / dofs,
            "baseline_used_bytes": d.baseline_used_bytes,
            "total_bytes": d.total_bytes,
            "samples": d.samples,
            "interval_s": d.interval_s,
        }),
        None => serde_json::Value::Null,
    };
    json["host_peak_rss_bytes"] = serde_json::json!(m.host_peak_rss_bytes);
    json["glibc_tunables"] = serde_json::json!(std::env::var("GLIBC_TUNABLES").ok());
    json
}

/// The report as the stable JSON object of `hdg solve --json` (`solve_notes`: what the trace
/// solver reported besides, such as a preconditioner's setup and levels; free text).
pub fn report_json(report: &PipelineReport) -> serde_json::Value {
    let errors =
        report.errors.map(|e| serde_json::json!({ "u": e.u, "q": e.q, "u_star": e.u_star }));
    let t = &report.timings;
    serde_json::json!({
        "cells": report.cells,
        "trace_dofs": report.trace_dofs,
        "order": report.order,
        "backend": report.backend,
        "precision": report.precision,
        "solver": report.solver,
        "iterations": report.solve.iterations,
        "relative_residual": report.solve.relative_residual,
        "converged": report.solve.converged,
        "solve_notes": report.solve.notes,
        "errors": errors,
        "timings_s": {
            "setup": t.setup,
            "condense": t.condense,
            "assemble": t.assemble,
            "solve": t.solve,
            "recover": t.recover,
            "postprocess": t.postprocess,
            "total": t.total,
        },
    })
}
