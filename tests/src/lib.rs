//! Shared helpers of the integration tests: run the whole pipeline on a mesh, on any backend,
//! and hand back (on the host) everything a test wants to look at.
//!
//! The pipeline tests are written once, as functions of a [`Backend`] (the facade's), and
//! [`per_backend!`]
//! makes one test per backend of each (libCEED style): `name::cpu` runs everywhere,
//! `name::cuda` is `#[ignore]`d, so that it is reported as ignored (never as passed) where no
//! GPU is asked for, and runs with `--ignored` on a GPU machine (`scripts/gpu-run.sh`). Built
//! without the `cuda` feature, a CUDA test run with `--ignored` fails and says why.
use hdg_backend_cpu::CpuBackend;
use hdg_core::{
    solve, Backend as Stages, Discretization, ErrorNorms, HostCsr, HostFields, Krylov,
    PipelineOptions, PipelineReport, Problem, Real, Result, Silent, TraceOperator, TraceSolver,
};
use hdg_linalg::{ConjugateGradient, DirectCholesky, Preconditioning};
use hdg_mesh::Mesh;

/// Makes one test per backend of a test written as a function of the backend:
///
/// ```ignore
/// per_backend! {
///     /// What the test shows.
///     fn polynomials_are_reproduced(backend) {
///         let out = backend.run::<f64>(&mesh, &problem, 2);
///         ...
///     }
/// }
/// ```
///
/// gives the tests `polynomials_are_reproduced::cpu` and `polynomials_are_reproduced::cuda`.
#[macro_export]
macro_rules! per_backend {
    ($($(#[$meta:meta])* fn $name:ident($backend:ident) $body:block)*) => {$(
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[allow(unused_imports)]
            use $crate::Runs;

            fn body($backend: $crate::Backend) $body

            #[test]
            fn cpu() {
                body($crate::Backend::Cpu)
            }

            #[test]
            #[ignore = "needs a CUDA device and the cuda feature; run with --ignored on a GPU machine"]
            fn cuda() {
                body($crate::Backend::Cuda)
            }
        }
    )*};
}

pub use hdg::Backend;

/// A precision that every backend of this build runs in.
#[cfg(feature = "cuda")]
pub trait TestReal: Real + hdg_backend_cuda::DeviceReal {}
/// A precision that every backend of this build runs in.
#[cfg(not(feature = "cuda"))]
pub trait TestReal: Real {}
impl TestReal for f32 {}
impl TestReal for f64 {}

/// How a run solves the trace system.
#[derive(Clone, Debug)]
pub enum TraceSolve {
    /// A conjugate gradient method.
    Cg(ConjugateGradient),
    /// The sparse direct solve (faster than CG on the small 3D meshes of the tests, and free
    /// of an iteration tolerance).
    Direct,
}

impl TraceSolve {
    /// Jacobi-preconditioned CG to [`tolerance`], far below discretisation errors.
    pub fn cg<T: Real>() -> Self {
        TraceSolve::Cg(ConjugateGradient::new(tolerance::<T>(), 100_000, Preconditioning::Jacobi))
    }
}

/// What a run computed, copied to the host.
pub struct HostRun<T> {
    /// The pipeline's report (errors, solve, sizes).
    pub report: PipelineReport,
    /// Free trace values.
    pub trace: Vec<T>,
    /// u_h and q_h, element-contiguous.
    pub fields: HostFields<T>,
    /// u*, element-contiguous.
    pub u_star: Vec<T>,
    /// The trace matrix and right-hand side, when asked for ([`Runs::run_keeping`]).
    pub operator: Option<(HostCsr, Vec<T>)>,
}

/// Default tolerance of the trace solve in a precision: far below discretisation errors.
pub fn tolerance<T: Real>() -> f64 {
    if T::NAME == "f64" {
        1e-12
    } else {
        1e-6
    }
}

/// The pipeline run on a [`Backend`] (the CUDA one on the first device), everything it
/// computed copied to the host.
pub trait Runs: Copy + std::fmt::Debug {
    /// Runs the pipeline; any error is returned.
    fn try_run<T: TestReal>(
        self,
        mesh: &Mesh,
        problem: &Problem,
        order: usize,
        trace_solve: &TraceSolve,
        keep_operator: bool,
    ) -> Result<HostRun<T>>;

