//! Pipelined CG (Ghysels & Vanroose): same answers as CG and the direct solve on HDG trace
//! systems, with one global reduction phase per iteration.
mod support;

use hdg_backend_cpu::CpuBackend;
use hdg_core::{CoreError, KrylovSolver, Preconditioner, Result, SolveReport, TraceOperator};
use hdg_linalg::{run_cg, CgSettings, DirectCholesky, Flow, Identity, Jacobi, PipelinedCg};
use support::{hdg_system, scaled_laplacian};

type Op<'a> = &'a dyn TraceOperator<f64, Vector = Vec<f64>>;

fn solve<P: Preconditioner<f64, CpuBackend>>(
    op: Op<'_>,
    b: &[f64],
    solver: &PipelinedCg<P>,
) -> Result<(Vec<f64>, SolveReport)> {
    let mut x = vec![0.0; op.dim()];
    let report =
        KrylovSolver::<f64, CpuBackend>::solve(solver, &CpuBackend, op, &b.to_vec(), &mut x)?;
    Ok((x, report))
}

fn direct(op: Op<'_>, b: &[f64]) -> Vec<f64> {
    let mut x = vec![0.0; op.dim()];
    DirectCholesky::solve(&CpuBackend, op, &b.to_vec(), &mut x).unwrap();
    x
}

fn relative_difference(x: &[f64], reference: &[f64]) -> f64 {
    let d: f64 = x.iter().zip(reference).map(|(a, b)| (a - b).powi(2)).sum::<f64>().sqrt();
    d / reference.iter().map(|v| v * v).sum::<f64>().sqrt()
}

#[test]
fn pipelined_cg_matches_the_direct_solve_on_hdg_systems() {
    for k in 1..=4 {
        let (op, rhs) = hdg_system(8, k);
        let reference = direct(&op, &rhs);
        let jacobi = Jacobi::new(&CpuBackend, &op).unwrap();
        for (name, (x, report)) in [
            ("jacobi", solve(&op, &rhs, &PipelinedCg::new(1e-11, 5000, jacobi)).unwrap()),
            ("none", solve(&op, &rhs, &PipelinedCg::new(1e-11, 5000, Identity)).unwrap()),
        ] {
            let err = relative_difference(&x, &reference);
            println!(
                "k = {k} ({name}): {} iterations, true residual {:.2e}, error vs direct {err:.2e}, {:?}",
                report.iterations,
                report.relative_residual,
                report.notes
            );
            assert!(report.converged, "k = {k} {name}: {report:?}");
            assert!(
                report.relative_residual <= 1e-10,
                "k = {k} {name}: {}",
                report.relative_residual
            );
            assert!(err <= 1e-8, "k = {k} {name}: {err:e}");
            assert_eq!(report.residual_history.len(), report.iterations);
            // Where the residual gap opened (the recurrence met 1e-11, the true residual did
            // not), the restart from the current iterate must have closed it.
            if report.notes.iter().any(|n| n.starts_with("restart")) {
                assert!(report.relative_residual <= 1e-11, "k = {k} {name}: {report:?}");
            }
        }
    }
}

/// Pipelined CG is CG reorganised: in exact arithmetic it takes the same iterates, so the
/// iteration counts agree closely; and it needs one reduction phase per iteration where CG
/// needs two.
#[test]
fn pipelined_cg_takes_one_reduction_phase_per_iteration() {
    for k in [1, 3] {
        let (op, rhs) = hdg_system(8, k);
        let jacobi = Jacobi::new(&CpuBackend, &op).unwrap();
        let settings =
            CgSettings { tolerance: 1e-10, max_iterations: 5000, true_residual_every: 0 };
        let mut x = vec![0.0; rhs.len()];
        let cg =
            run_cg(&CpuBackend, &op, &jacobi, &rhs, &mut x, &settings, &mut |_| Flow::Continue)
                .unwrap();
        let mut pipelined = PipelinedCg::new(1e-10, 5000, jacobi);
        pipelined.true_residual_every = 0;
        let (_, pipe) = solve(&op, &rhs, &pipelined).unwrap();
        println!(
            "k = {k}: CG {} iterations / {} reductions ({:.2}/it), {} applications; pipelined {} iterations / {} reductions ({:.2}/it), {} applications",
            cg.iterations,
            cg.reductions,
            cg.reductions as f64 / cg.iterations as f64,
            cg.operator_applications,
            pipe.iterations,
            pipe.reductions,
            pipe.reductions as f64 / pipe.iterations as f64,
            pipe.operator_applications
        );
        assert!(cg.converged && pipe.converged);
        assert!(pipe.notes.is_empty(), "no restart expected at 1e-10: {:?}", pipe.notes);
        let (ci, pi) = (cg.iterations as f64, pipe.iterations as f64);
        assert!((ci - pi).abs() <= 0.05 * ci + 2.0, "CG {ci} vs pipelined {pi}");
        // ||b||, the last (converged) fused phase, the final true residual.
        assert_eq!(pipe.reductions, pipe.iterations + 3);
        // r, w = A u, one per iteration, the final true residual.
        assert_eq!(pipe.operator_applications, pipe.iterations + 3);
        assert!(cg.reductions >= 2 * cg.iterations, "{} vs {}", cg.reductions, cg.iterations);
    }
}

#[test]
fn pipelined_cg_periodic_true_residual_checks_are_recorded() {
    let (op, rhs) = hdg_system(6, 2);
    let mut solver = PipelinedCg::new(1e-10, 5000, Jacobi::new(&CpuBackend, &op).unwrap());
    solver.true_residual_every = 10;
    let (_, report) = solve(&op, &rhs, &solver).unwrap();
    assert!(report.converged);
    assert_eq!(report.true_residual_checks.len(), report.iterations / 10);
    for &(it, t) in &report.true_residual_checks {
        // The recurrence tracks the true residual closely at this accuracy.
        let rec = report.residual_history[it - 1];
        assert!((t - rec).abs() <= 1e-3 * rec + 1e-12, "iteration {it}: {t:e} vs {rec:e}");
    }
}

#[test]
fn pipelined_cg_failure_modes() {
    let n = 30;
    let op = scaled_laplacian(n, |_| 1.0);
    let b = vec![1.0; n];
    let mut nan = b.clone();
    nan[7] = f64::NAN;
    assert!(matches!(
        solve(&op, &nan, &PipelinedCg::new(1e-10, 100, Identity)),
        Err(CoreError::Solver(_))
    ));

    let mut indefinite = scaled_laplacian(n, |_| 1.0);
    indefinite.a[0] = -5.0;
    assert!(matches!(
        solve(&indefinite, &b, &PipelinedCg::new(1e-10, 100, Identity)),
        Err(CoreError::Solver(_))
    ));

    let (_, capped) = solve(&op, &b, &PipelinedCg::new(1e-14, 3, Identity)).unwrap();
    assert!(!capped.converged);
    assert_eq!(capped.iterations, 3);
    assert_eq!(capped.residual_history.len(), 3);
    assert!(capped.residual_history.iter().all(|r| r.is_finite() && *r > 1e-14));
    assert!(capped.relative_residual > 1e-14);

    let (x, zero) = solve(&op, &vec![0.0; n], &PipelinedCg::new(1e-10, 100, Identity)).unwrap();
    assert!(zero.converged && x.iter().all(|&v| v == 0.0));

    assert!(matches!(
        solve(&op, &b, &PipelinedCg::new(0.0, 100, Identity)),
        Err(CoreError::InvalidParameter { .. })
    ));
}
