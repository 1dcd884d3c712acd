//! Chebyshev iteration, the Chebyshev polynomial preconditioner and CG-then-Chebyshev on HDG
//! trace systems, against the theory and against CG.
use hdg_backend_cpu::{CpuBackend, DbfMatrix};
use hdg_core::{CoreError, DemoteOperator, KrylovSolver, SolveReport, TraceOperator};
use hdg_linalg::{
    gershgorin_estimate, lanczos_estimate, run_cg, run_chebyshev, theoretical_iterations,
    BlockJacobi, CgSettings, CgThenChebyshev, Chebyshev, ChebyshevPreconditioner, ChebyshevSolver,
    Flow, Identity, Jacobi, PreconditionedCg,
};

mod support;

use support::{dense_eigenvalues, hdg_system, Dense};

type Op = dyn TraceOperator<f64, Vector = Vec<f64>>;
type Precond = dyn hdg_core::Preconditioner<f64, CpuBackend>;

/// Eigenvalues of D^-1/2 A D^-1/2 (= those of the Jacobi-preconditioned D^-1 A), ascending.
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

fn extremes(ev: &[f64]) -> (f64, f64) {
    (ev[0], ev[ev.len() - 1])
}

fn norm(v: &[f64]) -> f64 {
    v.iter().map(|a| a * a).sum::<f64>().sqrt()
}

fn relative_difference(x: &[f64], y: &[f64]) -> f64 {
    let d: Vec<f64> = x.iter().zip(y).map(|(a, b)| a - b).collect();
    norm(&d) / norm(y)
}

fn true_relative_residual(op: &Op, b: &[f64], x: &[f64]) -> f64 {
    let mut ax = vec![0.0; b.len()];
    op.apply(&x.to_vec(), &mut ax).unwrap();
    let r: Vec<f64> = b.iter().zip(&ax).map(|(b, a)| b - a).collect();
    norm(&r) / norm(b)
}

fn chebyshev(lambda_min: f64, lambda_max: f64, tolerance: f64, max_iterations: usize) -> Chebyshev {
    Chebyshev { lambda_min, lambda_max, tolerance, max_iterations, check_every: 1 }
}

/// The defective "Templates" recurrence (SIAM Templates 1994, IML++ `cheby.h`, the listing
/// of the thesis), unpreconditioned: alpha_1 = 2/d, beta = (c alpha / 2)^2,
/// alpha = 1/(d - beta). Returns the iterations to reach ||r|| / ||b|| <= eps, or None after
/// `max_iterations`.
fn templates_chebyshev(
    op: &Op,
    b: &[f64],
    lmin: f64,
    lmax: f64,
    eps: f64,
    max_iterations: usize,
) -> Option<usize> {
    let n = b.len();
    let (d, c) = ((lmax + lmin) / 2.0, (lmax - lmin) / 2.0);
    let (mut x, mut r, mut p, mut ap) = (vec![0.0; n], b.to_vec(), vec![0.0; n], vec![0.0; n]);
    let b_norm = norm(b);
    let mut alpha = 0.0;
    for i in 1..=max_iterations {
        if i == 1 {
            p.copy_from_slice(&r);
            alpha = 2.0 / d;
        } else {
            let beta = (c * alpha / 2.0).powi(2);
            alpha = 1.0 / (d - beta);
            for j in 0..n {
                p[j] = r[j] + beta * p[j];
            }
        }
        op.apply(&p, &mut ap).unwrap();
        for j in 0..n {
            x[j] += alpha * p[j];
            r[j] -= alpha * ap[j];
        }
        if norm(&r) / b_norm <= eps {
            return Some(i);
        }
    }
    None
}

fn plain_cg(op: &Op, b: &[f64], tolerance: f64) -> (Vec<f64>, SolveReport) {
    let mut x = vec![0.0; b.len()];
    let settings = CgSettings { tolerance, max_iterations: 20_000, true_residual_every: 0 };
    let report =
        run_cg(&CpuBackend, op, &Identity, &b.to_vec(), &mut x, &settings, &mut |_| Flow::Continue)
            .unwrap();
    (x, report)
}

