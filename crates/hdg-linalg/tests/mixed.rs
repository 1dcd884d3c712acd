//! Mixed-precision iterative refinement: f64 accuracy from f32 inner solves on HDG trace
//! systems, where f32 CG alone stalls.
mod support;

use std::sync::atomic::{AtomicUsize, Ordering};

use hdg_backend_cpu::{CpuBackend, DbfMatrix};
use hdg_core::{
    CoreError, DemoteOperator, Discretization, HostCsr, Real, Result, SolveReport, TraceOperator,
    TraceSolver,
};
use hdg_linalg::{refine, run_cg, CgSettings, Flow, Jacobi, MixedPrecisionRefinement};
use support::{assemble, hdg_inputs, hdg_system};

/// Counts the applications of a wrapped operator (and optionally scales it, to build a wrong
/// inner operator).
struct Counted<'a, O> {
    inner: &'a O,
    scale: f64,
    applications: AtomicUsize,
}

impl<'a, O> Counted<'a, O> {
    fn new(inner: &'a O) -> Self {
        Counted { inner, scale: 1.0, applications: AtomicUsize::new(0) }
    }
    fn count(&self) -> usize {
        self.applications.load(Ordering::SeqCst)
    }
}

impl<T: Real, O: TraceOperator<T, Vector = Vec<T>>> TraceOperator<T> for Counted<'_, O> {
    type Vector = Vec<T>;
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn apply(&self, x: &Vec<T>, y: &mut Vec<T>) -> Result<()> {
        self.applications.fetch_add(1, Ordering::SeqCst);
        self.inner.apply(x, y)?;
        let s = T::from_f64_lossy(self.scale);
        y.iter_mut().for_each(|v| *v *= s);
        Ok(())
    }
    fn diagonal(&self) -> Result<Vec<T>> {
        let s = T::from_f64_lossy(self.scale);
        Ok(self.inner.diagonal()?.into_iter().map(|v| v * s).collect())
    }
    fn block_size(&self) -> usize {
        self.inner.block_size()
    }
    fn diagonal_blocks(&self) -> Result<Vec<T>> {
        let s = T::from_f64_lossy(self.scale);
        Ok(self.inner.diagonal_blocks()?.into_iter().map(|v| v * s).collect())
    }
    fn gershgorin_bounds(&self, scaled: bool) -> Result<(f64, f64)> {
        self.inner.gershgorin_bounds(scaled)
    }
    fn to_host_csr(&self) -> Result<HostCsr> {
        self.inner.to_host_csr()
    }
}

fn settings() -> MixedPrecisionRefinement {
    MixedPrecisionRefinement {
        tolerance: 1e-12,
        max_refinements: 20,
        inner_tolerance: 1e-5,
        inner_max_iterations: 5000,
    }
}

fn true_relative_residual(op: &DbfMatrix<f64>, x: &[f64], b: &[f64]) -> f64 {
    let mut ax = vec![0.0; b.len()];
    op.apply(&x.to_vec(), &mut ax).unwrap();
    let r: f64 = ax.iter().zip(b).map(|(a, b)| (a - b).powi(2)).sum::<f64>().sqrt();
    r / b.iter().map(|v| v * v).sum::<f64>().sqrt()
}

fn refinements(report: &SolveReport) -> usize {
    // One outer residual per refinement, plus the first.
    report.true_residual_checks.len() - 1
}

#[test]
fn refinement_reaches_f64_accuracy_with_f32_inner_solves() {
    for k in 1..=3 {
        let (op, rhs) = hdg_system(8, k);
        let low = DemoteOperator::<CpuBackend>::demote(&op).unwrap();
        let (c64, c32) = (Counted::new(&op), Counted::new(&low));
        let mut x = vec![0.0; rhs.len()];
        let report = refine(&CpuBackend, &c64, &c32, &rhs, &mut x, &settings()).unwrap();
        let steps = refinements(&report);
        let checks: Vec<String> =
            report.true_residual_checks.iter().map(|(i, r)| format!("{i}:{r:.1e}")).collect();
        println!(
            "k = {k}: {steps} refinements, {} inner f32 iterations, f64 applications {}, f32 applications {}, residuals {checks:?}",
            report.iterations,
            c64.count(),
            c32.count()
        );
        assert!(report.converged, "k = {k}: {report:?}");
        assert!(report.relative_residual <= 1e-12);
        let t = true_relative_residual(&op, &x, &rhs);
        assert!(t <= 1e-12, "k = {k}: {t:e}");
        assert!(steps < 10, "k = {k}: {steps} refinements");
        // Every inner iteration ran on the f32 operator: one f32 application per inner
        // iteration plus two per inner solve (initial and final residual of run_cg); the f64
        // operator only formed the outer residuals.
        assert_eq!(c32.count(), report.iterations + 2 * steps);
        assert_eq!(c64.count(), steps + 1);
        assert_eq!(report.operator_applications, c32.count() + c64.count());
        let split = format!("operator applications: f64 {}, f32 {}", c64.count(), c32.count());
        assert!(report.notes.iter().any(|n| n.starts_with(&split)), "{:?}", report.notes);
        assert_eq!(report.residual_history.len(), report.iterations);
        // Each refinement contracts the residual by orders of magnitude.
        for w in report.true_residual_checks.windows(2) {
            assert!(w[1].1 < 1e-2 * w[0].1, "{w:?}");
        }
    }
}

