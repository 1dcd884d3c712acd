//! Property tests: the CUDA backend against the CPU backend on random problems.
//!
//! Each case draws a perturbed mesh (unit square, n = 2..=12, each diagonal kind, perturbation
//! amplitude 0..0.3, perturbation seed), an order k = 1..=6, a stabilisation tau (one constant,
//! or a random value per (cell, face) pair), the diffusion kappa and reaction c (constants,
//! smooth functions sampled per cell or evaluated at quadrature points, kappa then also as an
//! anisotropic tensor, or random per cell), a manufactured solution (sine,
//! exp-sin, or the polynomial of degree k), a trace solver and the CUDA backend's trace operator
//! (assembled DBF or matrix-free), Dirichlet data everywhere or the mixed conditions of
//! `--bc mixed` (DBF only), runs both backends through the same code and compares,
//! relative to the size of the CPU's values:
//!
//! | quantity | how |
//! | --- | --- |
//! | element trace matrices K_e | max abs difference / max abs K_e |
//! | assembled right-hand side | max abs difference / max abs value |
//! | the assembled operator applied to 2 random vectors | max abs difference / max abs A x |
//! | the trace solution, u_h, q_h, u* | max abs difference / max abs value |
//! | the L2 errors of u_h, q_h, u* | abs difference / max(error, 1) |
//!
//! to 1e-11 in f64 and 1e-4 in f32 (3e-4 for f32 cases with Neumann and Robin faces or with
//! coefficients at points, which the cases also draw: `MIXED_F32_FACTOR`, `POINTS_F32_FACTOR`). The
//! errors are compared against max(error, 1), not the error itself: the manufactured solutions are
//! O(1) on the unit square, and two solves that agree to round-off in the solution give errors that
//! agree to round-off *absolutely* (an error of 1e-9 from solutions that agree to 1e-14 agrees to
//! about 1e-14, which is 1e-5 of itself; see `pipeline_matches` in
//! `crates/hdg-backend-cuda/tests/gpu.rs`).
//!
//! The solution is that of the whole pipeline (`hdg_core::pipeline::solve`) when tau is one
//! constant (the pipeline takes tau from the `Problem`); with per-face tau, the same stages are
//! run one by one on a `Discretization` whose `tau` was overwritten. Both backends use the same
//! solver: the sparse direct solver (faer, f64 factorisation of the exported matrix),
//! block-Jacobi PCG, or (tests of their own) multigrid PCG (`pcg-mg`, with the DBF operator: it
//! projects the assembled blocks), to a relative residual of 1e-13 (f64) or 1e-6 (f32); see
//! [`case_strategy`].
//!
//! Determinism: a fixed proptest seed per test, no failure persistence, a bounded shrink, so a
//! run is the same everywhere. `PROPTEST_CASES` and `PROPTEST_RNG_SEED` override the case count
//! (default 32 per test) and the seed.
//!
//! Every test needs a GPU: each is `#[ignore]`d, so it is reported as ignored (never as passed)
//! without `--ignored`; with `--ignored` and no usable device it fails with the reason. The file
//! is compiled only with the `tests` crate's `cuda` feature (`required-features` in
//! `tests/Cargo.toml`). On a GPU machine:
//!
//!     cargo test --release -p tests --features tests/cuda --test cross_backend -- --ignored
//!
//! or the binary that `scripts/gpu-build.sh` packs (`cross-backend-tests --ignored`).
//!
//! Tetrahedra: the mesh strategy takes the cell type ([`mesh_strategy`]); the same property runs
//! on perturbed unit cubes (`cpu_and_cuda_agree_{f64,f32}_tetrahedra`), and
//! `strategies_draw_valid_cases` draws cases of both kinds without a device, to keep the
//! strategies honest.
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hdg_backend_cpu::CpuBackend;
use hdg_backend_cuda::{CudaBackend, DeviceReal, TraceOperatorKind, MAX_ELEMENT_ORDER};
use hdg_core::pipeline::{self, PipelineOptions, Silent};
use hdg_core::{
    Backend, BoundaryCondition, CellType, Coefficient, Discretization, ErrorNorms, Krylov,
    Manufactured, MultigridOperator, MultigridOps, Problem, Real, SolveReport, TraceOperator,
    TraceSolver, VectorOps,
};
use hdg_linalg::{MultigridPrecision, SolverChoice, Suite};
use hdg_mesh::{generate, Diagonal, Mesh};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, RngSeed, TestCaseError, TestError, TestRunner};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Cases per test unless `PROPTEST_CASES` says otherwise.
const DEFAULT_CASES: u32 = 32;

