//! Sparse Cholesky (faer) as a solver: accuracy on HDG trace systems and dense SPD matrices,
//! and typed errors on matrices that are not SPD.
mod support;

use faer::prelude::Solve;
use hdg_backend_cpu::CpuBackend;
use hdg_core::{CoreError, DemoteOperator, Result, SolveReport, TraceOperator};
use hdg_linalg::DirectCholesky;
use support::{hdg_system, scaled_laplacian, Dense};

fn solve(
    op: &dyn TraceOperator<f64, Vector = Vec<f64>>,
    b: &[f64],
) -> Result<(Vec<f64>, SolveReport)> {
    let mut x = vec![1.0; op.dim()]; // a nonzero guess: the direct solver must ignore it
    let report = DirectCholesky::solve(&CpuBackend, op, &b.to_vec(), &mut x)?;
    Ok((x, report))
}

#[test]
fn direct_solves_hdg_systems_to_rounding() {
    for k in 1..=4 {
        let (op, rhs) = hdg_system(8, k);
        let (x, report) = solve(&op, &rhs).unwrap();
        println!(
            "k = {k}: n = {}, residual {:.2e}, {:?}",
            op.dim(),
            report.relative_residual,
            report.notes
        );
        assert!(report.converged);
        assert_eq!(report.iterations, 0);
        assert_eq!(report.operator_applications, 1);
        assert!(report.relative_residual < 1e-12, "k = {k}: {}", report.relative_residual);
        // The residual is recomputed with the operator, not taken from the factorisation.
        let mut ax = vec![0.0; rhs.len()];
        op.apply(&x, &mut ax).unwrap();
        let r: f64 = ax.iter().zip(&rhs).map(|(a, b)| (a - b).powi(2)).sum::<f64>().sqrt();
        let b: f64 = rhs.iter().map(|v| v * v).sum::<f64>().sqrt();
        assert!(
            (r / b - report.relative_residual).abs() <= 1e-3 * report.relative_residual + 1e-300
        );
        assert!(report.notes.iter().any(|n| n.contains("AMD") && n.contains("factor")));
    }
}

#[test]
fn direct_matches_faer_dense_solve() {
    // A dense SPD matrix: B^T B + n I with a deterministic pseudo-random B.
    let n = 40;
    let bm: Vec<f64> = (0..n * n).map(|i| ((i * 7919 % 1013) as f64 / 1013.0) - 0.5).collect();
    let mut a = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            a[i * n + j] = (0..n).map(|l| bm[l * n + i] * bm[l * n + j]).sum::<f64>()
                + if i == j { n as f64 * 0.1 } else { 0.0 };
        }
    }
    let op = Dense { n, a: a.clone() };
    let rhs: Vec<f64> = (0..n).map(|i| (i as f64).sin() + 0.5).collect();
    let (x, report) = solve(&op, &rhs).unwrap();
    let dense = faer::Mat::<f64>::from_fn(n, n, |i, j| a[i * n + j]);
    let b = faer::Mat::<f64>::from_fn(n, 1, |i, _| rhs[i]);
    let reference = dense.partial_piv_lu().solve(&b);
    let err = (0..n).map(|i| (x[i] - reference[(i, 0)]).powi(2)).sum::<f64>().sqrt();
    let norm = (0..n).map(|i| reference[(i, 0)].powi(2)).sum::<f64>().sqrt();
    assert!(err <= 1e-12 * norm, "{err:e} vs {norm:e}");
    assert!(report.relative_residual < 1e-13);
}

#[test]
fn direct_runs_in_f32_with_an_f64_factorisation() {
    let (op, rhs) = hdg_system(6, 2);
    let op32 = DemoteOperator::<CpuBackend>::demote(&op).unwrap();
    let rhs32: Vec<f32> = rhs.iter().map(|&v| v as f32).collect();
    let mut x = vec![0.0f32; rhs.len()];
    let report = DirectCholesky::solve(&CpuBackend, &op32, &rhs32, &mut x).unwrap();
    // The f32 operator's own residual of the rounded solution: f32 accuracy, no worse.
    assert!(report.converged);
    assert!(report.relative_residual < 1e-4, "{}", report.relative_residual);
}

#[test]
fn direct_rejects_matrices_that_are_not_spd() {
    let n = 10;
    // Symmetric indefinite.
    let mut indefinite = scaled_laplacian(n, |_| 1.0);
    indefinite.a[0] = -5.0;
    match solve(&indefinite, &vec![1.0; n]) {
        Err(CoreError::Solver(msg)) => assert!(msg.contains("not positive definite"), "{msg}"),
        other => panic!("expected a solver error, got {other:?}"),
    }
    // Nonsymmetric (positive diagonal, would factor if only one triangle were read).
    let mut nonsymmetric = scaled_laplacian(n, |_| 1.0);
    nonsymmetric.a[1] = -0.5;
    match solve(&nonsymmetric, &vec![1.0; n]) {
        Err(CoreError::Solver(msg)) => assert!(msg.contains("not symmetric"), "{msg}"),
        other => panic!("expected a solver error, got {other:?}"),
    }
}

#[test]
fn direct_failure_modes() {
    let op = scaled_laplacian(10, |_| 1.0);
    let mut nan = vec![1.0; 10];
    nan[4] = f64::NAN;
    assert!(matches!(solve(&op, &nan), Err(CoreError::Solver(_))));
    let (x, report) = solve(&op, &[0.0; 10]).unwrap();
    assert!(report.converged && x.iter().all(|&v| v == 0.0));
    let mut bad = scaled_laplacian(10, |_| 1.0);
    bad.a[22] = f64::INFINITY;
    assert!(matches!(solve(&bad, &[1.0; 10]), Err(CoreError::Solver(_))));
}