#[test]
fn f32_cg_alone_stalls_far_above_the_refined_accuracy() {
    for k in 1..=3 {
        let (op, rhs) = hdg_system(8, k);
        let low = DemoteOperator::<CpuBackend>::demote(&op).unwrap();
        let rhs32: Vec<f32> = rhs.iter().map(|&v| v as f32).collect();
        let mut x32 = vec![0.0f32; rhs.len()];
        let jacobi = Jacobi::new(&CpuBackend, &low).unwrap();
        let cg = CgSettings { tolerance: 1e-12, max_iterations: 3000, true_residual_every: 0 };
        let report =
            run_cg(&CpuBackend, &low, &jacobi, &rhs32, &mut x32, &cg, &mut |_| Flow::Continue)
                .unwrap();
        let x: Vec<f64> = x32.iter().map(|&v| v as f64).collect();
        let t = true_relative_residual(&op, &x, &rhs);
        println!(
            "k = {k}: f32 PCG after {} iterations: f32 true residual {:.2e}, f64 residual of its x {t:.2e}",
            report.iterations, report.relative_residual
        );
        // The f32 recurrence may well claim 1e-12 (its converged flag is the recurrence's);
        // the true residual, in f32 or of its solution in f64, stays orders of magnitude above.
        assert!(report.relative_residual > 1e-9, "k = {k}: {report:?}");
        assert!(t > 1e-9, "k = {k}: {t:e}");

        let mut y = vec![0.0; rhs.len()];
        let refined = refine(&CpuBackend, &op, &low, &rhs, &mut y, &settings()).unwrap();
        assert!(refined.converged && true_relative_residual(&op, &y, &rhs) <= 1e-12);
        assert!(t > 1e3 * true_relative_residual(&op, &y, &rhs));
    }
}

#[test]
fn refinement_as_the_pipeline_trace_solver() {
    let (mesh, problem) = hdg_inputs(8);
    let disc = Discretization::<f64>::new(&mesh, &problem, 2).unwrap();
    let (op, rhs) = assemble(&disc);
    let solver = settings();
    let mut x = vec![0.0; rhs.len()];
    let report =
        TraceSolver::<f64, CpuBackend>::solve(&solver, &CpuBackend, &disc, &op, &rhs, &mut x)
            .unwrap();
    assert!(report.converged && report.relative_residual <= 1e-12, "{report:?}");
    assert!(true_relative_residual(&op, &x, &rhs) <= 1e-12);
    assert!(report.notes.iter().any(|n| n.contains("demoted to f32")));
    assert!(report.notes.iter().any(|n| n.starts_with("refinements:")));
    assert_eq!(TraceSolver::<f64, CpuBackend>::name(&solver), "mixed");
}

#[test]
fn refinement_failure_modes() {
    let (mesh, problem) = hdg_inputs(6);
    let disc = Discretization::<f64>::new(&mesh, &problem, 1).unwrap();
    let (op, rhs) = assemble(&disc);
    let low = DemoteOperator::<CpuBackend>::demote(&op).unwrap();

    let mut nan = rhs.clone();
    nan[5] = f64::NAN;
    let mut x = vec![0.0; rhs.len()];
    assert!(matches!(
        refine(&CpuBackend, &op, &low, &nan, &mut x, &settings()),
        Err(CoreError::Solver(_))
    ));
    assert!(matches!(
        TraceSolver::<f64, CpuBackend>::solve(&settings(), &CpuBackend, &disc, &op, &nan, &mut x),
        Err(CoreError::Solver(_))
    ));

    // Refinement budget spent: not converged, history kept.
    let capped = MixedPrecisionRefinement { max_refinements: 1, ..settings() };
    let mut x = vec![0.0; rhs.len()];
    let report = refine(&CpuBackend, &op, &low, &rhs, &mut x, &capped).unwrap();
    assert!(!report.converged);
    assert_eq!(refinements(&report), 1);
    assert!(!report.residual_history.is_empty());
    assert_eq!(report.residual_history.len(), report.iterations);
    assert!(report.relative_residual > 1e-12 && report.relative_residual < 1e-3);

    // Inner solves capped too: each one stops early, refinement still makes progress.
    let short =
        MixedPrecisionRefinement { inner_max_iterations: 30, max_refinements: 3, ..settings() };
    let mut x = vec![0.0; rhs.len()];
    let report = refine(&CpuBackend, &op, &low, &rhs, &mut x, &short).unwrap();
    println!("inner solves capped at 30: {:?}", report.true_residual_checks);
    assert!(!report.converged, "{report:?}");
    assert_eq!(report.iterations, 90);
    assert!(report.relative_residual < report.true_residual_checks[0].1);

    // A wrong inner operator (A / 2): every correction overshoots by 2, the residual does not
    // decrease, and the solve stops as stagnated instead of looping.
    let mut half = Counted::new(&low);
    half.scale = 0.5;
    let mut x = vec![0.0; rhs.len()];
    let report = refine(&CpuBackend, &op, &half, &rhs, &mut x, &settings()).unwrap();
    assert!(!report.converged, "{report:?}");
    assert!(refinements(&report) < 5);
    assert!(report.notes.iter().any(|n| n.contains("stagnation")), "{:?}", report.notes);

    // An indefinite inner operator: the inner CG breakdown is a typed error.
    let mut negative = Counted::new(&low);
    negative.scale = -1.0;
    let mut x = vec![0.0; rhs.len()];
    assert!(matches!(
        refine(&CpuBackend, &op, &negative, &rhs, &mut x, &settings()),
        Err(CoreError::Solver(_))
    ));

    let bad = MixedPrecisionRefinement { inner_tolerance: 2.0, ..settings() };
    assert!(matches!(
        refine(&CpuBackend, &op, &low, &rhs, &mut x, &bad),
        Err(CoreError::InvalidParameter { .. })
    ));
}
