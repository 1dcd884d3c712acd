//! Coefficients per region: kappa jumping from 1 to 10 across x = 1/2, regions given as cell
//! tags ([`Coefficient::per_region`]). The solution u = x / kappa_1 left of the interface and
//! 1 / (2 kappa_1) + (x - 1/2) / kappa_2 right of it is continuous, with the flux
//! q = -kappa grad u = (-1, 0) continuous too, and linear in each cell of a mesh that the
//! interface does not cut: reproduced to round-off for every k >= 1 when the jump is in
//! the right place, and clearly not when the regions are swapped.
use std::collections::BTreeMap;
use std::sync::Arc;

use hdg_core::{Coefficient, ExactSolution, Problem, Source};
use hdg_mesh::{generate, Diagonal, Mesh};
use tests::{assert_reproduced, per_backend};

const KAPPA: [f64; 2] = [1.0, 10.0];

fn exact_u(x: &[f64]) -> f64 {
    if x[0] <= 0.5 {
        x[0] / KAPPA[0]
    } else {
        0.5 / KAPPA[0] + (x[0] - 0.5) / KAPPA[1]
    }
}

fn problem(mesh: &Mesh, swapped: bool) -> Problem {
    // Region 7 left of x = 1/2, region 9 right of it (any tags: what a mesh file gives).
    let regions: Vec<u32> = (0..mesh.n_cells())
        .map(|c| {
            let cv = mesh.cell_vertices(c);
            let x: f64 = cv.iter().map(|&v| mesh.vertex(v)[0]).sum::<f64>() / cv.len() as f64;
            if (x < 0.5) != swapped {
                7
            } else {
                9
            }
        })
        .collect();
    let values = BTreeMap::from([(7, KAPPA[0]), (9, KAPPA[1])]);
    let mut p = Problem::manufactured(hdg_core::Manufactured::Sine, 1.0, 0.0);
    p.kappa = Coefficient::per_region("kappa", &regions, &values).unwrap();
    p.source = Source::Closure { f: Arc::new(|_| 0.0), degree: Some(0) };
    p.dirichlet = Arc::new(exact_u);
    p.exact = Some(ExactSolution::Closures {
        u: Arc::new(exact_u),
        grad_u: Arc::new(|x, g| {
            g.iter_mut().for_each(|v| *v = 0.0);
            g[0] = if x[0] <= 0.5 { 1.0 / KAPPA[0] } else { 1.0 / KAPPA[1] };
        }),
    });
    p
}

per_backend! {
    fn a_kappa_jump_between_regions_is_reproduced(backend) {
        let square = generate::unit_square(4, Diagonal::Alternating).unwrap();
        let cube = generate::unit_cube(2).unwrap();
        for k in 1..=3 {
            let e = backend.run::<f64>(&square, &problem(&square, false), k).report.errors.unwrap();
            assert_reproduced(k, &e);
            let e = backend.run_direct::<f64>(&cube, &problem(&cube, false), k).report.errors.unwrap();
            assert_reproduced(k, &e);
        }
        // The regions swapped: the same data, the wrong equation, a clearly wrong answer.
        let e = backend.run::<f64>(&square, &problem(&square, true), 2).report.errors.unwrap();
        assert!(e.u > 1e-3, "{e:?}");
    }
}

#[test]
fn a_region_without_a_value_is_refused_naming_a_cell() {
    let err = Coefficient::per_region("kappa", &[1, 1, 2], &BTreeMap::from([(1, 1.0)]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("region 2 (of cell 2)") && err.contains("kappa"), "{err}");
}
