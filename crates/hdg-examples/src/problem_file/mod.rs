//! Problem files: `hdg run problem.toml` solves the problem a TOML file describes.
//!
//! A problem file names the mesh, the coefficients and source of
//! `-div(kappa grad u) + c u = f`, the boundary condition of each boundary group, optionally
//! the exact solution (then the L2 errors are reported), the discretization, the solver and
//! the outputs. Every value is checked when the file is loaded or when it meets its mesh, and
//! a refusal names the file and the line: unknown keys and values of the wrong type (as TOML
//! reports them), expressions that do not parse or use names they may not, physical groups the
//! mesh does not have, regions without a coefficient value, a missing mesh file.
//!
//! `hdg run FILE --set KEY=VALUE` sets any key before the file is checked (a dotted key path,
//! a TOML value: `--set discretization.order=4`, `--set solver.method=cg`; repeatable), so
//! the same checks and messages apply ([`ProblemFile::load_with`]).
//!
//! # A complete example
//!
//! Every section but `[mesh]` and `[discretization]` may be left out, and so may every key
//! but `order` and one of `file` or `generate`: the defaults are those shown.
//!
//! ```toml
//! title = "Poisson on the L-shape"      # optional; printed in the summary
//!
//! [mesh]
//! file = "../meshes/l-shape-2.msh"      # a Gmsh file, relative to this file's folder;
//! # generate = "square:16"              # or a generated mesh: square:N or cube:N
//! perturb = 0.0                         # random moves of the inner vertices, 0 to 0.4 of
//! seed = 1                              #   the local edge length, and their seed
//!
//! [equation]                            # -div(kappa grad u) + c u = f
//! kappa = 1.0                           # a number, an expression, or one number per
//!                                       #   region: { plate = 1.0, ring = 100.0 }
//! reaction = 0.0                        # c, in the same forms as kappa
//! source = "0"                          # f: a number or an expression
//! mean_zero = false                     # with Neumann data everywhere and c = 0: fix the
//!                                       #   free constant by mean(u_h) = 0
//!
//! [boundary]
//! default = 0.0                         # g_D on every boundary group not listed below
//! reentrant = { dirichlet = "0" }
//! outer = { dirichlet = "(x^2 + y^2)^(1/3) * sin(2/3 * (atan2(-y, -x) + pi))" }
//! # hole = { neumann = "nx * x" }       # kappa grad u . n = g (g may use nx, ny, nz)
//! # "3" = { robin = "1 + x", alpha = 2.0 }  # kappa grad u . n + alpha u = g, by tag number
//!
//! [exact]                               # optional: the L2 errors are reported
//! u = "(x^2 + y^2)^(1/3) * sin(2/3 * (atan2(-y, -x) + pi))"
//! gradient = [                          # optional: derived from u where every function
//!   "-2/3 * (x^2 + y^2)^(-1/6) * sin(1/3 * (atan2(-y, -x) + pi))",  # of u has a
//!   "2/3 * (x^2 + y^2)^(-1/6) * cos(1/3 * (atan2(-y, -x) + pi))",   # derivative
//! ]
//!
//! [discretization]
//! order = 3                             # polynomial order k
//! tau = 1.0                             # or "kappa-over-h", "kappa-over-h:SCALE"
//!
//! [solver]
//! method = "pcg-mg"                     # a solver of `hdg solve --solver`
//! tolerance = 1e-10                     # relative residual (default 1e-6 in f32)
//! max_iterations = 100000
//! backend = "cpu"                       # or "cuda"
//! precision = "f64"                     # or "f32"
//! operator = "dbf"                      # or "matrix-free" (cuda only)
//!
//! [output]                              # paths relative to this file's folder
//! json = "l-shape.json"                 # the report of `hdg solve --json`
//! vtu = "l-shape.vtu"                  # u_h, q_h, u* for ParaView (hdg::vtu)
//! png = "l-shape.png"                   # a picture of u* (2D only)
//! ```
//!
//! # Boundary groups
//!
//! The keys of `[boundary]` (other than `default`) are the boundary's physical groups: by
//! name on a mesh file (its physical groups of lines in 2D, surfaces in 3D), or by tag number
//! given as a string (`"3" = { ... }`). Generated meshes name their sides `left`, `right`,
//! `bottom`, `top` (square: x = 0, x = 1, y = 0, y = 1) and `x0`, `x1`, `y0`, `y1`, `z0`, `z1`
//! (cube). Each group has exactly one of `dirichlet`, `neumann` or `robin` (the latter with
//! `alpha` > 0); groups not listed, and faces in no group, get Dirichlet data `default`. A
//! physical group named `default` is reached by its tag number.
//!
//! # Expressions
//!
//! Values may be numbers or expressions, strings in `x`, `y`, `z` (and `nx`, `ny`, `nz`, the
//! outward unit normal, in Neumann and Robin data) with `+ - * / ^`, parentheses, the
//! constants `pi` (also `PI`, `π`) and `e` (also `E`), the functions `sin cos tan asin acos
//! atan sinh cosh tanh asinh acosh atanh exp ln log (= ln) log2 log10 sqrt cbrt abs signum
//! floor ceil round trunc fract` and the two-argument `atan2(y, x)`, `min(a, b)`, `max(a, b)`.
//! Numbers may have exponents (`1.5e-3`). They are compiled once (by the `exmex` crate) and
//! evaluated at every quadrature point.
//!
//! Two forms that readers take differently are refused: a sign in front of a power (`-x^2`:
//! write `-(x^2)`, or `(-x)^2`) and chained powers (`2^x^2`: write `2^(x^2)` or `(2^x)^2`);
//! functions take parentheses (`sin(x)`, not `sin x`). Otherwise the usual precedence holds:
//! `^` before `*` and `/`, before `+` and `-`, and `sin(x)^2` is the square of `sin(x)`.
//!
//! A coefficient or source without variables is a constant. Without `gradient`, the gradient
//! of the exact u is derived symbolically (exmex's partial derivatives); where u uses a
//! function without one (`abs`, `atan2`, `min`, `max`, `floor`, ...), the error of q is not
//! computed, and the summary says so.
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use exmex::prelude::*;
use hdg::core::{ScalarField, MAX_ORDER, MIN_ORDER};
use hdg::mesh::Diagonal;
use hdg::{
    Backend, Coefficient, CoreError, Mesh, Precision, Problem, Progress, Run, SolverChoice,
    SolverSettings, Tau, TraceOperatorKind,
};
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use toml::Spanned;

