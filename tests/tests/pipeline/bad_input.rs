//! Bad input to the library gives a typed error, never a panic.
use hdg_core::{Coefficient, CoreError, Manufactured, Problem, Source};
use hdg_linalg::{ConjugateGradient, Preconditioning};
use hdg_mesh::{generate, Diagonal};
use tests::{per_backend, BackendKind, TraceSolve};

fn try_solve(
    backend: BackendKind,
    problem: &Problem,
    order: usize,
    tol: f64,
) -> Result<(), CoreError> {
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

    /// A source replaced after construction is the one used: NaN loads make the solve fail.
    fn nan_source_is_reported_not_returned_as_garbage(backend) {
        let mut p = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
        p.source = Source::closure(|_| f64::NAN);
        let err = try_solve(backend, &p, 2, 1e-10).unwrap_err();
        assert!(matches!(err, CoreError::Solver(_)), "{err}");
    }
}
