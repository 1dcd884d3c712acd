//! CG against small dense systems through a minimal host backend.
use hdg_core::{CoreError, KrylovSolver, Result, TraceOperator};
use hdg_linalg::{ConjugateGradient, Preconditioning};

mod support;

use hdg_backend_cpu::CpuBackend;
use support::{scaled_laplacian, Dense};

fn solve(
    op: &Dense,
    b: &[f64],
    cg: &ConjugateGradient,
) -> Result<(Vec<f64>, hdg_core::SolveReport)> {
    let mut x = vec![0.0; op.n];
    let report = KrylovSolver::<f64, CpuBackend>::solve(cg, &CpuBackend, op, &b.to_vec(), &mut x)?;
    Ok((x, report))
}

#[test]
fn cg_solves_the_laplacian_to_the_tolerance() {
    let n = 60;
    let op = scaled_laplacian(n, |_| 1.0);
    let exact: Vec<f64> = (0..n).map(|i| (i as f64 * 0.3).sin()).collect();
    let mut b = vec![0.0; n];
    op.apply(&exact, &mut b).unwrap();
    let (x, report) =
        solve(&op, &b, &ConjugateGradient::new(1e-12, 1000, Preconditioning::None)).unwrap();
    assert!(report.converged);
    assert!(report.relative_residual < 1e-11);
    // CG on an n x n SPD matrix terminates in at most n steps in exact arithmetic.
    assert!(report.iterations <= n + 5, "{}", report.iterations);
    let err = x.iter().zip(&exact).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    assert!(err < 1e-8, "{err}");
    assert_eq!(report.residual_history.len(), report.iterations);
    assert_eq!(report.operator_applications, report.iterations + 2);
}

#[test]
fn jacobi_removes_diagonal_scaling() {
    let n = 60;
    let op = scaled_laplacian(n, |i| 10f64.powi((i % 7) as i32 - 3));
    let b: Vec<f64> = (0..n).map(|i| 1.0 + (i as f64).cos()).collect();
    let plain =
        solve(&op, &b, &ConjugateGradient::new(1e-10, 10_000, Preconditioning::None)).unwrap().1;
    let jacobi =
        solve(&op, &b, &ConjugateGradient::new(1e-10, 10_000, Preconditioning::Jacobi)).unwrap().1;
    assert!(jacobi.converged);
    // With Jacobi, the scaled matrix is the plain Laplacian again: at most n iterations.
    assert!(jacobi.iterations <= n + 5, "{}", jacobi.iterations);
    assert!(jacobi.iterations < plain.iterations, "{} vs {}", jacobi.iterations, plain.iterations);
}

#[test]
fn failures_are_reported() {
    let n = 10;
    let mut indefinite = scaled_laplacian(n, |_| 1.0);
    indefinite.a[0] = -5.0;
    let b = vec![1.0; n];
    let cg = ConjugateGradient::new(1e-10, 100, Preconditioning::None);
    assert!(matches!(solve(&indefinite, &b, &cg), Err(CoreError::Solver(_))));

    let op = scaled_laplacian(n, |_| 1.0);
    let mut nan = b.clone();
    nan[3] = f64::NAN;
    assert!(matches!(solve(&op, &nan, &cg), Err(CoreError::Solver(_))));

    let capped = ConjugateGradient::new(1e-14, 2, Preconditioning::None);
    let (_, report) = solve(&scaled_laplacian(50, |_| 1.0), &vec![1.0; 50], &capped).unwrap();
    assert!(!report.converged);
    assert_eq!(report.iterations, 2);

    let (x, report) = solve(&op, &vec![0.0; n], &cg).unwrap();
    assert!(report.converged && x.iter().all(|&v| v == 0.0));

    let bad_tol = ConjugateGradient::new(1.5, 10, Preconditioning::None);
    assert!(matches!(solve(&op, &b, &bad_tol), Err(CoreError::InvalidParameter { .. })));
}
