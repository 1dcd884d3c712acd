//! The whole pipeline on tetrahedra: exactness for polynomials of degree k, observed
//! rates k+1 (u, q) and k+2 (u*), and faces met in all six orientations.
use hdg_core::{Manufactured, Problem};
use hdg_mesh::{generate, Mesh};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use tests::{assert_rates, assert_reproduced, per_backend, Backend, Runs};

fn cube(n: usize, perturbation: f64, seed: u64) -> Mesh {
    let mesh = generate::unit_cube(n).unwrap();
    if perturbation > 0.0 {
        generate::perturb(&mesh, perturbation, seed).unwrap()
    } else {
        mesh
    }
}

/// Orientation codes met by the cells of `mesh`, counted.
fn orientation_counts(mesh: &Mesh) -> [usize; 6] {
    let mut seen = [0usize; 6];
    for c in 0..mesh.n_cells() {
        for &o in mesh.cell_face_orientations(c) {
            seen[o as usize] += 1;
        }
    }
    seen
}

fn check_rates(backend: Backend, solution: Manufactured, perturbation: f64) {
    for k in 1..=3usize {
        let errors: Vec<_> = [2, 4, 8]
            .iter()
            .map(|&n| {
                let problem = Problem::manufactured(solution, 1.0, 0.0);
                backend
                    .run_direct::<f64>(&cube(n, perturbation, 1), &problem, k)
                    .report
                    .errors
                    .unwrap()
            })
            .collect();
        assert_rates(&format!("{solution:?} perturbation {perturbation}"), k, errors[1], errors[2]);
    }
}

per_backend! {
    fn polynomials_of_degree_k_are_reproduced_for_k_1_to_6(backend) {
        // 27 interior vertices, all moved: no symmetry of the structured mesh is left.
        let mesh = cube(3, 0.25, 7);
        for k in 1..=6 {
            let problem = Problem::manufactured(Manufactured::Polynomial(k), 1.0, 0.0);
            let e = backend.run_direct::<f64>(&mesh, &problem, k).report.errors.unwrap();
            assert_reproduced(k, &e);
        }
    }

    /// kappa and c enter every block of the condensation; a misplaced one shows up here.
    fn reaction_diffusion_polynomial_is_reproduced(backend) {
        let mesh = cube(2, 0.3, 3);
        for k in [1, 2, 4] {
            let problem = Problem::manufactured(Manufactured::Polynomial(k), 2.5, 3.0);
            let e = backend.run_direct::<f64>(&mesh, &problem, k).report.errors.unwrap();
            assert_reproduced(k, &e);
        }
    }

    /// Guards the error norms: a degree k+1 polynomial is not in the space, so the error must be
    /// clearly non-zero.
    fn degree_k_plus_1_is_not_reproduced_by_u_h(backend) {
        let problem = Problem::manufactured(Manufactured::Polynomial(3), 1.0, 0.0);
        let e = backend.run_direct::<f64>(&cube(2, 0.0, 0), &problem, 2).report.errors.unwrap();
        assert!(e.u > 1e-6 && e.q > 1e-6, "{e:?}");
    }

    fn sine_structured_rates(backend) {
        check_rates(backend, Manufactured::Sine, 0.0);
    }

    fn exp_sin_perturbed_rates(backend) {
        check_rates(backend, Manufactured::ExpSin, 0.15);
    }

    fn sine_perturbed_rates(backend) {
        check_rates(backend, Manufactured::Sine, 0.15);
    }

    fn exp_sin_structured_rates(backend) {
        check_rates(backend, Manufactured::ExpSin, 0.0);
    }

    /// The orientation code is the classic place for silent bugs: renumber the vertices at random
    /// so that faces are met in all six orientations (the structured numbering meets them in few),
    /// then check exactness and that the errors of a smooth solution are those of the unrenumbered
    /// mesh (the discrete solution does not depend on the numbering).
    fn faces_in_all_six_orientations_give_the_same_solution(backend) {
        let mesh = cube(3, 0.2, 5);
        let mut perm: Vec<usize> = (0..mesh.n_vertices()).collect();
        perm.shuffle(&mut rand::rngs::StdRng::seed_from_u64(9));
        let renumbered = mesh.renumber_vertices(&perm).unwrap();
        let counts = orientation_counts(&renumbered);
        println!(
            "orientation codes met: structured {:?}, renumbered {counts:?}",
            orientation_counts(&mesh)
        );
        assert!(counts.iter().all(|&c| c > 0), "{counts:?}");
        // Every interior face must be seen by its two cells through one consistent canonical
        // parametrisation; with all 6 codes present a wrong code table breaks exactness.
        for k in 1..=4 {
            let poly = Problem::manufactured(Manufactured::Polynomial(k), 1.0, 0.0);
            let e = backend.run_direct::<f64>(&renumbered, &poly, k).report.errors.unwrap();
            assert_reproduced(k, &e);
            let smooth = Problem::manufactured(Manufactured::ExpSin, 1.0, 0.0);
            let base = backend.run_direct::<f64>(&mesh, &smooth, k).report.errors.unwrap();
            let e = backend.run_direct::<f64>(&renumbered, &smooth, k).report.errors.unwrap();
            for (a, b) in [(base.u, e.u), (base.q, e.q), (base.u_star, e.u_star)] {
                assert!((a - b).abs() <= 1e-9 * a, "k = {k}: {a:e} vs {b:e}");
            }
        }
    }
}