use crate::process_clock::{BackendStartTimes, ProcessTimes};
use crate::{
    parse_tau, print_report, program_solver, summary_json, tau_name, BuiltMesh, Description,
    MeshSpec, Summary,
};

mod build;
#[cfg(feature = "distributed")]
mod distributed;
mod expression;
mod parse;
mod report;
mod schema;
#[cfg(test)]
mod tests;

use expression::*;
use schema::*;

// ---------------------------------------------------------------------------------------------
// The checked file.

/// A number or a compiled expression, with where the file gives it.
#[derive(Clone)]
struct Field {
    kind: FieldKind,
    span: Range<usize>,
}

#[derive(Clone)]
enum FieldKind {
    Constant(f64),
    Expression(Arc<Expression>),
}

impl Field {
    fn constant(value: f64) -> Field {
        Field { kind: FieldKind::Constant(value), span: 0..0 }
    }

    /// The value as a function of the point.
    fn scalar(&self) -> ScalarField {
        match &self.kind {
            FieldKind::Constant(v) => {
                let v = *v;
                Arc::new(move |_| v)
            }
            FieldKind::Expression(e) => {
                let e = e.clone();
                Arc::new(move |x| e.evaluate(x, &[]))
            }
        }
    }

    /// The value as a function of the point and the outward normal.
    fn face(&self) -> hdg::core::FaceField {
        match &self.kind {
            FieldKind::Constant(v) => {
                let v = *v;
                Arc::new(move |_, _| v)
            }
            FieldKind::Expression(e) => {
                let e = e.clone();
                Arc::new(move |x, n| e.evaluate(x, n))
            }
        }
    }

    /// The constant value, for a number or an expression without variables.
    fn as_constant(&self) -> Option<f64> {
        match &self.kind {
            FieldKind::Constant(v) => Some(*v),
            FieldKind::Expression(e) if e.slots.is_empty() => Some(e.evaluate(&[], &[])),
            FieldKind::Expression(_) => None,
        }
    }

