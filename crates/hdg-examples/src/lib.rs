//! The `hdg` program's own pieces, on the `hdg` facade: mesh specifications (`square:N`,
//! `cube:N`, a Gmsh file), the problem catalogue, problem files, and the presentation of a run
//! (the summary, the files it writes). Solving is the facade's ([`hdg::Solver`]).
#[cfg(feature = "distributed")]
pub mod distributed;
pub mod malloc_tunables;
pub mod plot;
pub mod problem_file;
pub mod process_clock;

use std::path::{Path, PathBuf};
use std::str::FromStr;

use hdg::core::resources;
use hdg::mesh::Diagonal;
use hdg::{
    generate, Backend, CellType, CoreError, CudaSettings, Manufactured, Mesh, Precision, Problem,
    Run, Solver, Tau,
};

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
/// ([`hdg::gmsh::read`]).
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
    pub file: Option<hdg::gmsh::PhysicalGroups>,
    /// Each cell's region (physical group tag, 0 for none), for a mesh read from a file.
    pub regions: Option<Vec<u32>>,
}

/// [`generated_sides`] as (tag, name) pairs.
fn side_names(dim: usize) -> Vec<(u32, String)> {
    generated_sides(dim).iter().map(|&(name, tag)| (tag, name.to_string())).collect()
}

/// The names of the sides of generated meshes (`hdg_mesh::generate`'s tags): `left`, `right`,
/// `bottom`, `top` of the square (x = 0, x = 1, y = 0, y = 1); `x0`, `x1`, `y0`, `y1`, `z0`,
/// `z1` of the cube. Problem files and the program's `--neumann`/`--robin` both read them here.
pub fn generated_sides(dim: usize) -> &'static [(&'static str, u32)] {
    use hdg::generate::{
        TAG_BOTTOM, TAG_LEFT, TAG_RIGHT, TAG_TOP, TAG_X0, TAG_X1, TAG_Y0, TAG_Y1, TAG_Z0, TAG_Z1,
    };
    if dim == 2 {
        &[("left", TAG_LEFT), ("right", TAG_RIGHT), ("bottom", TAG_BOTTOM), ("top", TAG_TOP)]
    } else {
        &[
            ("x0", TAG_X0),
            ("x1", TAG_X1),
            ("y0", TAG_Y0),
            ("y1", TAG_Y1),
            ("z0", TAG_Z0),
            ("z1", TAG_Z1),
        ]
    }
}

impl BuiltMesh {
    /// The boundary tag named `name`: a physical group of a mesh file, or a side of a
    /// generated mesh ([`generated_sides`]).
    ///
    /// # Errors
    /// [`CoreError::InvalidParameter`] listing the names the mesh has.
    pub fn boundary_tag(&self, name: &str) -> Result<u32, CoreError> {
        if let Some(groups) = &self.file {
            return Ok(groups.boundary_tag(name)?);
        }
        let sides = generated_sides(self.mesh.dim());
        sides.iter().find(|(side, _)| *side == name).map(|&(_, tag)| tag).ok_or_else(|| {
            let names: Vec<&str> = sides.iter().map(|(side, _)| *side).collect();
            CoreError::InvalidParameter {
                name: "boundary",
                reason: format!(
                    "unknown boundary `{name}` of a generated mesh: its sides are {}",
                    names.join(", ")
                ),
            }
        })
    }

    /// A boundary tag as a summary names it: `outer (2)`, `left (1)`, `untagged faces`, `7`.
    pub fn tag_name(&self, tag: u32) -> String {
        let dim = self.mesh.dim();
        if tag == hdg::gmsh::UNTAGGED {
            return "untagged faces".into();
        }
        let name = match &self.file {
            Some(groups) => groups.name(dim - 1, tag).map(str::to_string),
            None => {
                generated_sides(dim).iter().find(|(_, t)| *t == tag).map(|(n, _)| n.to_string())
            }
        };
        match name {
            Some(name) => format!("{name} ({tag})"),
            None => tag.to_string(),
        }
    }

