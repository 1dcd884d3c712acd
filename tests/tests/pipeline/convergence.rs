//! Observed rates of convergence over the last two refinements: k+1 for u and q, k+2 for u*.
use hdg_core::{Manufactured, Problem};
use hdg_mesh::{generate, Diagonal, Mesh};
use tests::{assert_rates, per_backend, Backend, Runs};

fn mesh(n: usize, perturbed: bool) -> Mesh {
    let m = generate::unit_square(n, Diagonal::Alternating).unwrap();
    if perturbed {
        generate::perturb(&m, 0.15, 1).unwrap()
    } else {
        m
    }
}

fn check_rates(backend: Backend, solution: Manufactured, perturbed: bool) {
    for k in 1..=4usize {
        let sizes: [usize; 3] = if k <= 2 { [8, 16, 32] } else { [4, 8, 16] };
        let errors: Vec<_> = sizes
            .iter()
            .map(|&n| {
                let problem = Problem::manufactured(solution, 1.0, 0.0);
                backend.run::<f64>(&mesh(n, perturbed), &problem, k).report.errors.unwrap()
            })
            .collect();
        assert_rates(&format!("{solution:?} perturbed={perturbed}"), k, errors[1], errors[2]);
    }
}

per_backend! {
    fn sine_structured(backend) {
        check_rates(backend, Manufactured::Sine, false);
    }

    fn sine_perturbed(backend) {
        check_rates(backend, Manufactured::Sine, true);
    }

    fn exp_sin_structured(backend) {
        check_rates(backend, Manufactured::ExpSin, false);
    }

    fn exp_sin_perturbed(backend) {
        check_rates(backend, Manufactured::ExpSin, true);
    }
}
