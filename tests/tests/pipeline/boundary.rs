//! Neumann and Robin boundaries (`hdg_core::boundary`): P_k exactness and rates with the mixed
//! conditions of `hdg solve --bc mixed` (Dirichlet on x = 0, Robin on x = 1, Neumann on the
//! other sides), pure Neumann with c > 0, and the problems that must be refused.
use hdg_core::{BoundaryCondition, CoreError, Manufactured, Problem};
use hdg_mesh::{generate, Diagonal};
use tests::{assert_rates, assert_reproduced, per_backend, Backend, Runs, TraceSolve};

fn mixed(solution: Manufactured, dim: usize, kappa: f64, reaction: f64) -> Problem {
    Problem::manufactured(solution, kappa, reaction).with_mixed_boundary(dim, kappa).unwrap()
}

per_backend! {
    /// Polynomials of degree k are reproduced with every kind of boundary: a wrong sign or
    /// scale of the Neumann load or the Robin term shows up at once.
    fn polynomials_are_reproduced_with_mixed_conditions(backend) {
        let square =
            generate::perturb(&generate::unit_square(4, Diagonal::Alternating).unwrap(), 0.3, 7)
                .unwrap();
        for k in 1..=backend.max_order().min(6) {
            let e = backend
                .run::<f64>(&square, &mixed(Manufactured::Polynomial(k), 2, 2.5, 0.0), k)
                .report
                .errors
                .unwrap();
            assert_reproduced(k, &e);
        }
        let cube = generate::unit_cube(2).unwrap();
        for k in 1..=3 {
            let problem = mixed(Manufactured::Polynomial(k), 3, 1.5, 1.0);
            let e = backend.run_direct::<f64>(&cube, &problem, k).report.errors.unwrap();
            assert_reproduced(k, &e);
        }
    }

    fn rates_with_mixed_conditions_in_2d(backend) {
        for k in 1..=4usize {
            let sizes: [usize; 2] = if k <= 2 { [16, 32] } else { [8, 16] };
            let errors: Vec<_> = sizes
                .iter()
                .map(|&n| {
                    let mesh = generate::unit_square(n, Diagonal::Alternating).unwrap();
                    let problem = mixed(Manufactured::Sine, 2, 1.0, 0.0);
                    backend.run::<f64>(&mesh, &problem, k).report.errors.unwrap()
                })
                .collect();
            assert_rates("mixed 2D", k, errors[0], errors[1]);
        }
    }

    fn rates_with_mixed_conditions_in_3d(backend) {
        for k in 1..=3usize {
            let sizes: [usize; 2] = if k == 1 { [4, 8] } else { [2, 4] };
            let errors: Vec<_> = sizes
                .iter()
                .map(|&n| {
                    let mesh = generate::unit_cube(n).unwrap();
                    let problem = mixed(Manufactured::ExpSin, 3, 1.0, 0.0);
                    backend.run_direct::<f64>(&mesh, &problem, k).report.errors.unwrap()
                })
                .collect();
            if k > 1 {
                // cube:2 -> cube:4 is not yet asymptotic for u* at k >= 2: check u and q only.
                let rate = |a: f64, b: f64| (a / b).log2();
                let (c, f) = (errors[0], errors[1]);
                for (name, r) in [("u", rate(c.u, f.u)), ("q", rate(c.q, f.q))] {
                    assert!((r - (k + 1) as f64).abs() <= 0.3, "3D k={k}: rate of {name} {r}");
                }
            } else {
                assert_rates("mixed 3D", k, errors[0], errors[1]);
            }
        }
    }

    /// Neumann on the whole boundary is well posed with c > 0.
    fn pure_neumann_with_reaction_is_reproduced(backend) {
        let mesh = generate::unit_square(4, Diagonal::Right).unwrap();
        for k in [1, 3] {
            let base = Problem::manufactured(Manufactured::Polynomial(k), 1.0, 2.0);
            let exact = base.exact.clone().unwrap();
            let problem = (1..=4).fold(base, |p, tag| {
                p.with_boundary(tag, BoundaryCondition::neumann_of(&exact, 1.0))
            });
            let e = backend.run::<f64>(&mesh, &problem, k).report.errors.unwrap();
            assert_reproduced(k, &e);
        }
    }

    /// Neumann data everywhere and c = 0 with mean(u_h) = 0 asked for: the rates k+1, k+1,
    /// k+2 (the singular system solved in the complement of the constants, u_h shifted to mean
    /// zero); without the shift or the projection the errors would hold a constant.
    fn pure_neumann_without_reaction_is_solved_with_mean_zero(backend) {
        let p = tests::pure_neumann_cosine(2);
        for k in 1..=3usize {
            let errors: Vec<_> = [8, 16]
                .iter()
                .map(|&n| {
                    let mesh = generate::unit_square(n, Diagonal::Alternating).unwrap();
                    backend.run::<f64>(&mesh, &p, k).report.errors.unwrap()
                })
                .collect();
            assert_rates("pure Neumann, mean zero, 2D", k, errors[0], errors[1]);
        }
        let errors: Vec<_> = [3, 6]
            .iter()
            .map(|&n| {
                let cube = generate::unit_cube(n).unwrap();
                backend.run::<f64>(&cube, &tests::pure_neumann_cosine(3), 1).report.errors.unwrap()
            })
            .collect();
        assert_rates("pure Neumann, mean zero, 3D", 1, errors[0], errors[1]);
        // The sparse direct solve needs a definite matrix: refused, saying what to use.
        let mesh = generate::unit_square(4, Diagonal::Right).unwrap();
        match backend.try_run::<f64>(&mesh, &p, 1, &TraceSolve::Direct, false) {
            Err(CoreError::Solver(m)) => assert!(m.contains("null space"), "{m}"),
            other => panic!("expected a solver error, got {:?}", other.err()),
        }
    }

    fn singular_and_invalid_conditions_are_refused(backend) {
        let mesh = generate::unit_square(4, Diagonal::Right).unwrap();
        let base = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
        let exact = base.exact.clone().unwrap();
        let pure_neumann = (1..=4).fold(base.clone(), |p, tag| {
            p.with_boundary(tag, BoundaryCondition::neumann_of(&exact, 1.0))
        });
        let err = backend.try_run::<f64>(&mesh, &pure_neumann, 2, &TraceSolve::cg::<f64>(), false);
        assert!(
            matches!(&err, Err(CoreError::InvalidParameter { name: "boundary conditions", reason })
                if reason.contains("mean(u) = 0")),
            "{:?}",
            err.err()
        );
        for alpha in [-1.0, 0.0, f64::NAN] {
            let robin = base.clone().with_boundary(2, BoundaryCondition::robin_of(&exact, 1.0, alpha));
            let err = backend.try_run::<f64>(&mesh, &robin, 2, &TraceSolve::cg::<f64>(), false);
            assert!(
                matches!(&err, Err(CoreError::InvalidParameter { name: "Robin alpha", .. })),
                "alpha {alpha}: {:?}",
                err.err()
            );
        }
    }
}

/// Robin faces keep the trace matrix symmetric (the CPU's assembled matrix, entry by entry).
#[test]
fn robin_terms_keep_the_trace_matrix_symmetric() {
    let mesh =
        generate::perturb(&generate::unit_square(4, Diagonal::Left).unwrap(), 0.2, 5).unwrap();
    let problem = mixed(Manufactured::Sine, 2, 1.0, 0.0);
    let run = Backend::Cpu.run_keeping::<f64>(&mesh, &problem, 2);
    let (csr, _) = run.operator.expect("kept");
    let entry = |i: usize, j: usize| {
        (csr.indptr[i]..csr.indptr[i + 1])
            .find(|&e| csr.indices[e] == j)
            .map_or(0.0, |e| csr.values[e])
    };
    for i in 0..csr.n {
        for e in csr.indptr[i]..csr.indptr[i + 1] {
            let j = csr.indices[e];
            assert!((csr.values[e] - entry(j, i)).abs() <= 1e-12, "({i}, {j})");
        }
    }
}