#[test]
fn exact_bounds_converge_as_the_theory_says() {
    let eps = 1e-8;
    for n in [4, 6, 8] {
        for k in 1..=3 {
            let (a, b) = hdg_system(n, k);
            let jacobi = Jacobi::new(&CpuBackend, &a).unwrap();
            let cases: [(&str, (f64, f64), &Precond); 2] = [
                ("none", extremes(&dense_eigenvalues(&a)), &Identity),
                ("jacobi", extremes(&jacobi_eigenvalues(&a)), &jacobi),
            ];
            for (name, (lmin, lmax), m) in cases {
                let theory = theoretical_iterations(lmin, lmax, eps);
                let mut x = vec![0.0; a.dim()];
                let report = run_chebyshev(
                    &CpuBackend,
                    &a,
                    m,
                    &b,
                    &mut x,
                    &chebyshev(lmin, lmax, eps, 10 * theory),
                )
                .unwrap();
                let ratio = report.iterations as f64 / theory as f64;
                println!(
                    "n={n} k={k} {name:6} kappa={:8.1} chebyshev {:4} theory {:4} ratio {ratio:.3}",
                    lmax / lmin,
                    report.iterations,
                    theory
                );
                assert!(report.converged, "n={n} k={k} {name}: {report:?}");
                assert!(report.relative_residual <= eps);
                assert!((0.5..=1.1).contains(&ratio), "n={n} k={k} {name}: ratio {ratio}");
            }
        }
    }
}

#[test]
fn the_templates_recurrence_is_far_slower() {
    // The same systems and exact bounds: the defective recurrence does not even converge in
    // 3x the theoretical count of the correct one.
    let eps = 1e-8;
    for n in [4, 6, 8] {
        for k in 1..=3 {
            let (a, b) = hdg_system(n, k);
            let (lmin, lmax) = extremes(&dense_eigenvalues(&a));
            let theory = theoretical_iterations(lmin, lmax, eps);
            let mut x = vec![0.0; a.dim()];
            let correct = run_chebyshev(
                &CpuBackend,
                &a,
                &Identity,
                &b,
                &mut x,
                &chebyshev(lmin, lmax, eps, 10 * theory),
            )
            .unwrap();
            let templates = templates_chebyshev(&a, &b, lmin, lmax, eps, 100 * theory);
            println!(
                "n={n} k={k} kappa={:8.1} correct {:4} templates {:?} theory {theory}",
                lmax / lmin,
                correct.iterations,
                templates
            );
            assert!(correct.converged);
            assert!(
                templates.is_none_or(|t| t > 3 * theory && t > 3 * correct.iterations),
                "n={n} k={k}: templates {templates:?}, correct {}, theory {theory}",
                correct.iterations
            );
        }
    }
}

#[test]
fn residual_checks_are_the_only_reductions() {
    let (a, b) = hdg_system(6, 2);
    let (lmin, lmax) = extremes(&dense_eigenvalues(&a));
    for check_every in [1, 10, 25] {
        let mut x = vec![0.0; a.dim()];
        let settings = Chebyshev { check_every, ..chebyshev(lmin, lmax, 1e-10, 5000) };
        let report = run_chebyshev(&CpuBackend, &a, &Identity, &b, &mut x, &settings).unwrap();
        assert!(report.converged);
        let checks = report.iterations / check_every;
        assert_eq!(report.residual_history.len(), checks);
        // ||b||, the initial true residual, the checks, and the confirming true residual(s).
        let confirmations = report.true_residual_checks.len();
        assert!(confirmations >= 1);
        assert_eq!(report.reductions, 2 + checks + confirmations, "{report:?}");
        // One operator application per iteration plus the true residuals.
        assert_eq!(report.operator_applications, report.iterations + 1 + confirmations);
        assert_eq!(report.iterations % check_every, 0);
    }
}

