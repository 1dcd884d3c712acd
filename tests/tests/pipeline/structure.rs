//! Structural properties of the discrete solution: local conservation in every cell, a
//! symmetric trace matrix, and continuity of the numerical flux across faces.
use hdg_core::diagnostics::{conservation_defects, full_trace};
use hdg_core::{HostCsr, Manufactured, Problem};
use hdg_mesh::{generate, Diagonal};
use tests::{discretization, per_backend, Backend, Runs};

/// y = A x for a host CSR matrix.
fn csr_apply(a: &HostCsr, x: &[f64]) -> Vec<f64> {
    (0..a.n)
        .map(|i| (a.indptr[i]..a.indptr[i + 1]).map(|p| a.values[p] * x[a.indices[p]]).sum())
        .collect()
}

per_backend! {
    fn every_cell_conserves_to_round_off(backend) {
        let mesh =
            generate::perturb(&generate::unit_square(6, Diagonal::Alternating).unwrap(), 0.3, 5)
                .unwrap();
        for (k, solution, c) in [
            (1, Manufactured::Sine, 0.0),
            (3, Manufactured::ExpSin, 2.0),
            (5, Manufactured::Sine, 0.5),
        ] {
            let problem = Problem::manufactured(solution, 1.3, c);
            let out = backend.run::<f64>(&mesh, &problem, k);
            let disc = discretization::<f64>(&mesh, &problem, k);
            let trace = full_trace(&disc, &out.trace);
            let defects = conservation_defects(&disc, &out.fields, &trace);
            let worst = defects.iter().cloned().fold(0.0, f64::max);
            println!("k = {k}: worst relative conservation defect {worst:.2e}");
            assert!(worst < 1e-11, "k = {k}: {worst:e}");
        }
    }

    fn trace_matrix_is_symmetric(backend) {
        let mesh = generate::perturb(&generate::unit_square(5, Diagonal::Left).unwrap(), 0.3, 9)
            .unwrap();
        for k in 1..=6 {
            let problem = Problem::manufactured(Manufactured::Sine, 0.7, 1.5);
            let out = backend.run_keeping::<f64>(&mesh, &problem, k);
            let (csr, _) = out.operator.unwrap();
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

    /// Across every interior face the numerical fluxes of the two cells cancel weakly (the
    /// global equation) up to the solver tolerance: this is what the trace solve enforces.
    fn numerical_flux_is_single_valued_across_faces(backend) {
        let mesh = generate::unit_square(6, Diagonal::Alternating).unwrap();
        let problem = Problem::manufactured(Manufactured::ExpSin, 1.0, 0.0);
        let out = backend.run_keeping::<f64>(&mesh, &problem, 2);
        let (a, rhs) = out.operator.as_ref().unwrap();
        // The residual of the assembled system is the sum of the fluxes tested with each mu_m.
        let ax = csr_apply(a, &out.trace);
        let rhs_norm = rhs.iter().map(|v| v * v).sum::<f64>().sqrt();
        let res = ax.iter().zip(rhs).map(|(a, b)| (a - b).powi(2)).sum::<f64>().sqrt();
        assert!(res <= 1e-12 * rhs_norm, "{res:e} vs {rhs_norm:e}");
    }
}

/// The conservation check itself must be able to fail: a perturbed u_h breaks it.
#[test]
fn conservation_check_detects_a_wrong_field() {
    let mesh = generate::unit_square(4, Diagonal::Right).unwrap();
    let problem = Problem::manufactured(Manufactured::Sine, 1.0, 1.0);
    let out = Backend::Cpu.run::<f64>(&mesh, &problem, 2);
    let disc = discretization::<f64>(&mesh, &problem, 2);
    let trace = full_trace(&disc, &out.trace);
    let mut fields = out.fields.clone();
    fields.u[0] += 1e-3;
    let defects = conservation_defects(&disc, &fields, &trace);
    assert!(defects[0] > 1e-6, "{}", defects[0]);
}