    /// Runs the pipeline with [`TraceSolve::cg`]; panics on an error or an unconverged solve.
    fn run<T: TestReal>(self, mesh: &Mesh, problem: &Problem, order: usize) -> HostRun<T> {
        checked(self, mesh, problem, order, &TraceSolve::cg::<T>(), false)
    }

    /// As [`Runs::run`], keeping the trace matrix and right-hand side.
    fn run_keeping<T: TestReal>(self, mesh: &Mesh, problem: &Problem, order: usize) -> HostRun<T> {
        checked(self, mesh, problem, order, &TraceSolve::cg::<T>(), true)
    }

    /// Runs the pipeline with the sparse direct trace solve; panics on an error.
    fn run_direct<T: TestReal>(self, mesh: &Mesh, problem: &Problem, order: usize) -> HostRun<T> {
        checked(self, mesh, problem, order, &TraceSolve::Direct, false)
    }
}

impl Runs for Backend {
    fn try_run<T: TestReal>(
        self,
        mesh: &Mesh,
        problem: &Problem,
        order: usize,
        trace_solve: &TraceSolve,
        keep_operator: bool,
    ) -> Result<HostRun<T>> {
        match self {
            Backend::Cpu => run_on(&CpuBackend, mesh, problem, order, trace_solve, keep_operator),
            Backend::Cuda => run_on_cuda(mesh, problem, order, trace_solve, keep_operator),
        }
    }
}

fn checked<T: TestReal>(
    backend: impl Runs,
    mesh: &Mesh,
    problem: &Problem,
    order: usize,
    trace_solve: &TraceSolve,
    keep_operator: bool,
) -> HostRun<T> {
    let out = backend
        .try_run::<T>(mesh, problem, order, trace_solve, keep_operator)
        .unwrap_or_else(|e| panic!("{backend:?} pipeline at order {order}: {e}"));
    assert!(out.report.solve.converged, "trace solve did not converge: {:?}", out.report.solve);
    out
}

/// Runs the pipeline on `backend` and copies what it computed to the host.
fn run_on<T: Real, B: Stages<T>>(
    backend: &B,
    mesh: &Mesh,
    problem: &Problem,
    order: usize,
    trace_solve: &TraceSolve,
    keep_operator: bool,
) -> Result<HostRun<T>> {
    let krylov;
    let solver: &dyn TraceSolver<T, B> = match trace_solve {
        TraceSolve::Cg(cg) => {
            krylov = Krylov(cg);
            &krylov
        }
        TraceSolve::Direct => &DirectCholesky,
    };
    let options = PipelineOptions { keep_operator, ..Default::default() };
    let out = solve::<T, B>(backend, mesh, problem, order, solver, options, &mut Silent)?;
    let operator = match &out.operator {
        Some((op, rhs)) => Some((op.to_host_csr()?, backend.to_host(rhs)?)),
        None => None,
    };
    Ok(HostRun {
        trace: backend.to_host(&out.trace)?,
        fields: backend.fields_to_host(&out.fields)?,
        u_star: backend.postprocessed_to_host(&out.postprocessed)?,
        operator,
        report: out.report,
    })
}

#[cfg(feature = "cuda")]
fn run_on_cuda<T: TestReal>(
    mesh: &Mesh,
    problem: &Problem,
    order: usize,
    trace_solve: &TraceSolve,
    keep_operator: bool,
) -> Result<HostRun<T>> {
    let backend = hdg_backend_cuda::CudaBackend::new().unwrap_or_else(|e| {
        panic!("the CUDA variant of this test needs a CUDA device and its driver: {e}")
    });
    run_on(&backend, mesh, problem, order, trace_solve, keep_operator)
}

#[cfg(not(feature = "cuda"))]
fn run_on_cuda<T: TestReal>(
    _mesh: &Mesh,
    _problem: &Problem,
    _order: usize,
    _trace_solve: &TraceSolve,
    _keep_operator: bool,
) -> Result<HostRun<T>> {
    Err(hdg_core::CoreError::Backend(
        "this test binary was built without the `cuda` feature: build it with \
         `--features tests/cuda` (scripts/gpu-build.sh does) to run the CUDA variant"
            .into(),
    ))
}