#[test]
fn an_under_estimated_lambda_max_is_reported_as_divergence() {
    let (a, b) = hdg_system(6, 2);
    let (lmin, lmax) = extremes(&dense_eigenvalues(&a));
    for check_every in [1, 7] {
        let mut x = vec![0.0; a.dim()];
        let settings = Chebyshev { check_every, ..chebyshev(lmin, 0.5 * lmax, 1e-10, 1_000_000) };
        match run_chebyshev(&CpuBackend, &a, &Identity, &b, &mut x, &settings) {
            Err(CoreError::Solver(message)) => {
                assert!(message.contains("lambda_max under-estimated"), "{message}")
            }
            other => panic!("expected a divergence error, got {other:?}"),
        }
    }
    // An over-estimate only slows convergence.
    let mut x = vec![0.0; a.dim()];
    let report = run_chebyshev(
        &CpuBackend,
        &a,
        &Identity,
        &b,
        &mut x,
        &chebyshev(lmin, 2.0 * lmax, 1e-10, 5000),
    )
    .unwrap();
    assert!(report.converged);
}

#[test]
fn invalid_settings_and_iteration_limits() {
    let (a, b) = hdg_system(4, 1);
    let (lmin, lmax) = extremes(&dense_eigenvalues(&a));
    for (lo, hi) in [
        (0.0, lmax),
        (-1.0, lmax),
        (lmax, lmin),
        (lmin, lmin),
        (f64::NAN, lmax),
        (lmin, f64::INFINITY),
    ] {
        let mut x = vec![0.0; a.dim()];
        let r =
            run_chebyshev(&CpuBackend, &a, &Identity, &b, &mut x, &chebyshev(lo, hi, 1e-8, 100));
        assert!(matches!(r, Err(CoreError::InvalidParameter { .. })), "[{lo}, {hi}]: {r:?}");
        assert!(ChebyshevPreconditioner::new(&a as &Op, Identity, 3, lo, hi).is_err());
        assert_eq!(theoretical_iterations(lo, hi, 1e-8), usize::MAX);
    }
    let mut x = vec![0.0; a.dim()];
    let bad = [
        Chebyshev { check_every: 0, ..chebyshev(lmin, lmax, 1e-8, 100) },
        chebyshev(lmin, lmax, 0.0, 100),
        chebyshev(lmin, lmax, 2.0, 100),
    ];
    for settings in bad {
        let r = run_chebyshev(&CpuBackend, &a, &Identity, &b, &mut x, &settings);
        assert!(matches!(r, Err(CoreError::InvalidParameter { .. })), "{r:?}");
    }
    assert!(ChebyshevPreconditioner::new(&a as &Op, Identity, 0, lmin, lmax).is_err());

    let report =
        run_chebyshev(&CpuBackend, &a, &Identity, &b, &mut x, &chebyshev(lmin, lmax, 1e-12, 5))
            .unwrap();
    assert!(!report.converged);
    assert_eq!(report.iterations, 5);
    assert!(report.relative_residual > 1e-12 && report.relative_residual < 1.0);

    // A zero right-hand side gives x = 0 at once.
    let mut x = vec![1.0; a.dim()];
    let report = run_chebyshev(
        &CpuBackend,
        &a,
        &Identity,
        &vec![0.0; a.dim()],
        &mut x,
        &chebyshev(lmin, lmax, 1e-8, 5),
    )
    .unwrap();
    assert!(report.converged && x.iter().all(|&v| v == 0.0));
}

fn cheb_pcg<'a>(
    a: &'a DbfMatrix<f64>,
    degree: usize,
    lmin: f64,
    lmax: f64,
    tolerance: f64,
) -> PreconditionedCg<ChebyshevPreconditioner<'a, f64, Vec<f64>, Identity>> {
    PreconditionedCg {
        settings: CgSettings { tolerance, max_iterations: 10_000, true_residual_every: 0 },
        preconditioner: ChebyshevPreconditioner::new(a as &Op, Identity, degree, lmin, lmax)
            .unwrap(),
    }
}