    /// The value as the file gives it: the number or the expression's text.
    fn describe(&self) -> String {
        match &self.kind {
            FieldKind::Constant(v) => format!("{v}"),
            FieldKind::Expression(e) => e.text.clone(),
        }
    }

    fn expression(&self) -> Option<&Expression> {
        match &self.kind {
            FieldKind::Expression(e) => Some(e),
            FieldKind::Constant(_) => None,
        }
    }
}

#[derive(Clone)]
enum CoefficientSpec {
    Field(Field),
    PerRegion { values: Vec<(String, f64, Range<usize>)>, span: Range<usize> },
}

impl CoefficientSpec {
    /// The coefficient as the file gives it (`ring = 100, plate = 1` per region).
    fn describe(&self) -> String {
        match self {
            CoefficientSpec::Field(f) => f.describe(),
            CoefficientSpec::PerRegion { values, .. } => {
                let values: Vec<String> =
                    values.iter().map(|(name, v, _)| format!("{name} = {v}")).collect();
                values.join(", ")
            }
        }
    }
}

#[derive(Clone)]
enum ConditionKind {
    Dirichlet(Field),
    Neumann(Field),
    Robin { alpha: f64, data: Field },
}

#[derive(Clone)]
struct GroupCondition {
    /// The group's key in `[boundary]`: a physical name, a side's name or a tag number.
    key: String,
    span: Range<usize>,
    kind: ConditionKind,
}

#[derive(Clone)]
struct ExactSpec {
    u: Field,
    gradient: Option<(Vec<Field>, Range<usize>)>,
}

#[derive(Clone)]
enum MeshSource {
    Generated(MeshSpec),
    File { given: String, path: PathBuf },
}

/// What a problem file asks to write besides the summary (paths resolved against the file's
/// folder).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outputs {
    /// The JSON report (that of `hdg solve --json`, with the file's notes).
    pub json: Option<PathBuf>,
    /// The solution as a VTK unstructured grid ([`hdg::vtu`]), with the mesh file's regions.
    pub vtu: Option<PathBuf>,
    /// A picture of u* (2D only: [`hdg::png::write`]).
    pub png: Option<PathBuf>,
}

/// A problem file, parsed and checked as far as it can be without its mesh: every
/// expression is compiled, every name and number is known ([`ProblemFile::build`] checks the
/// rest against the mesh).
#[derive(Clone)]
pub struct ProblemFile {
    path: PathBuf,
    text: String,
    title: Option<String>,
    mesh: MeshSource,
    mesh_span: Range<usize>,
    perturb: f64,
    seed: u64,
    kappa: CoefficientSpec,
    reaction: CoefficientSpec,
    source: Field,
    mean_zero: bool,
    dirichlet_default: Field,
    boundary: Vec<GroupCondition>,
    exact: Option<ExactSpec>,
    order: usize,
    tau: Tau,
    solver: SolverChoice,
    /// The tolerance the file gives; None: the default rule ([`hdg::default_tolerance`]).
    tolerance: Option<f64>,
    max_iterations: usize,
    backend: Backend,
    precision: Precision,
    operator: TraceOperatorKind,
    outputs: Outputs,
}

/// A problem file made ready to solve: the solver (mesh, problem and every option) and what
/// the summary says about them.
pub struct Setup {
    /// The mesh, the problem, the order, the backend and precision, the trace solver and
    /// operator.
    pub solver: hdg::Solver,
    /// Seconds spent building or reading the mesh.
    pub mesh_seconds: f64,
    /// The backend's start beside the mesh.
    pub backend: BackendStartTimes,
    /// The mesh's summary lines ([`BuiltMesh::summary`]).
    pub mesh_lines: Vec<String>,
    /// Each cell's region, for a mesh read from a file.
    pub regions: Option<Vec<u32>>,
    /// What to write.
    pub outputs: Outputs,
    /// Summary lines about the problem: how the exact gradient is known.
    pub notes: Vec<String>,
    /// The problem in words: coefficients, source, exact solution, the condition of each
    /// boundary group.
    pub description: Description,
}

