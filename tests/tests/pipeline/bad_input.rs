//! Bad input to the library gives a typed error, never a panic.
use hdg_core::{
    BoundaryCondition, Coefficient, CoreError, ExactSolution, Manufactured, Problem, Source,
};
use hdg_linalg::{ConjugateGradient, Preconditioning};
use hdg_mesh::{generate, Diagonal};
use tests::{per_backend, Backend, Runs, TraceSolve};

fn try_solve(backend: Backend, problem: &Problem, order: usize, tol: f64) -> Result<(), CoreError> {
    let mesh = generate::unit_square(2, Diagonal::Right).unwrap();
    let cg = TraceSolve::Cg(ConjugateGradient::new(tol, 100, Preconditioning::None));
    backend.try_run::<f64>(&mesh, problem, order, &cg, false).map(|_| ())
}

per_backend! {
    /// Orders outside 1..=10 are refused by the core; an order the backend does not run (above
    /// its own maximum) is an error too, and its maximum runs.
    fn order_out_of_range_is_an_error(backend) {
        let p = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
        let invalid = |order, r: Result<(), CoreError>| {
            assert!(
                matches!(r, Err(CoreError::InvalidOrder { order: o, .. }) if o == order),
                "order {order}: {r:?}"
            )
        };
        invalid(0, try_solve(backend, &p, 0, 1e-10));
        invalid(11, try_solve(backend, &p, 11, 1e-10));
        let max = backend.max_order();
        let above = try_solve(backend, &p, max + 1, 1e-10);
        assert!(above.is_err(), "order {} above the backend's maximum {max}: {above:?}", max + 1);
        println!("order {}: {}", max + 1, above.unwrap_err());
        try_solve(backend, &p, max, 1e-10).expect("the backend's highest order runs");
    }

    fn bad_coefficients_and_tolerance_are_errors(backend) {
        let mut p = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
        p.kappa = Coefficient::Constant(-1.0);
        let r = try_solve(backend, &p, 1, 1e-10);
        assert!(matches!(r, Err(CoreError::InvalidParameter { name: "kappa", .. })), "{r:?}");
        let p = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
        let r = try_solve(backend, &p, 1, 0.0);
        assert!(matches!(r, Err(CoreError::InvalidParameter { name: "tolerance", .. })), "{r:?}");
    }

    /// A source replaced after construction is the one used: NaN loads are refused, naming
    /// the source and the cell, before the solve.
    fn nan_source_is_reported_not_returned_as_garbage(backend) {
        let mut p = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
        p.source = Source::closure(|_| f64::NAN);
        let err = try_solve(backend, &p, 2, 1e-10).unwrap_err();
        assert!(
            matches!(&err, CoreError::InvalidParameter { name: "problem data", reason }
                if reason.contains("source f") && reason.contains("on cell 0")),
            "{err}"
        );
    }
}

per_backend! {
    /// A closure of the problem that panics, or gives a value that is not finite, is an error
    /// naming the closure (and the face or cell of the bad value), not a panic through the
    /// library or a solve on NaN.
    fn closures_that_panic_or_give_nan_are_named(backend) {
        let expect = |p: &Problem, needles: &[&str]| {
            let err = try_solve(backend, p, 2, 1e-8).expect_err("must be refused").to_string();
            for needle in needles {
                assert!(err.contains(needle), "{needle:?} not in: {err}");
            }
        };
        let base = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
        let exact = base.exact.clone().unwrap();

        let mut p = base.clone();
        p.source = Source::closure(|x| if x[0] > 0.5 { panic!("no f here") } else { 1.0 });
        expect(&p, &["the source f", "panicked: no f here"]);
        p.source = Source::closure(|x| if x[0] > 0.5 { f64::NAN } else { 1.0 });
        expect(&p, &["the source f", "not finite", "on cell"]);

        let mut p = base.clone();
        p.dirichlet = std::sync::Arc::new(|x| if x[1] > 0.9 { f64::INFINITY } else { 0.0 });
        expect(&p, &["Dirichlet data g_D", "not finite", "on face", "boundary tag"]);
        p.dirichlet = std::sync::Arc::new(|_| panic!("no g"));
        expect(&p, &["Dirichlet data g_D panicked: no g"]);

        let neumann = |data: hdg_core::FaceField| {
            base.clone().with_boundary(2, BoundaryCondition::Neumann { data })
        };
        expect(&neumann(std::sync::Arc::new(|_, _| f64::NAN)), &["Neumann data", "on face"]);
        expect(&neumann(std::sync::Arc::new(|_, _| panic!("no flux"))), &["Neumann or Robin"]);

        let mut p = base.clone();
        p.kappa = Coefficient::field(|_| panic!("no kappa"));
        expect(&p, &["kappa or c", "panicked: no kappa"]);

        let mut p = base.clone();
        p.exact = Some(ExactSolution::Closures {
            u: std::sync::Arc::new(move |x| exact.u(x)),
            grad_u: std::sync::Arc::new(|_, _| panic!("no gradient")),
        });
        expect(&p, &["the exact solution panicked: no gradient"]);
    }
}