    /// The boundary conditions of `problem` on this mesh, one entry per kind of condition with
    /// the groups it holds on (`Dirichlet on left (1), top (4)`); `data` says where the data
    /// come from.
    pub fn boundary_description(&self, problem: &Problem, data: &str) -> Vec<String> {
        let mut kinds: Vec<(String, Vec<String>)> = Vec::new();
        for (tag, _) in self.mesh.boundary_tag_counts() {
            let kind = match problem.boundary.get(&tag) {
                Some(hdg::BoundaryCondition::Robin { alpha, .. }) => {
                    format!("Robin (alpha {alpha})")
                }
                Some(condition) => condition.name().to_string(),
                None => "Dirichlet".to_string(),
            };
            match kinds.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, tags)) => tags.push(self.tag_name(tag)),
                None => kinds.push((kind, vec![self.tag_name(tag)])),
            }
        }
        kinds
            .into_iter()
            .map(|(kind, tags)| format!("{kind} on {}{data}", tags.join(", ")))
            .collect()
    }
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
                (generate::unit_square(*n, diagonal)?, Some(side_names(2)))
            }
            MeshSpec::Generated { kind: MeshKind::Cube, n } => {
                (generate::unit_cube(*n)?, Some(side_names(3)))
            }
            MeshSpec::File(path) => {
                let read = hdg::gmsh::read(path)?;
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
                        let name = if t == hdg::gmsh::UNTAGGED {
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
                    Some((t, name)) if *t == hdg::gmsh::UNTAGGED => format!("{name}: {count}"),
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
        backend: Backend,
        precision: Precision,
    ) -> Result<(), CoreError> {
        let MeshSpec::Generated { kind, n } = self else { return Ok(()) };
        let n = *n as u64;
        let (cell, cells) = match kind {
            MeshKind::Square => (CellType::Triangle, n.saturating_mul(n).saturating_mul(2)),
            MeshKind::Cube => {
                (CellType::Tetrahedron, n.saturating_mul(n).saturating_mul(n).saturating_mul(6))
            }
        };
        let value_bytes = match precision {
            Precision::F64 => 8,
            Precision::F32 => 4,
        };
        let estimate = match backend {
            Backend::Cpu => resources::pipeline_bytes(cell, cells, order, value_bytes),
            Backend::Cuda => resources::mesh_bytes(cell, cells),
        };
        resources::check_host_memory(&format!("{self} ({cells} cells)"), estimate)
    }
}

/// Parses tau: a positive number (tau on every face), or `kappa-over-h[:SCALE]` for
/// tau = SCALE kappa / h per cell ([`Tau::KappaOverH`]).
pub fn parse_tau(s: &str) -> Result<Tau, String> {
    let positive = |v: &str| -> Result<f64, String> {
        match v.parse::<f64>() {
            Ok(t) if t.is_finite() && t > 0.0 => Ok(t),
            _ => Err(format!("'{v}' is not a positive number")),
        }
    };
    match s.split_once(':') {
        _ if s == "kappa-over-h" => Ok(Tau::KappaOverH { scale: 1.0 }),
        Some(("kappa-over-h", scale)) => Ok(Tau::KappaOverH { scale: positive(scale)? }),
        _ => positive(s)
            .map(Tau::Constant)
            .map_err(|e| format!("{e}: tau is a positive number or kappa-over-h[:SCALE]")),
    }
}

/// The boundary conditions the program sets up (`--bc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BoundaryKind {
    /// Dirichlet data on the whole boundary.
    Dirichlet,
    // Plain text: clap shows it in the help (`Problem::with_mixed_boundary` sets it up).
    /// Dirichlet on x = 0, Robin (alpha = 1) on x = 1, Neumann elsewhere.
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

/// A solver as the program runs it: the CUDA settings from the environment
/// ([`CudaSettings::from_environment`]) and the device memory watched.
///
/// # Errors
/// [`CoreError::InvalidParameter`] naming a malformed CUDA setting of the environment.
pub fn program_solver(mesh: Mesh, problem: Problem) -> Result<Solver, CoreError> {
    Ok(Solver::new(mesh, problem)
        .cuda_settings(CudaSettings::from_environment()?)
        .watch_device_memory(true))
}

