//! Gmsh meshes of curved and re-entrant domains (`examples/meshes/`, nested refinements made
//! by Gmsh): rates k+1 (u, q) and k+2 (u*) over the last refinement. The domain solved on is
//! the polygon (polyhedron) of each mesh, where the manufactured solution is exact, so the
//! curved boundary costs no order.
use hdg_core::{Manufactured, Problem};
use tests::{assert_rates, example_mesh, per_backend, Backend, Runs};

fn check_rates(backend: Backend, name: &str, levels: [usize; 2], orders: &[usize]) {
    for &k in orders {
        let errors: Vec<_> = levels
            .iter()
            .map(|level| {
                let mesh = example_mesh(&format!("{name}-{level}")).mesh;
                let problem = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
                backend.run::<f64>(&mesh, &problem, k).report.errors.unwrap()
            })
            .collect();
        assert_rates(name, k, errors[0], errors[1]);
    }
}

per_backend! {
    fn l_shape(backend) {
        check_rates(backend, "l-shape", [2, 3], &[1, 2, 3]);
    }

    fn plate_with_hole(backend) {
        check_rates(backend, "plate-with-hole", [1, 2], &[1, 2, 3]);
    }

    fn cube_with_hole(backend) {
        check_rates(backend, "cube-with-hole", [1, 2], &[1, 2]);
    }
}
