//! Restarted GMRES with right preconditioning: HDG trace systems (against the direct solve),
//! a nonsymmetric matrix CG cannot handle, stagnation and failure modes.
mod support;

use hdg_backend_cpu::CpuBackend;
use hdg_core::{CoreError, KrylovSolver, Preconditioner, Result, SolveReport, TraceOperator};
use hdg_linalg::{ConjugateGradient, DirectCholesky, Gmres, Identity, Jacobi, Preconditioning};
use support::{hdg_system, scaled_laplacian, Dense};

type Op<'a> = &'a dyn TraceOperator<f64, Vector = Vec<f64>>;

// Dense nonsymmetric test matrices, as `support::Dense` (which assumes no symmetry).

/// 1D convection-diffusion, central differences: tridiag(-1 - c, 2, -1 + c). For c > 1 the
/// matrix is far from symmetric (cell Peclet number > 1) and its eigenvalues are complex.
fn convection_diffusion(n: usize, c: f64) -> Dense {
    let mut a = vec![0.0; n * n];
    for i in 0..n {
        a[i * n + i] = 2.0;
        if i > 0 {
            a[i * n + i - 1] = -1.0 - c;
        }
        if i + 1 < n {
            a[i * n + i + 1] = -1.0 + c;
        }
    }
    Dense { n, a }
}

/// The cyclic shift e_i -> e_{i+1 mod n}: GMRES(m) with m < n makes no progress at all from
/// b = e_0 (A K_m is orthogonal to b), the textbook stagnation case.
fn cyclic_shift(n: usize) -> Dense {
    let mut a = vec![0.0; n * n];
    for i in 0..n {
        a[((i + 1) % n) * n + i] = 1.0;
    }
    Dense { n, a }
}

fn solve<P: Preconditioner<f64, CpuBackend>>(
    op: Op<'_>,
    b: &[f64],
    solver: &Gmres<P>,
) -> Result<(Vec<f64>, SolveReport)> {
    let mut x = vec![0.0; op.dim()];
    let report =
        KrylovSolver::<f64, CpuBackend>::solve(solver, &CpuBackend, op, &b.to_vec(), &mut x)?;
    Ok((x, report))
}

fn residual(op: Op<'_>, x: &[f64], b: &[f64]) -> f64 {
    let mut ax = vec![0.0; op.dim()];
    op.apply(&x.to_vec(), &mut ax).unwrap();
    let r: f64 = ax.iter().zip(b).map(|(a, b)| (a - b).powi(2)).sum::<f64>().sqrt();
    r / b.iter().map(|v| v * v).sum::<f64>().sqrt()
}

fn relative_difference(x: &[f64], reference: &[f64]) -> f64 {
    let d: f64 = x.iter().zip(reference).map(|(a, b)| (a - b).powi(2)).sum::<f64>().sqrt();
    d / reference.iter().map(|v| v * v).sum::<f64>().sqrt()
}

#[test]
fn gmres_matches_the_direct_solve_on_hdg_systems() {
    for k in 1..=4 {
        let (op, rhs) = hdg_system(8, k);
        let mut reference = vec![0.0; rhs.len()];
        DirectCholesky::solve(&CpuBackend, &op, &rhs, &mut reference).unwrap();
        let jacobi = Jacobi::new(&CpuBackend, &op).unwrap();
        for (name, (x, report)) in [
            ("none", solve(&op, &rhs, &Gmres::new(30, 1e-11, 20_000, Identity)).unwrap()),
            ("jacobi", solve(&op, &rhs, &Gmres::new(30, 1e-11, 20_000, jacobi)).unwrap()),
        ] {
            let err = relative_difference(&x, &reference);
            println!(
                "k = {k} ({name}): {} iterations, {} cycles, true residual {:.2e}, error vs direct {err:.2e}, {:.2} reductions/it",
                report.iterations,
                report.true_residual_checks.len() - 1,
                report.relative_residual,
                report.reductions as f64 / report.iterations as f64
            );
            assert!(report.converged, "k = {k} {name}: {report:?}");
            assert!(report.relative_residual <= 1e-10);
            // The reported residual is the true one.
            let t = residual(&op, &x, &rhs);
            assert!((t - report.relative_residual).abs() <= 1e-2 * t, "{t:e}");
            assert!(err <= 1e-8, "k = {k} {name}: {err:e}");
            assert_eq!(report.residual_history.len(), report.iterations);
            // A true-residual check opens every cycle (and is the final residual).
            let cycles = report.true_residual_checks.len() - 1;
            assert!(report.iterations <= 30 * cycles && report.iterations > 30 * (cycles - 1));
            // GMRES minimises the residual: the estimate never increases.
            for w in report.residual_history.windows(2) {
                assert!(w[1] <= w[0] * (1.0 + 1e-10), "{w:?}");
            }
        }
    }
}

/// Right preconditioning leaves the minimised residual the true one, and a good
/// preconditioner shortens the solve.
#[test]
fn jacobi_right_preconditioning_removes_column_scaling() {
    let n = 80;
    // Columns scaled: A = T S, so the right-preconditioned A D^-1 = T / 2 exactly.
    let mut op = convection_diffusion(n, 0.5);
    for j in 0..n {
        let s = 10f64.powi((j % 5) as i32 - 2);
        for i in 0..n {
            op.a[i * n + j] *= s;
        }
    }
    let b: Vec<f64> = (0..n).map(|i| 1.0 + (i as f64 * 0.7).sin()).collect();
    let plain = solve(&op, &b, &Gmres::new(20, 1e-10, 5000, Identity)).unwrap().1;
    let jacobi = Jacobi::new(&CpuBackend, &op).unwrap();
    let (x, pre) = solve(&op, &b, &Gmres::new(20, 1e-10, 5000, jacobi)).unwrap();
    println!(
        "scaled convection-diffusion: GMRES(20) {} iterations, with Jacobi {}",
        plain.iterations, pre.iterations
    );
    assert!(pre.converged, "{pre:?}");
    assert!(residual(&op, &x, &b) <= 1e-10);
    assert!(pre.iterations < plain.iterations, "{} vs {}", pre.iterations, plain.iterations);
}