/// Files a solve writes its solution to: a VTU file for ParaView, a PNG picture (2D).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SolutionOutputs {
    /// VTK XML unstructured grid ([`hdg::vtu::write`]).
    pub vtu: Option<PathBuf>,
    /// A picture of u* ([`hdg::png::write`]).
    pub png: Option<PathBuf>,
}

impl SolutionOutputs {
    /// Whether any file is asked for (the solution must then be kept).
    pub fn any(&self) -> bool {
        self.vtu.is_some() || self.png.is_some()
    }

    /// Refuses file names of another format before anything is solved.
    ///
    /// # Errors
    /// The writers' refusals ([`hdg::vtu::check_path`], [`hdg::png::check_path`]).
    pub fn check(&self) -> Result<(), CoreError> {
        if let Some(path) = &self.vtu {
            hdg::vtu::check_path(path).map_err(hdg::Error::into_core)?;
        }
        if let Some(path) = &self.png {
            hdg::png::check_path(path)?;
        }
        Ok(())
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
            hdg::vtu::write(solution, path, &options).map_err(hdg::Error::into_core)?;
            lines.push(format!("wrote {} (u_h, q_h, u* for ParaView)", path.display()));
        }
        if let Some(path) = &self.png {
            if solution.mesh().dim() != 2 {
                return Err(CoreError::InvalidParameter {
                    name: "plot",
                    reason: "a PNG picture shows a 2D solution; write a VTU file for 3D \
                             (`--output` of `hdg solve`, `vtu` of a problem file's [output])"
                        .into(),
                });
            }
            let picture = hdg::png::write(solution, hdg::png::Field::UStar, path, 800)?;
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

/// The problem a run solves, in words, for its summary and its JSON report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Description {
    /// kappa: `1`, `1 + x^2`, `ring = 100, plate = 1` (per region).
    pub kappa: String,
    /// c, in the same forms.
    pub reaction: String,
    /// f, or how it is made (`from the exact solution`).
    pub source: String,
    /// The exact solution (`u = sin(pi x) sin(pi y)`), when known.
    pub exact: Option<String>,
    /// The boundary conditions, one entry per kind with the groups it holds on
    /// ([`BuiltMesh::boundary_description`]).
    pub boundary: Vec<String>,
    /// Whether mean(u_h) = 0 fixes the free constant.
    pub mean_zero: bool,
}

impl Description {
    /// The description as JSON: `pde`, `kappa`, `reaction`, `source`, `exact_solution` (null
    /// when unknown), `boundary_conditions`, `mean_zero`.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "pde": "-div(kappa grad u) + c u = f",
            "kappa": self.kappa,
            "reaction": self.reaction,
            "source": self.source,
            "exact_solution": self.exact,
            "boundary_conditions": self.boundary,
            "mean_zero": self.mean_zero,
        })
    }
}

/// The exact solution of a manufactured problem in words, in `dim` dimensions at `order` (the
/// formulas of `hdg_core::manufactured`).
pub fn manufactured_formula(kind: ProblemKind, dim: usize, order: usize) -> String {
    let three = dim == 3;
    match kind {
        ProblemKind::Sine if three => "u = sin(pi x) sin(pi y) sin(pi z)".into(),
        ProblemKind::Sine => "u = sin(pi x) sin(pi y)".into(),
        ProblemKind::Expsin if three => "u = exp(x) sin(2 y) cosh(z)".into(),
        ProblemKind::Expsin => "u = exp(x) sin(2 y)".into(),
        ProblemKind::Poly => {
            let k = order;
            let power = |e: usize| if e == 1 { String::new() } else { format!("^{e}") };
            let (a, b) = if three {
                ("0.2 + 0.5 x + 0.3 y + 0.2 z", "0.6 - 0.5 x + 0.4 y - 0.3 z")
            } else {
                ("0.2 + 0.5 x + 0.3 y", "0.6 - 0.5 x + 0.4 y")
            };
            let mixed = |p: &str, q: &str| match k {
                1 => p.to_string(),
                _ => format!("{p} {q}{}", power(k - 1)),
            };
            let mut u = format!("u = ({a}){} + ({b}){} + {}", power(k), power(k), mixed("x", "y"));
            if three {
                u += &format!(" + {}", mixed("y", "z"));
            }
            u
        }
    }
}