/// The device, or a failure that says why there is none (the tests are `#[ignore]`d: this runs
/// only when they were asked for).
fn device() -> CudaBackend {
    match CudaBackend::new() {
        Ok(b) => {
            eprintln!("device: {}", b.describe());
            b
        }
        Err(e) => panic!(
            "the cross-backend tests need a CUDA device and its driver, and found none: {e}\n\
             (run them on a GPU machine; without --ignored they are skipped)"
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// The drawn case.

/// A mesh: a structured unit square (triangles) or unit cube (tetrahedra), randomly perturbed.
#[derive(Clone, Debug)]
struct MeshCase {
    cell: CellType,
    /// Squares (boxes) per side.
    n: usize,
    /// How squares are cut (triangles only).
    diagonal: Diagonal,
    /// Perturbation amplitude (fraction of the local edge length).
    amplitude: f64,
    /// Perturbation seed.
    seed: u64,
}

impl MeshCase {
    fn build(&self) -> Mesh {
        let mesh = match self.cell {
            CellType::Triangle => generate::unit_square(self.n, self.diagonal),
            CellType::Tetrahedron => generate::unit_cube(self.n),
        }
        .expect("a valid structured mesh");
        generate::perturb(&mesh, self.amplitude, self.seed).expect("a valid perturbation")
    }
}

/// Meshes of one cell type: n = 2..=12 squares per side with every diagonal kind (triangles),
/// n = 1..=3 boxes per side (tetrahedra: 6 n^3 cells), perturbation amplitude in [0, 0.3).
fn mesh_strategy(cell: CellType) -> BoxedStrategy<MeshCase> {
    let (sizes, diagonals) = match cell {
        CellType::Triangle => (
            2usize..=12,
            prop_oneof![Just(Diagonal::Right), Just(Diagonal::Left), Just(Diagonal::Alternating)]
                .boxed(),
        ),
        // The cube's Kuhn split has no choice of diagonal.
        CellType::Tetrahedron => (1usize..=3, Just(Diagonal::Right).boxed()),
    };
    (sizes, diagonals, 0.0..0.3f64, any::<u64>())
        .prop_map(move |(n, diagonal, amplitude, seed)| MeshCase {
            cell,
            n,
            diagonal,
            amplitude,
            seed,
        })
        .boxed()
}

/// A coefficient (kappa or c). `Coefficient` is constant or per cell, so a smooth coefficient
/// is sampled at cell centroids.
#[derive(Clone, Debug)]
enum CoefficientCase {
    Constant(f64),
    /// mean (1 + a sin(w . x + phase)), a < 1, at each cell's centroid.
    Smooth {
        mean: f64,
        a: f64,
        w: [f64; 3],
        phase: f64,
    },
    /// Independent uniform values in [lo, hi) per cell.
    Random {
        lo: f64,
        hi: f64,
        seed: u64,
    },
}

impl CoefficientCase {
    /// The coefficient: a smooth one sampled at centroids, or with `points` a function of x
    /// (evaluated at quadrature points), and with `tensor` too the anisotropic SPD tensor
    /// s(x) M with s the smooth function and M a fixed SPD matrix.
    fn coefficient(&self, mesh: &Mesh, points: bool, tensor: bool) -> Coefficient {
        match *self {
            CoefficientCase::Smooth { mean, a, w, phase } if points => {
                let s = move |x: &[f64]| {
                    let arg: f64 = x.iter().zip(&w).map(|(xi, wi)| xi * wi).sum();
                    mean * (1.0 + a * (arg + phase).sin())
                };
                if tensor {
                    const M: [[f64; 3]; 3] = [[1.0, 0.3, 0.2], [0.3, 1.2, 0.1], [0.2, 0.1, 0.9]];
                    Coefficient::tensor(move |x, k| {
                        let d = x.len();
                        for r in 0..d {
                            for c in 0..d {
                                k[r * d + c] = s(x) * M[r][c];
                            }
                        }
                    })
                } else {
                    Coefficient::field(s)
                }
            }
            CoefficientCase::Constant(v) => Coefficient::Constant(v),
            CoefficientCase::Smooth { mean, a, w, phase } => Coefficient::PerCell(
                (0..mesh.n_cells())
                    .map(|c| {
                        let x = centroid(mesh, c);
                        let arg: f64 = x.iter().zip(&w).map(|(xi, wi)| xi * wi).sum();
                        mean * (1.0 + a * (arg + phase).sin())
                    })
                    .collect(),
            ),
            CoefficientCase::Random { lo, hi, seed } => {
                let mut rng = StdRng::seed_from_u64(seed);
                Coefficient::PerCell((0..mesh.n_cells()).map(|_| rng.gen_range(lo..hi)).collect())
            }
        }
    }

    /// A representative value (for the manufactured source, which assumes constants).
    fn mean(&self) -> f64 {
        match *self {
            CoefficientCase::Constant(v) => v,
            CoefficientCase::Smooth { mean, .. } => mean,
            CoefficientCase::Random { lo, hi, .. } => 0.5 * (lo + hi),
        }
    }
}

fn centroid(mesh: &Mesh, c: usize) -> Vec<f64> {
    let verts = mesh.cell_vertices(c);
    let mut x = vec![0.0; mesh.dim()];
    for &v in verts {
        for (xr, pr) in x.iter_mut().zip(mesh.vertex(v)) {
            *xr += pr / verts.len() as f64;
        }
    }
    x
}

/// Coefficients with values in [lo, hi) (lo >= 0; hi > lo).
fn coefficient_strategy(lo: f64, hi: f64) -> BoxedStrategy<CoefficientCase> {
    let mid = 0.5 * (lo + hi);
    let smooth_mean = if lo > 0.0 { (lo * hi).sqrt() } else { mid };
    prop_oneof![
        (lo..hi).prop_map(CoefficientCase::Constant),
        (0.0..0.9f64, prop::array::uniform3(-8.0..8.0f64), 0.0..std::f64::consts::TAU).prop_map(
            move |(a, w, phase)| CoefficientCase::Smooth { mean: smooth_mean, a, w, phase }
        ),
        any::<u64>().prop_map(move |seed| CoefficientCase::Random { lo, hi, seed }),
    ]
    .boxed()
}

/// The stabilisation: one constant, or one random value per (cell, local face) pair (the
/// `Problem` has one tau; per-face values are written into the `Discretization`).
#[derive(Clone, Debug)]
enum TauCase {
    Constant(f64),
    PerFace { lo: f64, hi: f64, seed: u64 },
}

impl TauCase {
    fn constant(&self) -> Option<f64> {
        match *self {
            TauCase::Constant(v) => Some(v),
            TauCase::PerFace { .. } => None,
        }
    }

    fn apply<T: Real>(&self, tau: &mut [T]) {
        if let TauCase::PerFace { lo, hi, seed } = *self {
            let mut rng = StdRng::seed_from_u64(seed);
            tau.iter_mut().for_each(|t| *t = T::from_f64_lossy(rng.gen_range(lo..hi)));
        }
    }
}

fn tau_strategy() -> BoxedStrategy<TauCase> {
    const LO: f64 = 0.3;
    const HI: f64 = 5.0;
    prop_oneof![
        (LO..HI).prop_map(TauCase::Constant),
        any::<u64>().prop_map(|seed| TauCase::PerFace { lo: LO, hi: HI, seed }),
    ]
    .boxed()
}

/// The manufactured solution (its source assumes constant kappa and c: with variable ones the
/// "exact" solution is only a reference function, the same for both backends).
#[derive(Clone, Copy, Debug)]
enum SolutionCase {
    Sine,
    ExpSin,
    /// The polynomial of degree k.
    Polynomial,
}

/// The trace solver both backends use.
#[derive(Clone, Copy, Debug)]
struct SolverCase {
    choice: SolverChoice,
    tolerance: f64,
}

impl SolverCase {
    fn suite(&self) -> Suite {
        // The default tolerance's rule: the backends are compared at what the precision
        // attains (an f32 solve's true residual stalls above 1e-6 on some cases).
        Suite { accept_attainable: true, ..Suite::new(self.choice, self.tolerance, 50_000) }
    }
}

/// One drawn case.
#[derive(Clone, Debug)]
struct Case {
    mesh: MeshCase,
    order: usize,
    tau: TauCase,
    kappa: CoefficientCase,
    reaction: CoefficientCase,
    solution: SolutionCase,
    solver: SolverCase,
    /// The trace operator the CUDA backend builds (the CPU's is always its DBF matrix).
    operator: TraceOperatorKind,
    /// Seed of the random vectors the operators are applied to.
    vector_seed: u64,
    /// The mixed boundary conditions of `--bc mixed` (Dirichlet, Neumann and Robin faces)
    /// instead of Dirichlet everywhere (DBF operator only).
    mixed_boundary: bool,
    /// Smooth coefficients as functions of x at quadrature points, not sampled per cell.
    at_points: bool,
    /// With `at_points`, kappa an anisotropic tensor.
    tensor: bool,
}

impl Case {
    fn problem(&self, mesh: &Mesh) -> Problem {
        let solution = match self.solution {
            SolutionCase::Sine => Manufactured::Sine,
            SolutionCase::ExpSin => Manufactured::ExpSin,
            SolutionCase::Polynomial => Manufactured::Polynomial(self.order),
        };
        let mut problem = Problem::manufactured(solution, self.kappa.mean(), self.reaction.mean());
        problem.kappa = self.kappa.coefficient(mesh, self.at_points, self.tensor);
        problem.reaction = self.reaction.coefficient(mesh, self.at_points, false);
        problem.tau = hdg_core::Tau::Constant(self.tau.constant().unwrap_or(1.0));
        if self.mixed_boundary {
            let dim = mesh.dim();
            problem = problem.with_mixed_boundary(dim, self.kappa.mean()).expect("exact solution");
        }
        problem
    }

    fn label(&self) -> String {
        let m = &self.mesh;
        format!(
            "k = {}, {:?} n = {} {:?} perturb {:.3} seed {}, tau {:?}, kappa {:?}, c {:?}, {:?}, {} tol {:e}, cuda {}, mixed boundary {}, at points {}, tensor {}",
            self.order,
            m.cell,
            m.n,
            m.diagonal,
            m.amplitude,
            m.seed,
            self.tau,
            self.kappa,
            self.reaction,
            self.solution,
            self.solver.choice.name(),
            self.solver.tolerance,
            self.operator,
            self.mixed_boundary,
            self.at_points,
            self.tensor
        )
    }
}

/// Which trace solvers a property draws.
#[derive(Clone, Copy, Debug)]
enum Solvers {
    /// The sparse direct solver or block-Jacobi PCG.
    Reference,
    /// Multigrid PCG (`pcg-mg`): its own tests, so that the reference properties keep drawing
    /// the cases they always drew.
    Multigrid,
}

/// Cases on meshes of `cell`, for precision `T`, with the `solvers` (PCG to a relative
/// residual of 1e-13 in f64, 1e-6 in f32).
///
/// The PCG tolerances were chosen on the CPU (300 cases of each strategy): in f64, PCG to 1e-12
/// left solutions up to 6.4e-12 from the direct solve's, too close to the 1e-11 test tolerance
/// for two runs with different rounding; to 1e-13 it leaves 8.4e-13 and every case converges.
/// In f32, PCG to 1e-6 converges (by its recurrence; the true residual stalls near 3e-4) within
/// 1.0e-5 of the direct solve; the direct solve of K_e perturbed by 2 units of round-off moves
/// by 8.3e-6 (f32) and 2.2e-14 (f64).
fn case_strategy<T: Real>(cell: CellType, solvers: Solvers) -> impl Strategy<Value = Case> {
    let pcg_tolerance = if T::NAME == "f64" { 1e-13 } else { 1e-6 };
    let solvers = match solvers {
        Solvers::Reference => prop_oneof![
            Just(SolverCase { choice: SolverChoice::Direct, tolerance: pcg_tolerance }),
            Just(SolverCase { choice: SolverChoice::PcgBlockJacobi, tolerance: pcg_tolerance }),
        ]
        .boxed(),
        Solvers::Multigrid => {
            Just(SolverCase { choice: SolverChoice::PcgMg, tolerance: pcg_tolerance }).boxed()
        }
    };
    let solutions = prop_oneof![
        Just(SolutionCase::Sine),
        Just(SolutionCase::ExpSin),
        Just(SolutionCase::Polynomial)
    ];
    (
        mesh_strategy(cell),
        1..=MAX_ELEMENT_ORDER.min(6),
        tau_strategy(),
        coefficient_strategy(0.2, 5.0),
        prop_oneof![Just(CoefficientCase::Constant(0.0)), coefficient_strategy(0.0, 3.0)],
        solutions,
        solvers,
        prop::sample::select(TraceOperatorKind::ALL.to_vec()),
        any::<u64>(),
    )
        .prop_map(
            |(mesh, order, tau, kappa, reaction, solution, solver, operator, vector_seed)| {
                // Mixed conditions on every other case, from a bit of a seed already drawn: the
                // cases with Dirichlet data keep the draws they were validated with (a new
                // strategy element would shift every later draw).
                let mixed = vector_seed % 2 == 1;
                // The same for coefficients at points (smooth ones only: the others stay per
                // cell) and the tensor.
                let at_points = (vector_seed >> 1) % 2 == 1;
                let tensor = at_points && (vector_seed >> 2) % 2 == 1;
                Case {
                    mesh,
                    order,
                    tau,
                    kappa,
                    reaction,
                    solution,
                    solver,
                    // The multigrid builds its coarse operator from the assembled blocks;
                    // Neumann and Robin faces need the assembled operator.
                    operator: if solver.choice == SolverChoice::PcgMg || mixed {
                        TraceOperatorKind::Dbf
                    } else {
                        operator
                    },
                    vector_seed,
                    mixed_boundary: mixed,
                    at_points,
                    tensor,
                }
            },
        )
}

// ---------------------------------------------------------------------------------------------
// One backend's answers, on the host.

/// A precision both backends run every solver of the cases in (`pcg-mg` included).
trait Precision: DeviceReal + MultigridPrecision<CpuBackend> + MultigridPrecision<CudaBackend> {}
impl Precision for f32 {}
impl Precision for f64 {}

/// What one backend computed for a case.
struct Answers<T> {
    trace_matrices: Vec<T>,
    rhs: Vec<T>,
    /// The operator applied to each random vector.
    applied: Vec<Vec<T>>,
    trace: Vec<T>,
    u: Vec<T>,
    q: Vec<T>,
    u_star: Vec<T>,
    errors: ErrorNorms,
    solve: SolveReport,
}

/// Runs every stage of `case` on backend `b`.
fn answers<T, B>(
    b: &B,
    mesh: &Mesh,
    problem: &Problem,
    case: &Case,
    vectors: &[Vec<T>],
) -> hdg_core::Result<Answers<T>>
where
    T: MultigridPrecision<B>,
    B: Backend<T, Operator: MultigridOperator<T, B>> + MultigridOps<T>,
{
    let solver = case.solver.suite();
    let mut disc = Discretization::<T>::new(mesh, problem, case.order)?;
    case.tau.apply(&mut disc.tau);
    let prep = b.prepare(&disc)?;
    let condensed = b.condense(&disc, &prep)?;
    let trace_matrices = b.condensed_to_host(&condensed)?.trace_matrices;
    let (operator, rhs) = b.assemble(&disc, &prep, &condensed)?;
    let dim = operator.dim();
    let mut applied = Vec::with_capacity(vectors.len());
    for x in vectors {
        assert_eq!(x.len(), dim, "random vector length");
        // NaN-filled output: an entry the operator does not write shows up.
        let mut y = b.copy_from_host(&vec![T::nan(); dim])?;
        operator.apply(&b.copy_from_host(x)?, &mut y)?;
        applied.push(b.to_host(&y)?);
    }
    let rhs_host = b.to_host(&rhs)?;
    let exact = problem.exact.as_ref().expect("manufactured problems have an exact solution");
    if case.tau.constant().is_some() {
        // The whole pipeline, as `hdg solve` runs it.
        drop((operator, rhs, condensed, prep));
        let out = pipeline::solve::<T, B>(
            b,
            mesh,
            problem,
            case.order,
            &solver,
            PipelineOptions::default(),
            &mut Silent,
        )?;
        let fields = b.fields_to_host(&out.fields)?;
        Ok(Answers {
            trace_matrices,
            rhs: rhs_host,
            applied,
            trace: b.to_host(&out.trace)?,
            u: fields.u,
            q: fields.q,
            u_star: b.postprocessed_to_host(&out.postprocessed)?,
            errors: out.report.errors.expect("errors of a manufactured problem"),
            solve: out.report.solve,
        })
    } else {
        // The pipeline's stages one by one (it would take tau from the Problem).
        let mut x = b.zeros(dim)?;
        let solve = solver.solve(b, &disc, &operator, &rhs, &mut x)?;
        drop((operator, rhs));
        let fields = b.recover(&disc, &prep, &condensed, &x)?;
        drop(condensed);
        let post = b.postprocess(&disc, &prep, &fields)?;
        let errors = b.error_norms(&disc, &prep, &fields, &post, exact)?;
        let host = b.fields_to_host(&fields)?;
        Ok(Answers {
            trace_matrices,
            rhs: rhs_host,
            applied,
            trace: b.to_host(&x)?,
            u: host.u,
            q: host.q,
            u_star: b.postprocessed_to_host(&post)?,
            errors,
            solve,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Comparison.

/// The largest difference seen per quantity over a test's cases (printed at the end).
#[derive(Default)]
struct Worst(Vec<(&'static str, f64)>);

impl Worst {
    fn record(&mut self, what: &'static str, value: f64) {
        match self.0.iter_mut().find(|(w, _)| *w == what) {
            Some((_, v)) => *v = v.max(value),
            None => self.0.push((what, value)),
        }
    }
}

/// max |gpu - cpu| / max |cpu| (the absolute difference when cpu is all zeros).
fn relative_difference<T: Real>(gpu: &[T], cpu: &[T]) -> f64 {
    let diff = gpu.iter().zip(cpu).fold(0.0f64, |m, (a, b)| m.max((a.as_f64() - b.as_f64()).abs()));
    let scale = cpu.iter().fold(0.0f64, |m, b| m.max(b.as_f64().abs()));
    if scale > 0.0 {
        diff / scale
    } else {
        diff
    }
}

fn compare_arrays<T: Real>(
    worst: &mut Worst,
    what: &'static str,
    gpu: &[T],
    cpu: &[T],
    tol: f64,
) -> Result<(), TestCaseError> {
    if gpu.len() != cpu.len() {
        return Err(TestCaseError::fail(format!(
            "{what}: {} GPU values, {} CPU values",
            gpu.len(),
            cpu.len()
        )));
    }
    if let Some(i) = gpu.iter().position(|v| !v.as_f64().is_finite()) {
        return Err(TestCaseError::fail(format!("{what}: GPU value {i} is {}", gpu[i])));
    }
    let d = relative_difference(gpu, cpu);
    worst.record(what, d);
    if d <= tol {
        Ok(())
    } else {
        Err(TestCaseError::fail(format!(
            "{what} ({}): relative difference {d:e} > {tol:e}",
            T::NAME
        )))
    }
}

/// Compares two error norms. Their difference is at most the L2 norm of the difference of the
/// two discrete fields, so it is measured relative to the size of the field (the largest CPU
/// coefficient, the scale [`relative_difference`] uses for the fields themselves) or of the
/// error, whichever is larger: an error of 3e-2 in a flux of size 17 computed in f32 can move
/// by 1e-4 in absolute terms while the fields agree to 1e-5.
fn compare_error<T: Real>(
    worst: &mut Worst,
    what: &'static str,
    gpu: f64,
    cpu: f64,
    cpu_field: &[T],
    tol: f64,
) -> Result<(), TestCaseError> {
    let field_scale = cpu_field.iter().fold(0.0f64, |m, b| m.max(b.as_f64().abs()));
    let scale = cpu.abs().max(field_scale).max(f64::MIN_POSITIVE);
    let d = (gpu - cpu).abs() / scale;
    worst.record(what, d);
    if d <= tol {
        Ok(())
    } else {
        Err(TestCaseError::fail(format!(
            "{what}: GPU {gpu:e}, CPU {cpu:e}, difference {d:e} > {tol:e} (relative to \
             max(error, largest field coefficient {field_scale:e}))"
        )))
    }
}

/// How much looser the f32 comparison is with Neumann and Robin faces. Fewer fixed traces make
/// the trace matrix worse conditioned, and an f32 solve's distance from the f64 solve grows
/// with it: on the CPU alone, plate-with-hole-1 at k = 3 (direct solves) differs from f64 by
/// 2.0e-5 (trace) and 2.5e-4 (q_h) with Dirichlet data everywhere, by 1.4e-4 and 3.4e-4 with
/// Neumann and Robin parts. Two f32 solves cannot be held closer to each other than each is to
/// the exact answer; f64 cases keep 1e-11, which catches a wrong term on one backend.
const MIXED_F32_FACTOR: f64 = 3.0;

/// The same for coefficients at quadrature points: their element matrices take one more
/// Cholesky factorisation and Gram product in the working precision. On the CPU alone, the
/// drawn case that failed at 2e-4 (k = 6, square:9, a smooth kappa varying by a factor 5, f32
/// PCG-MG: CUDA and CPU 3.0e-4 apart on q_h) has f32 2.8e-4 from f64 on q_h with kappa at
/// points and 1.9e-4 with the same kappa sampled per cell (`direct` solves).
const POINTS_F32_FACTOR: f64 = 3.0;

/// The property: both backends give the same answers to `tol`.
fn same_answers<T: Precision>(
    g: &CudaBackend,
    case: &Case,
    tol: f64,
    worst: &mut Worst,
) -> Result<(), TestCaseError> {
    let mesh = case.mesh.build();
    let problem = case.problem(&mesh);
    let tol = if T::NAME != "f32" {
        tol
    } else if case.mixed_boundary || case.at_points {
        MIXED_F32_FACTOR.max(POINTS_F32_FACTOR) * tol
    } else {
        tol
    };
    let disc = Discretization::<T>::new(&mesh, &problem, case.order)
        .map_err(|e| TestCaseError::fail(format!("invalid case: {e}")))?;
    let dim = disc.trace_dofs();
    drop(disc);
    let mut rng = StdRng::seed_from_u64(case.vector_seed);
    let vectors: Vec<Vec<T>> = (0..2)
        .map(|_| (0..dim).map(|_| T::from_f64_lossy(rng.gen_range(-1.0..1.0))).collect())
        .collect();
    let fail = |who: &str, e: hdg_core::CoreError| TestCaseError::fail(format!("{who}: {e}"));
    let c = answers::<T, CpuBackend>(&CpuBackend, &mesh, &problem, case, &vectors)
        .map_err(|e| fail("cpu", e))?;
    let g = g.clone().with_trace_operator(case.operator);
    let d = answers::<T, CudaBackend>(&g, &mesh, &problem, case, &vectors)
        .map_err(|e| fail("cuda", e))?;
    if !(c.solve.converged && d.solve.converged) {
        return Err(TestCaseError::fail(format!(
            "trace solve not converged: cpu {:?} / cuda {:?} (relative residuals {:e} / {:e})",
            c.solve.converged,
            d.solve.converged,
            c.solve.relative_residual,
            d.solve.relative_residual
        )));
    }
    compare_arrays(worst, "K_e", &d.trace_matrices, &c.trace_matrices, tol)?;
    compare_arrays(worst, "rhs", &d.rhs, &c.rhs, tol)?;
    for (gy, cy) in d.applied.iter().zip(&c.applied) {
        compare_arrays(worst, "A x", gy, cy, tol)?;
    }
    compare_arrays(worst, "trace solution", &d.trace, &c.trace, tol)?;
    compare_arrays(worst, "u_h", &d.u, &c.u, tol)?;
    compare_arrays(worst, "q_h", &d.q, &c.q, tol)?;
    compare_arrays(worst, "u*", &d.u_star, &c.u_star, tol)?;
    compare_error(worst, "||u - u_h||", d.errors.u, c.errors.u, &c.u, tol)?;
    compare_error(worst, "||q - q_h||", d.errors.q, c.errors.q, &c.q, tol)?;
    compare_error(worst, "||u - u*||", d.errors.u_star, c.errors.u_star, &c.u_star, tol)?;
    Ok(())
}

/// A deterministic configuration: fixed seed (unless `PROPTEST_RNG_SEED`), no persistence file,
/// a bounded shrink (every shrink step is a GPU run).
fn config(seed: u64) -> Config {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    Config {
        cases: env("PROPTEST_CASES").map_or(DEFAULT_CASES, |c| c as u32),
        failure_persistence: None,
        rng_algorithm: RngAlgorithm::ChaCha,
        rng_seed: RngSeed::Fixed(env("PROPTEST_RNG_SEED").unwrap_or(seed)),
        max_shrink_iters: 64,
        max_shrink_time: 120_000,
        ..Config::default()
    }
}

/// Runs the property on `cell` meshes in precision `T` to tolerance `tol`.
fn property<T: Precision>(cell: CellType, solvers: Solvers, seed: u64, tol: f64) {
    let g = device();
    let worst = Mutex::new(Worst::default());
    let count = Mutex::new(0usize);
    let start = Instant::now();
    let mut runner = TestRunner::new(config(seed));
    let result = runner.run(&case_strategy::<T>(cell, solvers), |case| {
        let t = Instant::now();
        let mut w = worst.lock().unwrap_or_else(|p| p.into_inner());
        let outcome = same_answers::<T>(&g, &case, tol, &mut w);
        *count.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        eprintln!(
            "[{}] {} ({:.2} s): {}",
            T::NAME,
            if outcome.is_ok() { "ok" } else { "FAILED" },
            t.elapsed().as_secs_f64(),
            case.label()
        );
        outcome
    });
    let runs = count.into_inner().unwrap_or_else(|p| p.into_inner());
    let worst = worst.into_inner().unwrap_or_else(|p| p.into_inner());
    eprintln!(
        "[{}] {runs} runs in {:.1} s; largest differences (tolerance {tol:e}):",
        T::NAME,
        start.elapsed().as_secs_f64()
    );
    for (what, v) in &worst.0 {
        eprintln!("  {what:>16}: {v:.2e}");
    }
    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, case)) => panic!(
            "CPU and CUDA backends disagree ({}): {reason}\nminimal failing case: {}\n{case:#?}",
            T::NAME,
            case.label()
        ),
        Err(TestError::Abort(reason)) => panic!("proptest aborted: {reason}"),
    }
}

/// A whole pipeline's trace solution, u_h, q_h, u* and errors, on the host.
type FileAnswers<T> = (Vec<T>, Vec<T>, Vec<T>, Vec<T>, ErrorNorms);

fn file_answers<T, B>(
    b: &B,
    mesh: &Mesh,
    problem: &Problem,
    order: usize,
    solver: &Suite,
) -> hdg_core::Result<FileAnswers<T>>
where
    T: MultigridPrecision<B>,
    B: Backend<T, Operator: MultigridOperator<T, B>> + MultigridOps<T>,
{
    let options = PipelineOptions::default();
    let out = pipeline::solve::<T, B>(b, mesh, problem, order, solver, options, &mut Silent)?;
    let fields = b.fields_to_host(&out.fields)?;
    Ok((
        b.to_host(&out.trace)?,
        fields.u,
        fields.q,
        b.postprocessed_to_host(&out.postprocessed)?,
        out.report.errors.expect("errors of a manufactured problem"),
    ))
}

/// The shipped Gmsh meshes with Neumann and Robin data on their physical groups: the same
/// trace solution, fields and errors on both backends (f64 to 1e-11, f32 to 3e-4:
/// [`MIXED_F32_FACTOR`]).
#[test]
#[ignore = "needs a CUDA device; run with --ignored on a GPU machine"]
fn cpu_and_cuda_agree_on_mesh_files_with_every_condition() {
    fn both<T: Precision>(g: &CudaBackend, tol: f64) {
        let cases = [
            ("plate-with-hole-1", "hole", Some("outer"), 3),
            ("l-shape-1", "reentrant", None, 2),
            ("cube-with-hole-0", "outer", Some("hole"), 2),
        ];
        let solver = Suite::new(SolverChoice::Direct, 1e-13, 1000);
        let mut worst = Worst::default();
        for (name, neumann, robin, k) in cases {
            let read = tests::example_mesh(name);
            let mut problem = Problem::manufactured(Manufactured::ExpSin, 1.0, 0.0);
            let exact = problem.exact.clone().expect("manufactured");
            let tag = |n: &str| read.groups.boundary_tag(n).expect("a group of the file");
            problem =
                problem.with_boundary(tag(neumann), BoundaryCondition::neumann_of(&exact, 1.0));
            if let Some(robin) = robin {
                let condition = BoundaryCondition::robin_of(&exact, 1.0, 1.0);
                problem = problem.with_boundary(tag(robin), condition);
            }
            let fail = |who: &str, e: hdg_core::CoreError| -> FileAnswers<T> {
                panic!("{name} on {who}: {e}")
            };
            let c = file_answers::<T, CpuBackend>(&CpuBackend, &read.mesh, &problem, k, &solver)
                .unwrap_or_else(|e| fail("cpu", e));
            let d = file_answers::<T, CudaBackend>(g, &read.mesh, &problem, k, &solver)
                .unwrap_or_else(|e| fail("cuda", e));
            let check = |r: Result<(), TestCaseError>| r.unwrap_or_else(|e| panic!("{name}: {e}"));
            check(compare_arrays(&mut worst, "trace solution", &d.0, &c.0, tol));
            check(compare_arrays(&mut worst, "u_h", &d.1, &c.1, tol));
            check(compare_arrays(&mut worst, "q_h", &d.2, &c.2, tol));
            check(compare_arrays(&mut worst, "u*", &d.3, &c.3, tol));
            check(compare_error(&mut worst, "||u - u_h||", d.4.u, c.4.u, &c.1, tol));
            eprintln!("{name} ({}): errors cpu {:?} cuda {:?}", T::NAME, c.4, d.4);
        }
        eprintln!("worst differences ({}): {:?}", T::NAME, worst.0);
    }
    let g = device();
    both::<f64>(&g, 1e-11);
    both::<f32>(&g, MIXED_F32_FACTOR * 1e-4);
}

#[test]
#[ignore = "needs a CUDA device; run with --ignored on a GPU machine"]
fn cpu_and_cuda_agree_f64_triangles() {
    property::<f64>(CellType::Triangle, Solvers::Reference, 0x4844_4704_f640, 1e-11);
}

#[test]
#[ignore = "needs a CUDA device; run with --ignored on a GPU machine"]
fn cpu_and_cuda_agree_f32_triangles() {
    property::<f32>(CellType::Triangle, Solvers::Reference, 0x4844_4704_f320, 1e-4);
}

#[test]
#[ignore = "needs a CUDA device; run with --ignored on a GPU machine"]
fn cpu_and_cuda_agree_f64_tetrahedra() {
    property::<f64>(CellType::Tetrahedron, Solvers::Reference, 0x4844_4704_f643, 1e-11);
}

#[test]
#[ignore = "needs a CUDA device; run with --ignored on a GPU machine"]
fn cpu_and_cuda_agree_f32_tetrahedra() {
    property::<f32>(CellType::Tetrahedron, Solvers::Reference, 0x4844_4704_f323, 1e-4);
}

/// Multigrid PCG on both backends (the DBF operator on the device): the same comparisons.
#[test]
#[ignore = "needs a CUDA device; run with --ignored on a GPU machine"]
fn cpu_and_cuda_agree_pcg_mg_f64() {
    property::<f64>(CellType::Triangle, Solvers::Multigrid, 0x4844_4704_a640, 1e-11);
    property::<f64>(CellType::Tetrahedron, Solvers::Multigrid, 0x4844_4704_a643, 1e-11);
}

/// In f32 at 2e-4: q_h at k = 5, 6 differs by up to 1.3e-4 between the backends with every
/// solver, the direct one included (K_e differs by about 1e-6 and the trace system's condition
/// number at these orders carries that into q_h); the reference properties stay at 1e-4
/// because their fixed draws stay below it.
#[test]
#[ignore = "needs a CUDA device; run with --ignored on a GPU machine"]
fn cpu_and_cuda_agree_pcg_mg_f32() {
    property::<f32>(CellType::Triangle, Solvers::Multigrid, 0x4844_4704_a320, 2e-4);
    property::<f32>(CellType::Tetrahedron, Solvers::Multigrid, 0x4844_4704_a323, 2e-4);
}

/// The strategies themselves (no device): valid meshes and problems for both cell types.
#[test]
fn strategies_draw_valid_cases() {
    let mut runner = TestRunner::new(Config { cases: 16, ..config(7) });
    for cell in [CellType::Triangle, CellType::Tetrahedron] {
        runner
            .run(&case_strategy::<f64>(cell, Solvers::Reference), |case| {
                let mesh = case.mesh.build();
                prop_assert_eq!(mesh.cell_type(), cell);
                let problem = case.problem(&mesh);
                prop_assert!(problem.validate(mesh.n_cells()).is_ok(), "{:?}", problem);
                prop_assert!((1..=6).contains(&case.order));
                Ok(())
            })
            .unwrap();
        runner
            .run(&case_strategy::<f32>(cell, Solvers::Multigrid), |case| {
                prop_assert_eq!(case.solver.choice, SolverChoice::PcgMg);
                prop_assert_eq!(case.operator, TraceOperatorKind::Dbf);
                Ok(())
            })
            .unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// The device memory watch.

#[test]
#[ignore = "needs a CUDA device; run with --ignored on a GPU machine"]
fn memory_watch_sees_allocations_and_a_solve() {
    let g = device();
    // An allocation of 512 MiB held for 20 ms must show up in full.
    const BYTES: usize = 512 << 20;
    let watch = g.watch_memory(Duration::from_micros(500)).expect("memory watch starts");
    let buffer = VectorOps::<f64>::zeros(&g, BYTES / 8).expect("512 MiB on the device");
    g.synchronize().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    drop(buffer);
    let peak = watch.stop().expect("memory watch stops");
    eprintln!("512 MiB buffer: {peak:?}");
    assert!(peak.samples >= 2, "{peak:?}");
    assert!(peak.peak_bytes() >= BYTES, "peak {} < {BYTES} bytes: {peak:?}", peak.peak_bytes());
    assert!(peak.peak_used_bytes <= peak.total_bytes, "{peak:?}");

    // A whole solve: a positive peak, and a per-dof figure in a sane range.
    let mesh = generate::unit_square(96, Diagonal::Right).unwrap();
    let problem = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
    let suite = Suite::new(SolverChoice::PcgJacobi, 1e-10, 50_000);
    let watch = g.watch_memory(Duration::from_micros(500)).expect("memory watch starts");
    let out = pipeline::solve::<f64, CudaBackend>(
        &g,
        &mesh,
        &problem,
        3,
        &Krylov::<f64, CudaBackend>(&suite),
        PipelineOptions::default(),
        &mut Silent,
    )
    .unwrap();
    let peak = watch.stop().expect("memory watch stops");
    let per_dof = peak.peak_bytes() as f64 / out.report.trace_dofs as f64;
    eprintln!(
        "square:96, k = 3: {} trace dofs, {per_dof:.0} bytes per dof, {peak:?}",
        out.report.trace_dofs
    );
    assert!(peak.peak_bytes() > 0 && per_dof < 1e5, "{peak:?}");
}

/// Device memory in use now (after the queued work), bytes.
fn memory_in_use(g: &CudaBackend) -> usize {
    let watch = g.watch_memory(Duration::from_millis(1)).expect("memory watch starts");
    watch.stop().expect("memory watch stops").baseline_used_bytes
}

/// The f64 pipeline of `mesh` and `problem` at order `k` with pcg-mg to 1e-10 on `backend`.
fn pcg_mg_run<B>(
    backend: &B,
    mesh: &Mesh,
    problem: &Problem,
    k: usize,
) -> pipeline::PipelineOutput<f64, B>
where
    B: hdg_core::Backend<f64> + hdg_core::MultigridOps<f64>,
    f64: MultigridPrecision<B>,
    B::Operator: MultigridOperator<f64, B>,
{
    let suite = Suite::new(SolverChoice::PcgMg, 1e-10, 500);
    pipeline::solve::<f64, B>(
        backend,
        mesh,
        problem,
        k,
        &suite,
        PipelineOptions::default(),
        &mut Silent,
    )
    .unwrap()
}

/// The local memory the device context holds for kernels' stack arrays (stack size times the
/// threads the device holds at once: 264 MiB per KB on 132 SMs) is given back by the stages
/// that launch them: a pcg-mg run whose vertex level is assembled on the device (the row
/// accumulator: 1.5 KB of stack) and whose triangles at k = 2 are recovered and postprocessed
/// by the thread designs leaves no more device memory in use than before it, the code of the
/// kernels loaded on first use aside.
#[test]
#[ignore = "needs a CUDA device; run with --ignored on a GPU machine"]
fn the_stages_give_back_the_local_memory_of_their_stacks() {
    let g = device();
    g.release_local_memory().unwrap();
    let before = memory_in_use(&g);
    let mesh = generate::unit_square(64, Diagonal::Right).unwrap();
    let problem = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
    let out = pcg_mg_run(&g, &mesh, &problem, 2);
    assert!(out.report.solve.converged, "{:?}", out.report.solve);
    drop(out);
    let after = memory_in_use(&g);
    let kept = after.saturating_sub(before) as f64 / (1u64 << 20) as f64;
    eprintln!(
        "device memory in use: {before} bytes before the run, {after} after ({kept:.1} MiB kept)"
    );
    assert!(kept < 64.0, "{kept:.1} MiB more in use after the run than before it");
}

/// After the assembly the DBF matrix holds its own copy of the element trace matrices, so the
/// pipeline frees K_e and b_e (208 bytes per trace unknown at 2D k = 3; the recovery reads Z and
/// u0 alone): `release_assembly_inputs` gives their memory back, and a pcg-mg run, which frees
/// them, gives the CPU's errors.
#[test]
#[ignore = "needs a CUDA device; run with --ignored on a GPU machine"]
fn the_element_trace_matrices_go_after_the_assembly() {
    let g = device();
    let mesh = generate::unit_square(256, Diagonal::Right).unwrap();
    let problem = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
    let disc = Discretization::<f64>::new(&mesh, &problem, 3).unwrap();
    let prep = hdg_core::LocalSolver::<f64>::prepare(&g, &disc).unwrap();
    let mut condensed = hdg_core::LocalSolver::<f64>::condense(&g, &disc, &prep).unwrap();
    let (operator, _) = hdg_core::Assembler::<f64>::assemble(&g, &disc, &prep, &condensed).unwrap();
    let before = memory_in_use(&g);
    hdg_core::Assembler::<f64>::release_assembly_inputs(&g, &mut condensed, &operator);
    let freed = before.saturating_sub(memory_in_use(&g));
    let nl = disc.tables.n_local_trace();
    let expected = mesh.n_cells() * (nl * nl + nl) * 8;
    eprintln!("square:256, k = 3: {freed} bytes freed, K_e and b_e are {expected}");
    assert!(freed as f64 >= 0.95 * expected as f64, "{freed} bytes freed of {expected}");
    drop((operator, condensed, prep));

    let gpu = pcg_mg_run(&g, &mesh, &problem, 3);
    assert!(gpu.report.solve.converged, "{:?}", gpu.report.solve);
    let cpu = pcg_mg_run(&CpuBackend, &mesh, &problem, 3);
    let (d, c) = (gpu.report.errors.unwrap(), cpu.report.errors.unwrap());
    // As the drawn cases compare them: against max(error, 1) (module documentation).
    assert!((d.u - c.u).abs() <= 1e-8 && (d.q - c.q).abs() <= 1e-8, "{d:?} vs {c:?}");
}
