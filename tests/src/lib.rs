//! Shared helpers of the integration tests: run the whole pipeline on a mesh and hand back
//! everything a test wants to look at.
use hdg_backend_cpu::CpuBackend;
use hdg_core::{
    solve, Discretization, Krylov, PipelineOptions, PipelineOutput, Problem, Real, Silent,
};
use hdg_linalg::{ConjugateGradient, Preconditioning};
use hdg_mesh::Mesh;

/// Default tolerance of the trace solve in a precision: far below discretisation errors.
pub fn tolerance<T: Real>() -> f64 {
    if T::NAME == "f64" {
        1e-12
    } else {
        1e-6
    }
}

/// Runs the CPU pipeline, keeping the operator.
pub fn run_cpu<T: Real>(
    mesh: &Mesh,
    problem: &Problem,
    order: usize,
) -> PipelineOutput<T, CpuBackend> {
    let cg = ConjugateGradient::new(tolerance::<T>(), 100_000, Preconditioning::Jacobi);
    let options = PipelineOptions { keep_operator: true };
    let out = solve::<T, CpuBackend>(
        &CpuBackend,
        mesh,
        problem,
        order,
        &Krylov(&cg),
        options,
        &mut Silent,
    )
    .expect("pipeline runs");
    assert!(out.report.solve.converged, "trace solve did not converge: {:?}", out.report.solve);
    out
}

/// The discretization of a run (rebuilt on the host, for diagnostics).
pub fn discretization<'a, T: Real>(
    mesh: &'a Mesh,
    problem: &'a Problem,
    order: usize,
) -> Discretization<'a, T> {
    Discretization::new(mesh, problem, order).expect("valid discretization")
}

/// Runs the CPU pipeline with the sparse direct trace solve (faster than CG on the small 3D
/// meshes of the tests, and free of an iteration tolerance).
pub fn run_cpu_direct<T: Real>(
    mesh: &Mesh,
    problem: &Problem,
    order: usize,
) -> PipelineOutput<T, CpuBackend> {
    let options = PipelineOptions { keep_operator: false };
    solve::<T, CpuBackend>(
        &CpuBackend,
        mesh,
        problem,
        order,
        &hdg_linalg::DirectCholesky,
        options,
        &mut Silent,
    )
    .expect("pipeline runs")
}