/// The spelling of tau in a summary: `1`, `kappa-over-h:2`, `per face`.
pub fn tau_name(tau: &Tau) -> String {
    match tau {
        Tau::Constant(v) => format!("{v}"),
        Tau::KappaOverH { scale } if *scale == 1.0 => "kappa-over-h".into(),
        Tau::KappaOverH { scale } => format!("kappa-over-h:{scale}"),
        Tau::PerFace(_) => "per face".into(),
    }
}

/// Everything a summary says besides the run's own report: its heading, the mesh, the
/// problem, and the options that are not in the report.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// The first line (`hdg solve: square:8, order 2`).
    pub heading: String,
    /// The mesh as given (`square:8`, a file name).
    pub mesh: String,
    /// The mesh's lines ([`BuiltMesh::summary`]) and other notes (files written, how the exact
    /// gradient is known).
    pub notes: Vec<String>,
    /// The problem.
    pub problem: Description,
    /// The trace solve's tolerance (relative residual).
    pub tolerance: f64,
    /// Its iteration cap.
    pub max_iterations: usize,
    /// tau ([`tau_name`]).
    pub tau: String,
    /// Print the solver's internals (a preconditioner's setup and levels) and the malloc
    /// tunables too.
    pub verbose: bool,
    /// Where the program's wall time went (None where the program did not account for it).
    pub process: Option<process_clock::ProcessTimes>,
    /// How a run over MPI ranks split the work (None on one process).
    #[cfg(feature = "distributed")]
    pub partition: Option<distributed::Partitioned>,
}

/// The line of a summary about the trace solve's residual: which residual it is, the
/// tolerance, and whether the report says the solve converged (`converged`): met, accepted
/// (the default rule's attainable accuracy), or not met, with why where the number alone would
/// say otherwise.
pub fn residual_line(
    solve: &hdg::core::SolveReport,
    tolerance: f64,
    max_iterations: usize,
) -> String {
    let r = solve.relative_residual;
    let verdict = match (solve.converged, r <= tolerance) {
        (true, true) => "met".to_string(),
        // Only the default tolerance converges above itself (hdg_linalg::StoppingRule).
        (true, false) => "accepted: the residual stalled above it at the precision's attainable \
                          accuracy (the default tolerance's rule)"
            .to_string(),
        (false, _) if solve.iterations >= max_iterations => {
            format!("not met within the cap of {max_iterations} iterations")
        }
        (false, _) => "not met".to_string(),
    };
    format!(
        "true relative residual ||b - A x|| / ||b|| = {r:.2e} (tolerance {tolerance:e}: {verdict})"
    )
}