#[test]
fn gmres_solves_a_nonsymmetric_system_where_cg_fails() {
    let n = 60;
    let op = convection_diffusion(n, 1.5);
    let exact: Vec<f64> = (0..n).map(|i| (i as f64 * 0.2).cos()).collect();
    let mut b = vec![0.0; n];
    op.apply(&exact, &mut b).unwrap();
    let (x, report) = solve(&op, &b, &Gmres::new(30, 1e-12, 2000, Identity)).unwrap();
    println!("convection-diffusion: GMRES(30) {} iterations", report.iterations);
    assert!(report.converged, "{report:?}");
    assert!(residual(&op, &x, &b) <= 1e-12);
    assert!(relative_difference(&x, &exact) <= 1e-9);
    // CG assumes symmetry: on this matrix it does not get anywhere near the tolerance in
    // 4n iterations (or breaks down).
    let cg = ConjugateGradient::new(1e-12, 4 * n, Preconditioning::None);
    let mut y = vec![0.0; n];
    match KrylovSolver::<f64, CpuBackend>::solve(&cg, &CpuBackend, &op, &b, &mut y) {
        Ok(r) => {
            println!(
                "CG on it: converged {}, true residual {:.2e}",
                r.converged, r.relative_residual
            );
            assert!(!r.converged || r.relative_residual > 1e-6, "{r:?}");
        }
        Err(e) => println!("CG on it: {e}"),
    }
}

#[test]
fn gmres_detects_stagnation() {
    // No progress at all with m < n: stops after two unproductive cycles.
    let n = 20;
    let op = cyclic_shift(n);
    let mut b = vec![0.0; n];
    b[0] = 1.0;
    let (_, report) = solve(&op, &b, &Gmres::new(5, 1e-10, 100_000, Identity)).unwrap();
    assert!(!report.converged);
    assert_eq!(report.iterations, 10, "{report:?}");
    assert!((report.relative_residual - 1.0).abs() < 1e-12);
    assert!(report.notes.iter().any(|n| n.contains("stagnation")), "{:?}", report.notes);
    // With m = n the same system is solved (the Krylov space reaches e_0).
    let (x, full) = solve(&op, &b, &Gmres::new(n, 1e-10, 1000, Identity)).unwrap();
    assert!(full.converged && residual(&op, &x, &b) < 1e-10, "{full:?}");
}

#[test]
fn gmres_stops_on_a_singular_inconsistent_system() {
    // diag(1..n-1, 0) plus a nonsymmetric coupling among the first rows; b has a component in
    // the last row that no x can match: the least residual is |b_last| / ||b||.
    let n = 12;
    let mut op = convection_diffusion(n, 0.8);
    for j in 0..n {
        op.a[(n - 1) * n + j] = 0.0;
        op.a[j * n + n - 1] = 0.0;
    }
    let b = vec![1.0; n];
    let (_, report) = solve(&op, &b, &Gmres::new(4, 1e-10, 100_000, Identity)).unwrap();
    println!(
        "singular: {} iterations, residual {:.6e}, {:?}",
        report.iterations, report.relative_residual, report.notes
    );
    assert!(!report.converged);
    assert!(report.iterations < 1000, "{}", report.iterations);
    let least = 1.0 / (n as f64).sqrt();
    assert!((report.relative_residual - least).abs() <= 1e-8, "{}", report.relative_residual);
    assert!(!report.notes.is_empty());
}

#[test]
fn gmres_failure_modes() {
    let n = 30;
    let op = scaled_laplacian(n, |_| 1.0);
    let b = vec![1.0; n];
    let mut nan = b.clone();
    nan[3] = f64::NAN;
    assert!(matches!(
        solve(&op, &nan, &Gmres::new(10, 1e-10, 100, Identity)),
        Err(CoreError::Solver(_))
    ));
    // A NaN inside the operator: a typed error, not a silent NaN solution.
    let mut bad = convection_diffusion(n, 0.5);
    bad.a[5 * n + 6] = f64::NAN;
    assert!(matches!(
        solve(&bad, &b, &Gmres::new(10, 1e-10, 100, Identity)),
        Err(CoreError::Solver(_))
    ));

    let (_, capped) = solve(&op, &b, &Gmres::new(4, 1e-14, 7, Identity)).unwrap();
    assert!(!capped.converged);
    assert_eq!(capped.iterations, 7);
    assert_eq!(capped.residual_history.len(), 7);
    assert!(capped.relative_residual > 1e-14 && capped.relative_residual.is_finite());
    // Cycles of 4 and 3 steps: checks at 0, 4 and 7 iterations.
    let at: Vec<usize> = capped.true_residual_checks.iter().map(|c| c.0).collect();
    assert_eq!(at, vec![0, 4, 7]);

    let (x, zero) = solve(&op, &vec![0.0; n], &Gmres::new(10, 1e-10, 100, Identity)).unwrap();
    assert!(zero.converged && x.iter().all(|&v| v == 0.0));
    assert!(matches!(
        solve(&op, &b, &Gmres::new(0, 1e-10, 100, Identity)),
        Err(CoreError::InvalidParameter { .. })
    ));
}
