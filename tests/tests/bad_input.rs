//! Bad input to the library gives a typed error, never a panic.
use hdg_backend_cpu::CpuBackend;
use hdg_core::{
    solve, Coefficient, CoreError, Krylov, Manufactured, PipelineOptions, Problem, Silent, Source,
};
use hdg_linalg::{ConjugateGradient, Preconditioning};
use hdg_mesh::{generate, Diagonal};

fn try_solve(problem: &Problem, order: usize, tol: f64) -> Result<(), CoreError> {
    let mesh = generate::unit_square(2, Diagonal::Right).unwrap();
    let cg = ConjugateGradient::new(tol, 100, Preconditioning::None);
    solve::<f64, CpuBackend>(
        &CpuBackend,
        &mesh,
        problem,
        order,
        &Krylov(&cg),
        PipelineOptions::default(),
        &mut Silent,
    )
    .map(|_| ())
}

#[test]
fn order_out_of_range_is_an_error() {
    let p = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
    assert!(matches!(try_solve(&p, 0, 1e-10), Err(CoreError::InvalidOrder { order: 0, .. })));
    assert!(matches!(try_solve(&p, 11, 1e-10), Err(CoreError::InvalidOrder { order: 11, .. })));
    assert!(try_solve(&p, 10, 1e-10).is_ok());
}

#[test]
fn bad_coefficients_and_tolerance_are_errors() {
    let mut p = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
    p.kappa = Coefficient::Constant(-1.0);
    assert!(matches!(
        try_solve(&p, 1, 1e-10),
        Err(CoreError::InvalidParameter { name: "kappa", .. })
    ));
    let p = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
    assert!(matches!(
        try_solve(&p, 1, 0.0),
        Err(CoreError::InvalidParameter { name: "tolerance", .. })
    ));
}

#[test]
fn nan_source_is_reported_not_returned_as_garbage() {
    let mut p = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
    p.source = Source::closure(|_| f64::NAN);
    let err = try_solve(&p, 2, 1e-10).unwrap_err();
    assert!(matches!(err, CoreError::Solver(_)), "{err}");
}