#[test]
fn every_solver_reaches_1e_10_and_agrees_with_cg() {
    let tolerance = 1e-11;
    for k in 1..=4 {
        let (a, b) = hdg_system(6, k);
        let op: &Op = &a;
        let (x_cg, cg) = plain_cg(op, &b, 1e-13);
        assert!(cg.converged);
        // Bounds as a user would get them: Lanczos from 30 CG steps, widened.
        let plain = lanczos_estimate(&CpuBackend, op, &Identity, &b, 30).unwrap();
        let jacobi = Jacobi::new(&CpuBackend, op).unwrap();
        let scaled = lanczos_estimate(&CpuBackend, op, &jacobi, &b, 30).unwrap();
        let gershgorin = gershgorin_estimate(op, false).unwrap();
        let solvers: Vec<Box<dyn KrylovSolver<f64, CpuBackend>>> = vec![
            Box::new(ChebyshevSolver {
                chebyshev: Chebyshev {
                    check_every: 10,
                    ..chebyshev(0.9 * plain.lambda_min, 1.05 * plain.lambda_max, tolerance, 20_000)
                },
                preconditioner: Identity,
            }),
            Box::new(ChebyshevSolver {
                chebyshev: Chebyshev {
                    check_every: 10,
                    ..chebyshev(
                        0.9 * scaled.lambda_min,
                        1.05 * scaled.lambda_max,
                        tolerance,
                        20_000,
                    )
                },
                preconditioner: Jacobi::new(&CpuBackend, op).unwrap(),
            }),
            Box::new(CgThenChebyshev::new(tolerance, 20_000, Identity)),
            Box::new(CgThenChebyshev::new(
                tolerance,
                20_000,
                Jacobi::new(&CpuBackend, op).unwrap(),
            )),
            Box::new(CgThenChebyshev::new(
                tolerance,
                20_000,
                BlockJacobi::new(&CpuBackend, op).unwrap(),
            )),
            Box::new(cheb_pcg(&a, 4, plain.lambda_min, gershgorin.lambda_max, tolerance)),
            Box::new(PreconditionedCg {
                settings: CgSettings { tolerance, max_iterations: 10_000, true_residual_every: 0 },
                preconditioner: ChebyshevPreconditioner::new(
                    op,
                    Jacobi::new(&CpuBackend, op).unwrap(),
                    3,
                    scaled.lambda_min,
                    1.1 * scaled.lambda_max,
                )
                .unwrap(),
            }),
        ];
        for solver in &solvers {
            let mut x = vec![0.0; a.dim()];
            let report = solver.solve(&CpuBackend, op, &b, &mut x).unwrap();
            let residual = true_relative_residual(op, &b, &x);
            let difference = relative_difference(&x, &x_cg);
            println!(
                "k={k} {:28} iterations {:5} applications {:5} reductions {:5} residual {residual:.2e} |x - x_cg|/|x_cg| {difference:.2e}",
                solver.name(),
                report.iterations,
                report.operator_applications,
                report.reductions
            );
            assert!(report.converged, "k={k} {}: {report:?}", solver.name());
            assert!(residual <= 1e-10, "k={k} {}: {residual}", solver.name());
            assert!((report.relative_residual - residual).abs() <= 1e-3 * residual + 1e-15);
            assert!(difference <= 1e-8, "k={k} {}: {difference}", solver.name());
        }
    }
}