/// Prints a run's summary: the heading, the problem (PDE, coefficients, exact solution,
/// boundary conditions), the mesh and discretization, the trace solve and its residual, the L2
/// errors (q's as `-` where the exact gradient is unknown), the stage times and the memory;
/// with [`Summary::verbose`] the solver's notes and the malloc tunables too.
pub fn print_report(run: &Run, summary: &Summary) {
    let r = &run.report;
    let p = &summary.problem;
    println!("{}", summary.heading);
    println!(
        "  equation       -div(kappa grad u) + c u = f, kappa = {}, c = {}",
        p.kappa, p.reaction
    );
    println!("  source         f = {}", p.source);
    match &p.exact {
        Some(u) => println!("  exact solution {u}"),
        None => println!("  exact solution unknown (no errors computed)"),
    }
    for (i, condition) in p.boundary.iter().enumerate() {
        println!("  {:<14} {condition}", if i == 0 { "boundary" } else { "" });
    }
    if p.mean_zero {
        println!("                 mean(u_h) = 0 fixes the free constant");
    }
    println!("  mesh           {}: {} cells", summary.mesh, r.cells);
    for line in &summary.notes {
        println!("                 {line}");
    }
    println!(
        "  discretization order {}, tau = {}, {} trace dofs",
        r.order, summary.tau, r.trace_dofs
    );
    println!(
        "  backend        {} ({} threads), {}, {} trace operator",
        r.backend,
        hdg::host_threads(),
        r.precision,
        run.operator
    );
    #[cfg(feature = "distributed")]
    if let Some(partition) = &summary.partition {
        for (i, line) in distributed::partition_lines(partition).iter().enumerate() {
            println!("  {:<14} {line}", if i == 0 { "partition" } else { "" });
        }
    }
    println!("  trace solve    {}: {} iterations", r.solver, r.solve.iterations);
    println!(
        "                 {}",
        residual_line(&r.solve, summary.tolerance, summary.max_iterations)
    );
    if summary.verbose {
        for note in &r.solve.notes {
            println!("                 {note}");
        }
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
    if let Some(process) = &summary.process {
        println!("  process [s]    {}", process.line());
    }
    print_memory(run, summary.verbose);
}

/// The memory lines of a summary: the device's peak (CUDA) and the host's peak RSS; with
/// `verbose`, per trace dof and with the malloc tunables the run had.
fn print_memory(run: &Run, verbose: bool) {
    const GIB: f64 = (1u64 << 30) as f64;
    let dofs = run.report.trace_dofs.max(1) as f64;
    if let Some(d) = run.device_memory {
        println!(
            "  device memory  peak {:.3} GiB above the {:.3} GiB in use at the start, {:.3} s into the run ({:.1} bytes per trace dof; {} samples every {:.1} ms; device {:.1} GiB)",
            d.peak_bytes as f64 / GIB,
            d.baseline_used_bytes as f64 / GIB,
            d.peak_at_s,
            d.peak_bytes as f64 / dofs,
            d.samples,
            d.interval_s * 1e3,
            d.total_bytes as f64 / GIB
        );
    }
    if let Some(rss) = run.host_peak_rss_bytes {
        if verbose {
            let tunables = std::env::var("GLIBC_TUNABLES")
                .map(|t| format!("; GLIBC_TUNABLES={t}"))
                .unwrap_or_default();
            println!(
                "  host memory    peak RSS {:.3} GiB ({:.1} bytes per trace dof{tunables})",
                rss as f64 / GIB,
                rss as f64 / dofs
            );
        } else {
            println!("  host memory    peak RSS {:.3} GiB", rss as f64 / GIB);
        }
    }
}

/// A run's JSON report ([`hdg::json::run`]) with what the summary says besides: `mesh`
/// {`name`, `cells`, `notes`}, `problem` ([`Description::json`]), `options` {`order`,
/// `backend`, `precision`, `solver`, `operator`, `tolerance`, `max_iterations`, `tau`}, and
/// `mesh_notes` (the mesh's lines, as before), `process` where the program accounted for its
/// wall time ([`process_clock::ProcessTimes::json`]); for a run over MPI ranks (feature
/// `distributed`) also `partitioner`, `edge_cut` and `ranks`.
pub fn summary_json(run: &Run, summary: &Summary) -> serde_json::Value {
    let r = &run.report;
    let mut json = hdg::json::run(run);
    json["mesh"] = serde_json::json!({
        "name": summary.mesh,
        "cells": r.cells,
        "notes": summary.notes,
    });
    json["problem"] = summary.problem.json();
    json["options"] = serde_json::json!({
        "order": r.order,
        "backend": r.backend,
        "precision": r.precision,
        "solver": r.solver,
        "operator": run.operator.name(),
        "tolerance": summary.tolerance,
        "max_iterations": summary.max_iterations,
        "tau": summary.tau,
    });
    json["mesh_notes"] = serde_json::json!(summary.notes);
    if let Some(process) = &summary.process {
        json["process"] = process.json();
    }
    #[cfg(feature = "distributed")]
    if let Some(partition) = &summary.partition {
        distributed::add_to_json(&mut json, partition);
    }
    json
}

/// Writes the run's trace matrix, if it kept one, as a Matrix Market file.
///
/// # Errors
/// [`CoreError::Io`] when the file cannot be written.
pub fn export_matrix(run: &Run, path: &Path) -> Result<(), CoreError> {
    match &run.trace_matrix {
        Some(matrix) => hdg::matrix_market::write(matrix, path),
        None => Err(CoreError::InvalidParameter {
            name: "export",
            reason: "the run kept no trace matrix".into(),
        }),
    }
}
