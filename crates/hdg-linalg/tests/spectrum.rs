//! Spectrum estimates (tridiagonal eigenvalues, Lanczos from CG, Gershgorin, power iteration)
//! against dense eigenvalues of HDG trace matrices.
use hdg_backend_cpu::CpuBackend;
use hdg_core::{CoreError, TraceOperator};
use hdg_linalg::{
    gershgorin_estimate, lanczos_estimate, lanczos_from_cg, power_iteration, run_cg,
    symmetric_tridiagonal_eigenvalues, CgSettings, CgStep, Flow, Identity, Jacobi,
};

mod support;

use support::{dense_eigenvalues, hdg_system, scaled_laplacian, Dense};

type Op = dyn TraceOperator<f64, Vector = Vec<f64>>;
type Precond = dyn hdg_core::Preconditioner<f64, CpuBackend>;

/// Eigenvalues of D^-1/2 A D^-1/2 (= those of D^-1 A), ascending.
fn jacobi_eigenvalues(op: &Op) -> Vec<f64> {
    let csr = op.to_host_csr().unwrap();
    let n = csr.n;
    let d = op.diagonal().unwrap();
    let mut a = vec![0.0; n * n];
    for i in 0..n {
        for p in csr.indptr[i]..csr.indptr[i + 1] {
            let j = csr.indices[p];
            a[i * n + j] = csr.values[p] / (d[i] * d[j]).sqrt();
        }
    }
    dense_eigenvalues(&Dense { n, a })
}

#[test]
fn tridiagonal_eigenvalues_are_exact() {
    // The 1D Laplacian tridiag(-1, 2, -1): 2 - 2 cos(j pi / (n + 1)).
    for n in [1, 2, 5, 40] {
        let ev = symmetric_tridiagonal_eigenvalues(&vec![2.0; n], &vec![-1.0; n.saturating_sub(1)]);
        assert_eq!(ev.len(), n);
        for (j, &l) in ev.iter().enumerate() {
            let exact = 2.0 - 2.0 * ((j + 1) as f64 * std::f64::consts::PI / (n + 1) as f64).cos();
            assert!((l - exact).abs() <= 1e-13, "n={n} j={j}: {l} vs {exact}");
        }
    }
    // An irregular one against the dense solver (clustered and negative eigenvalues included).
    let n = 30;
    let diagonal: Vec<f64> = (0..n).map(|i| ((i * i) as f64 * 0.37).sin() * 5.0).collect();
    let off: Vec<f64> =
        (0..n - 1).map(|i| if i % 9 == 4 { 1e-9 } else { 0.3 + (i as f64).cos() }).collect();
    let mut a = vec![0.0; n * n];
    for i in 0..n {
        a[i * n + i] = diagonal[i];
        if i + 1 < n {
            a[i * n + i + 1] = off[i];
            a[(i + 1) * n + i] = off[i];
        }
    }
    let dense = dense_eigenvalues(&Dense { n, a });
    let ev = symmetric_tridiagonal_eigenvalues(&diagonal, &off);
    for (l, e) in ev.iter().zip(&dense) {
        assert!((l - e).abs() <= 1e-12 * 10.0, "{l} vs {e}");
    }
    assert!(symmetric_tridiagonal_eigenvalues(&[], &[]).is_empty());
    assert!(symmetric_tridiagonal_eigenvalues(&[1.0, f64::NAN], &[0.5])[0].is_nan());
}

#[test]
fn lanczos_from_a_complete_cg_run_gives_the_exact_extremes() {
    // CG on a 12 x 12 matrix with 12 distinct eigenvalues: 12 steps span the whole space.
    let n = 12;
    let op = scaled_laplacian(n, |i| 1.0 + 0.1 * i as f64);
    let ev = dense_eigenvalues(&op);
    let b: Vec<f64> = (0..n).map(|i| 1.0 + (i as f64 * 0.7).sin()).collect();
    let mut steps: Vec<CgStep> = Vec::new();
    let mut x = vec![0.0; n];
    let settings = CgSettings { tolerance: 1e-14, max_iterations: n, true_residual_every: 0 };
    run_cg(&CpuBackend, &op, &Identity, &b, &mut x, &settings, &mut |s| {
        steps.push(*s);
        Flow::Continue
    })
    .unwrap();
    let (lmin, lmax) = lanczos_from_cg(&steps);
    assert!((lmin / ev[0] - 1.0).abs() < 1e-8, "{lmin} vs {}", ev[0]);
    assert!((lmax / ev[n - 1] - 1.0).abs() < 1e-10, "{lmax} vs {}", ev[n - 1]);
    // Fewer steps: Ritz values inside the spectrum.
    let (lo, hi) = lanczos_from_cg(&steps[..4]);
    assert!(lo >= ev[0] && hi <= ev[n - 1] && lo < hi);
    assert!(lanczos_from_cg(&[]).0.is_nan());
}