/// Asserts that a solve reproduced its exact solution (a polynomial of degree at most the
/// order): u_h, q_h and u* all at round-off, printing the three errors.
pub fn assert_reproduced(k: usize, e: &ErrorNorms) {
    println!(
        "k = {k}: |u - u_h| = {:.2e}, |q - q_h| = {:.2e}, |u - u*| = {:.2e}",
        e.u, e.q, e.u_star
    );
    assert!(e.u < 1e-10 && e.q < 1e-10 && e.u_star < 1e-10, "k = {k}: {e:?}");
}

/// Asserts the rates of convergence observed between a mesh and its refinement (h halved) at
/// order k: k+1 for u and q, k+2 for u*, each within 0.2.
pub fn assert_rates(label: &str, k: usize, coarse: ErrorNorms, fine: ErrorNorms) {
    let rate = |a: f64, b: f64| (a / b).log2();
    let (c, f) = (coarse, fine);
    let rates = [rate(c.u, f.u), rate(c.q, f.q), rate(c.u_star, f.u_star)];
    println!("{label} k={k}: errors {f:?} rates {rates:?}");
    let expect = [k as f64 + 1.0, k as f64 + 1.0, k as f64 + 2.0];
    for (name, (r, e)) in ["u", "q", "u*"].iter().zip(rates.iter().zip(expect)) {
        assert!((r - e).abs() <= 0.2, "{label} k={k}: rate of {name} is {r:.3}, expected {e}");
    }
}

/// The discretization of a run (rebuilt on the host, for diagnostics).
pub fn discretization<'a, T: Real>(
    mesh: &'a Mesh,
    problem: &'a Problem,
    order: usize,
) -> Discretization<'a, T> {
    Discretization::new(mesh, problem, order).expect("valid discretization")
}

/// A mesh shipped under `examples/meshes/` (`name` without `.msh`), read by the Gmsh reader.
/// Found beside this crate's sources, else under the working directory: test binaries carried
/// to a GPU machine run from a copy of the repository root.
pub fn example_mesh(name: &str) -> hdg_mesh::gmsh::GmshMesh {
    let file = format!("examples/meshes/{name}.msh");
    let beside = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(&file);
    let path = if beside.exists() { beside } else { std::path::PathBuf::from(&file) };
    hdg_mesh::gmsh::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Neumann data on the whole boundary of the unit square (cube), c = 0 and mean(u) = 0 asked
/// for: u = cos(pi x) cos(pi y) (cos(pi z)), whose mean is zero and whose normal derivative
/// vanishes on every side, with f = -lap u = d pi^2 u (written out here, not taken from the
/// library).
pub fn pure_neumann_cosine(dim: usize) -> Problem {
    use std::f64::consts::PI;
    use std::sync::Arc;
    let u = |x: &[f64]| x.iter().map(|&xi| (PI * xi).cos()).product::<f64>();
    let mut p = Problem::manufactured(hdg_core::Manufactured::Sine, 1.0, 0.0);
    p.source = hdg_core::Source::closure(move |x| x.len() as f64 * PI * PI * u(x));
    p.dirichlet = Arc::new(u);
    p.exact = Some(hdg_core::ExactSolution::Closures {
        u: Arc::new(u),
        grad_u: Arc::new(|x, g| {
            for (r, gr) in g.iter_mut().enumerate() {
                *gr = (0..x.len())
                    .map(|s| if s == r { -PI * (PI * x[s]).sin() } else { (PI * x[s]).cos() })
                    .product();
            }
        }),
    });
    let tags: Vec<u32> = if dim == 2 {
        use hdg_mesh::generate::{TAG_BOTTOM, TAG_LEFT, TAG_RIGHT, TAG_TOP};
        vec![TAG_LEFT, TAG_RIGHT, TAG_BOTTOM, TAG_TOP]
    } else {
        use hdg_mesh::generate::{TAG_X0, TAG_X1, TAG_Y0, TAG_Y1, TAG_Z0, TAG_Z1};
        vec![TAG_X0, TAG_X1, TAG_Y0, TAG_Y1, TAG_Z0, TAG_Z1]
    };
    for tag in tags {
        p = p.with_boundary(
            tag,
            hdg_core::BoundaryCondition::Neumann { data: Arc::new(|_, _| 0.0) },
        );
    }
    p.mean_zero = true;
    p
}