#[test]
fn cg_then_chebyshev_reports_both_phases() {
    let (a, b) = hdg_system(6, 3);
    let op: &Op = &a;
    let solver =
        CgThenChebyshev { cg_iterations: 20, ..CgThenChebyshev::new(1e-10, 20_000, Identity) };
    let mut x = vec![0.0; a.dim()];
    let report = solver.solve(&CpuBackend, op, &b, &mut x).unwrap();
    assert!(report.converged);
    assert!(report.iterations > 20);
    assert!(report.notes.iter().any(|n| n.contains("bounds used")), "{:?}", report.notes);
    // The CG phase's costs are in: 20 steps of at least one application each.
    assert!(report.operator_applications >= report.iterations + 2);
    // Chebyshev checks only every 10 iterations: far fewer reductions than CG would need.
    assert!(report.reductions < 2 * 20 + (report.iterations - 20) / 5 + 10, "{report:?}");
    // CG converging within the first phase: no Chebyshev phase.
    let (small, small_b) = hdg_system(2, 1);
    let mut x = vec![0.0; small.dim()];
    let solver =
        CgThenChebyshev { cg_iterations: 100, ..CgThenChebyshev::new(1e-10, 1000, Identity) };
    let report = solver.solve(&CpuBackend, &small as &Op, &small_b, &mut x).unwrap();
    assert!(report.converged && report.iterations <= small.dim() + 2);
}

#[test]
fn cg_then_chebyshev_recovers_from_bad_bounds_or_says_so() {
    let (a, b) = hdg_system(6, 2);
    let op: &Op = &a;
    // safety_max = 0.4 makes the Chebyshev phase diverge; two doublings bring lambda_max above
    // the true one.
    let solver = CgThenChebyshev {
        safety_max: 0.4,
        divergence_retries: 3,
        ..CgThenChebyshev::new(1e-10, 50_000, Identity)
    };
    let mut x = vec![0.0; a.dim()];
    let report = solver.solve(&CpuBackend, op, &b, &mut x).unwrap();
    assert!(report.converged, "{report:?}");
    assert!(report.notes.iter().any(|n| n.contains("retry")), "{:?}", report.notes);
    assert!(true_relative_residual(op, &b, &x) <= 1e-10);

    let solver = CgThenChebyshev { divergence_retries: 0, ..solver };
    let mut x = vec![0.0; a.dim()];
    assert!(matches!(solver.solve(&CpuBackend, op, &b, &mut x), Err(CoreError::Solver(_))));
    let solver = CgThenChebyshev { cg_iterations: 1, ..solver };
    assert!(matches!(
        solver.solve(&CpuBackend, op, &b, &mut x),
        Err(CoreError::InvalidParameter { .. })
    ));
}

#[test]
fn chebyshev_pcg_of_degree_4_needs_fewer_cg_iterations() {
    for k in 1..=4 {
        let (a, b) = hdg_system(8, k);
        let op: &Op = &a;
        let (x_cg, cg) = plain_cg(op, &b, 1e-10);
        // lambda_max: the Gershgorin upper bound (safe, no cost); lambda_min: Lanczos.
        let lmax = gershgorin_estimate(op, false).unwrap().lambda_max;
        let lmin = lanczos_estimate(&CpuBackend, op, &Identity, &b, 20).unwrap().lambda_min;
        let solver = cheb_pcg(&a, 4, lmin, lmax, 1e-10);
        let mut x = vec![0.0; a.dim()];
        let report =
            KrylovSolver::<f64, CpuBackend>::solve(&solver, &CpuBackend, op, &b, &mut x).unwrap();
        println!(
            "k={k} dim={} cg {} iterations / {} applications; chebyshev(4)-pcg {} iterations / {} applications",
            a.dim(),
            cg.iterations,
            cg.operator_applications,
            report.iterations,
            report.operator_applications
        );
        assert!(report.converged);
        assert!(
            report.iterations < cg.iterations,
            "k={k}: {} vs {}",
            report.iterations,
            cg.iterations
        );
        assert!(relative_difference(&x, &x_cg) < 1e-7);
        // Degree 4 costs 3 applications a call, plus one for the CG step; one call before the
        // first step and one after every step but the last, and the two true residuals.
        assert_eq!(report.operator_applications, 4 * report.iterations + 2);
    }
}