#[test]
fn lanczos_within_5_percent_after_30_cg_steps() {
    // 8 x 8 meshes (352 to 880 unknowns), the problem's own right-hand side.
    for k in 1..=4 {
        let (a, b) = hdg_system(8, k);
        let op: &Op = &a;
        let jacobi = Jacobi::new(&CpuBackend, op).unwrap();
        let cases = [
            (
                "none",
                dense_eigenvalues(op),
                lanczos_estimate(&CpuBackend, op, &Identity, &b, 30).unwrap(),
            ),
            (
                "jacobi",
                jacobi_eigenvalues(op),
                lanczos_estimate(&CpuBackend, op, &jacobi, &b, 30).unwrap(),
            ),
        ];
        for (name, ev, estimate) in cases {
            let (lmin, lmax) = (ev[0], ev[ev.len() - 1]);
            let (emin, emax) = (estimate.lambda_min / lmin - 1.0, estimate.lambda_max / lmax - 1.0);
            println!(
                "k={k} dim={} {name:6} lambda_min {lmin:.5e} error {emin:+.2e}, lambda_max {lmax:.5e} error {emax:+.2e} ({} applications, {} reductions)",
                a.dim(),
                estimate.operator_applications,
                estimate.reductions
            );
            assert!(emin.abs() < 0.05 && emax.abs() < 0.05, "k={k} {name}: {emin} {emax}");
            // Ritz values lie inside the spectrum.
            assert!(emin >= -1e-10 && emax <= 1e-10, "k={k} {name}: {emin} {emax}");
            // The cost is the CG run's: a true residual at each end plus one application a step.
            assert_eq!(estimate.operator_applications, 32);
            // and the reductions run_cg counts: ||b||, the initial residual, r.z, 3 a step, the end.
            assert_eq!(estimate.reductions, 4 + 3 * 30);
            assert!(estimate.method.contains("lanczos"));
        }
    }
    let (a, b) = hdg_system(3, 1);
    let r = lanczos_estimate(&CpuBackend, &a as &Op, &Identity, &b, 1);
    assert!(matches!(r, Err(CoreError::InvalidParameter { .. })));
}

#[test]
fn gershgorin_bounds_contain_the_spectrum() {
    for (n, k) in [(3, 1), (4, 2), (4, 3), (5, 4)] {
        let (a, _) = hdg_system(n, k);
        let op: &Op = &a;
        for (scaled, ev) in [(false, dense_eigenvalues(op)), (true, jacobi_eigenvalues(op))] {
            let g = gershgorin_estimate(op, scaled).unwrap();
            let (lmin, lmax) = (ev[0], ev[ev.len() - 1]);
            println!(
                "n={n} k={k} scaled={scaled}: [{:.4e}, {:.4e}] contains [{lmin:.4e}, {lmax:.4e}] (upper/true {:.3})",
                g.lambda_min,
                g.lambda_max,
                g.lambda_max / lmax
            );
            assert!(g.lambda_min <= lmin * (1.0 + 1e-12) && g.lambda_max >= lmax * (1.0 - 1e-12));
            assert_eq!((g.operator_applications, g.reductions), (0, 0));
            assert!(g.method.contains("0 operator applications"));
        }
    }
}

#[test]
fn power_iteration_within_1_percent_of_lambda_max() {
    for k in 1..=4 {
        let (a, _) = hdg_system(6, k);
        let op: &Op = &a;
        let jacobi = Jacobi::new(&CpuBackend, op).unwrap();
        let cases: [(&str, f64, &Precond); 2] = [
            ("none", *dense_eigenvalues(op).last().unwrap(), &Identity),
            ("jacobi", *jacobi_eigenvalues(op).last().unwrap(), &jacobi),
        ];
        for (name, lmax, m) in cases {
            let estimate = power_iteration(&CpuBackend, op, m, 500, 1e-9).unwrap();
            let error = estimate.lambda_max / lmax - 1.0;
            println!(
                "k={k} {name:6} power iteration error {error:+.2e} ({} applications)",
                estimate.operator_applications
            );
            assert!(error.abs() < 0.01, "k={k} {name}: {error}");
            // A Rayleigh quotient: never above lambda_max.
            assert!(error <= 1e-12);
            assert!(estimate.lambda_min.is_nan() && estimate.method.contains("not estimated"));
            assert_eq!(estimate.operator_applications, estimate.reductions);
        }
    }
    let (a, _) = hdg_system(3, 1);
    assert!(power_iteration(&CpuBackend, &a as &Op, &Identity, 0, 1e-6).is_err());
}
