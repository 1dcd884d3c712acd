//! The default stopping rule gives the discretisation's accuracy, and `converged` means the
//! tolerance asked for was met.
use std::path::Path;

use hdg::{gmsh, Manufactured, Precision, Problem, Silent, Solver, SolverChoice};

fn l_shape(level: usize) -> hdg::Mesh {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../../examples/meshes/l-shape-{level}.msh"));
    gmsh::read(&path).unwrap().mesh
}

/// On the finest example L-shape (6912 triangles; u = sin(pi x) sin(pi y)), the default
/// solve's L2 errors equal the direct solve's to 1e-6 relative at k = 1..4; where an error
/// is so small that round-off in either solve sets its last digits (u* at k = 4: 3e-12),
/// to 2e-15 absolute. With the former default (a relative residual of 1e-10, recurrence
/// only) q at k = 4 differed by 6e-6 relative.
#[test]
fn the_default_solve_has_the_direct_solves_errors() {
    let mesh = std::sync::Arc::new(l_shape(3));
    let problem = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
    for k in 1..=4 {
        let solver = Solver::new(mesh.clone(), problem.clone()).order(k);
        let default = solver.run(&mut Silent).unwrap().report;
        assert!(default.solve.converged, "k = {k}: {:?}", default.solve);
        let direct = solver.clone().solver(SolverChoice::Direct).run(&mut Silent).unwrap().report;
        let (a, b) = (default.errors.unwrap(), direct.errors.unwrap());
        for (name, a, b) in [("u", a.u, b.u), ("q", a.q, b.q), ("u*", a.u_star, b.u_star)] {
            let difference = (a - b).abs();
            assert!(
                difference <= 1e-6 * b || difference <= 2e-15,
                "k = {k}, {name}: default {a:e}, direct {b:e}"
            );
        }
    }
}

/// A tolerance below what the precision attains is reported as not met: f32 cannot take the
/// true residual to 1e-12; the default f32 tolerance is met.
#[test]
fn an_unreachable_tolerance_is_not_converged() {
    let problem = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
    let solver = Solver::new(l_shape(2), problem).order(3).precision(Precision::F32);
    let default = solver.run(&mut Silent).unwrap().report.solve;
    assert!(default.converged, "{default:?}");
    let tight = solver.tolerance(1e-12).run(&mut Silent).unwrap().report.solve;
    assert!(!tight.converged, "{tight:?}");
    assert!(tight.relative_residual > 1e-12);
    assert!(tight.notes.iter().any(|n| n.contains("not reachable")), "{:?}", tight.notes);
}