#[test]
fn the_chebyshev_preconditioner_is_symmetric_positive_definite() {
    let (a, _) = hdg_system(4, 2);
    let op: &Op = &a;
    let (lmin, lmax) = extremes(&dense_eigenvalues(op));
    let n = a.dim();
    let u: Vec<f64> = (0..n).map(|i| ((i * 7 + 3) as f64).sin()).collect();
    let v: Vec<f64> = (0..n).map(|i| ((i * 13 + 1) as f64).cos()).collect();
    let dot = |x: &[f64], y: &[f64]| x.iter().zip(y).map(|(a, b)| a * b).sum::<f64>();
    for degree in [1, 2, 4, 7] {
        for jacobi in [false, true] {
            let apply = |r: &[f64]| {
                let mut z = vec![0.0; n];
                if jacobi {
                    let m = ChebyshevPreconditioner::new(
                        op,
                        Jacobi::new(&CpuBackend, op).unwrap(),
                        degree,
                        0.01,
                        4.0,
                    )
                    .unwrap();
                    hdg_core::Preconditioner::<f64, CpuBackend>::apply(
                        &m,
                        &CpuBackend,
                        &r.to_vec(),
                        &mut z,
                    )
                    .unwrap();
                } else {
                    let m = ChebyshevPreconditioner::new(op, Identity, degree, lmin, lmax).unwrap();
                    hdg_core::Preconditioner::<f64, CpuBackend>::apply(
                        &m,
                        &CpuBackend,
                        &r.to_vec(),
                        &mut z,
                    )
                    .unwrap();
                    // The workspace is reused: a second call gives the same result.
                    let mut again = vec![0.0; n];
                    hdg_core::Preconditioner::<f64, CpuBackend>::apply(
                        &m,
                        &CpuBackend,
                        &r.to_vec(),
                        &mut again,
                    )
                    .unwrap();
                    assert_eq!(z, again);
                }
                z
            };
            let (pu, pv) = (apply(&u), apply(&v));
            let (upv, vpu) = (dot(&u, &pv), dot(&v, &pu));
            assert!(
                (upv - vpu).abs() <= 1e-12 * (dot(&u, &pu) * dot(&v, &pv)).sqrt(),
                "{degree}: {upv} {vpu}"
            );
            assert!(dot(&u, &pu) > 0.0 && dot(&v, &pv) > 0.0);
        }
        if degree == 1 {
            // One step: z = M^-1 r / d.
            let m = ChebyshevPreconditioner::new(op, Identity, 1, lmin, lmax).unwrap();
            let mut z = vec![0.0; n];
            hdg_core::Preconditioner::<f64, CpuBackend>::apply(&m, &CpuBackend, &u, &mut z)
                .unwrap();
            let d = 0.5 * (lmin + lmax);
            assert!(z.iter().zip(&u).all(|(z, u)| (z - u / d).abs() <= 1e-15 * u.abs().max(1.0)));
        }
    }
}

#[test]
fn chebyshev_runs_in_single_precision() {
    let (a, b) = hdg_system(4, 2);
    let (lmin, lmax) = extremes(&dense_eigenvalues(&a));
    let low = DemoteOperator::<CpuBackend>::demote(&a).unwrap();
    let b32: Vec<f32> = b.iter().map(|&v| v as f32).collect();
    let mut x = vec![0.0f32; a.dim()];
    let report = run_chebyshev(
        &CpuBackend,
        &low,
        &Identity,
        &b32,
        &mut x,
        &chebyshev(lmin, 1.01 * lmax, 1e-5, 5000),
    )
    .unwrap();
    assert!(report.converged, "{report:?}");
    let (x_cg, _) = plain_cg(&a, &b, 1e-12);
    let x64: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    assert!(relative_difference(&x64, &x_cg) < 1e-3);
}
