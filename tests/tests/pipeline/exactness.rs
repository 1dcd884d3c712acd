//! Polynomials of degree k are in the discrete space: u_h, q_h and u* must reproduce them to
//! round-off, on a perturbed mesh (so no symmetry of the mesh can hide an error).
use hdg_core::{Manufactured, Problem};
use hdg_mesh::{generate, Diagonal};
use tests::{assert_reproduced, per_backend};

per_backend! {
    /// Every order the backend runs, k = 1..8 at most.
    fn polynomials_of_degree_k_are_reproduced_for_k_1_to_8(backend) {
        let mesh =
            generate::perturb(&generate::unit_square(4, Diagonal::Alternating).unwrap(), 0.3, 7)
                .unwrap();
        for k in 1..=backend.max_order().min(8) {
            let problem = Problem::manufactured(Manufactured::Polynomial(k), 1.0, 0.0);
            let e = backend.run::<f64>(&mesh, &problem, k).report.errors.unwrap();
            assert_reproduced(k, &e);
        }
    }

    /// With a reaction term and a non-unit kappa the same holds: the coefficients enter every
    /// block of the condensation, so a misplaced kappa or c shows up here.
    fn reaction_diffusion_polynomial_is_reproduced(backend) {
        let mesh = generate::perturb(&generate::unit_square(3, Diagonal::Left).unwrap(), 0.25, 3)
            .unwrap();
        for k in [1, 3] {
            let problem = Problem::manufactured(Manufactured::Polynomial(k), 2.5, 3.0);
            let e = backend.run::<f64>(&mesh, &problem, k).report.errors.unwrap();
            assert_reproduced(k, &e);
        }
    }

    /// Guards the error norms: a polynomial of degree k+1 is not in the space, so the error
    /// must be clearly non-zero (the tests above would pass vacuously if the norms were broken).
    fn degree_k_plus_1_is_not_reproduced_by_u_h(backend) {
        let mesh = generate::unit_square(4, Diagonal::Right).unwrap();
        let problem = Problem::manufactured(Manufactured::Polynomial(3), 1.0, 0.0);
        let e = backend.run::<f64>(&mesh, &problem, 2).report.errors.unwrap();
        assert!(e.u > 1e-6 && e.q > 1e-6, "{e:?}");
    }
}