/// A solved problem file, to report.
pub struct Solved {
    path: PathBuf,
    title: Option<String>,
    precision: Precision,
    outputs: Outputs,
    regions: Option<Vec<u32>>,
    /// What the summary says besides the run's report.
    pub summary: Summary,
    /// The run: its report, solution and memory figures.
    pub run: Run,
    /// The mesh's seconds, the backend's start and the run's seconds, for the summary's
    /// account of the wall time ([`Solved::account`]).
    times: (f64, BackendStartTimes, f64),
}

/// The line (1-based) and column (1-based, in characters) of byte `offset` of `text`.
fn line_and_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Reads and checks a problem file ([`ProblemFile::load`]).
///
/// # Errors
/// Those of [`ProblemFile::load`].
pub fn load(path: &Path) -> Result<ProblemFile, CoreError> {
    ProblemFile::load(path)
}

/// `hdg run FILE`: loads the file, solves (reporting stages to `progress`), writes the outputs
/// and prints the summary (or, with `json`, the JSON report); whether the trace solve
/// converged.
///
/// # Errors
/// Those of [`ProblemFile::load`], [`ProblemFile::build`], the solve, and writing the outputs.
pub fn run(path: &Path, json: bool, progress: &mut dyn Progress) -> Result<bool, CoreError> {
    ProblemFile::load(path)?.solve(progress)?.finish(json)
}

impl ProblemFile {
    /// The backend the file asks for.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The precision the file asks for.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// The trace solver the file asks for.
    pub fn solver(&self) -> SolverChoice {
        self.solver
    }

    /// The polynomial order.
    pub fn order(&self) -> usize {
        self.order
    }

    /// The title, if the file gives one.
    pub fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }

    /// The outputs the file asks for.
    pub fn outputs(&self) -> &Outputs {
        &self.outputs
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A refusal naming this file and the line of `span`.
    fn error_at(&self, span: &Range<usize>, message: impl fmt::Display) -> CoreError {
        let (line, _) = line_and_column(&self.text, span.start);
        problem_error(&self.path, format!("line {line}: {message}"))
    }

    /// The mesh as the summary names it.
    fn mesh_name(&self) -> String {
        match &self.mesh {
            MeshSource::Generated(spec) => spec.to_string(),
            MeshSource::File { given, .. } => given.clone(),
        }
    }

    /// Builds the problem and solves it, reporting stages to `progress`.
    ///
    /// # Errors
    /// Those of [`ProblemFile::build`] and of the solve.
    pub fn solve(&self, progress: &mut dyn Progress) -> Result<Solved, CoreError> {
        let setup = self.build()?;
        let started = std::time::Instant::now();
        let run = setup.solver.run(progress).map_err(hdg::Error::into_core)?;
        Ok(self.solved(setup, run, started.elapsed().as_secs_f64()))
    }

    /// The solved file: `run` of `setup`, which took `run_seconds`, with what the summary says
    /// about them.
    fn solved(&self, setup: Setup, run: Run, run_seconds: f64) -> Solved {
        let times = (setup.mesh_seconds, setup.backend, run_seconds);
        let mut notes = setup.mesh_lines;
        notes.extend(setup.notes);
        let title = self.title.as_ref().map_or_else(String::new, |t| format!(" ({t})"));
        let summary = Summary {
            heading: format!("hdg run: {}{title}", self.path.display()),
            mesh: self.mesh_name(),
            notes,
            problem: setup.description,
            tolerance: self.tolerance.unwrap_or_else(|| hdg::default_tolerance(self.precision)),
            max_iterations: self.max_iterations,
            tau: tau_name(&self.tau),
            verbose: false,
            process: None,
            #[cfg(feature = "distributed")]
            partition: None,
        };
        Solved {
            path: self.path.clone(),
            title: self.title.clone(),
            precision: self.precision,
            outputs: setup.outputs,
            regions: setup.regions,
            summary,
            run,
            times,
        }
    }
}

fn problem_error(path: &Path, message: String) -> CoreError {
    CoreError::InvalidParameter {
        name: "problem file",
        reason: format!("{}, {message}", path.display()),
    }
}
