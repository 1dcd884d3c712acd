//! Numbers from a solution, as NGSolve's `Integrate` or FEniCS's `assemble` give them: the
//! integral of u_h and u* over the domain, the outward flux of q = -kappa grad u through the
//! boundary, and the least and greatest values of u_h. For u = sin(pi x) sin(pi y) the exact
//! values are 4 / pi^2, 8 (the integral of f = 2 pi^2 u), 0 and 1.
//!
//! Run with `cargo run --release -p hdg --example functionals`.
use std::f64::consts::PI;

use hdg::functionals::{boundary_flux, extrema, integral, Boundary, Field};
use hdg::mesh::{Diagonal, TAG_RIGHT};
use hdg::{generate, Problem, Solver};

fn main() -> Result<(), hdg::Error> {
    let mesh = generate::unit_square(16, Diagonal::Right)?;
    let problem = Problem::builder()
        .source(|x| 2.0 * PI * PI * (PI * x[0]).sin() * (PI * x[1]).sin())
        .build();
    let solution = Solver::new(mesh, problem).order(3).solve()?;

    println!(
        "integral of u_h: {:.10} (exact {:.10})",
        integral(&solution, Field::U),
        4.0 / (PI * PI)
    );
    println!("integral of u*:  {:.10}", integral(&solution, Field::UStar));
    println!(
        "outward flux of q, whole boundary: {:.10} (exact 8)",
        boundary_flux(&solution, Boundary::All)?
    );
    println!(
        "outward flux of q, side x = 1:     {:.10} (exact 2)",
        boundary_flux(&solution, Boundary::Tag(TAG_RIGHT))?
    );
    let range = extrema(&solution, Field::U);
    println!(
        "u_h from {:.3e} at {:?} to {:.10} at {:?} (sampled at quadrature points and vertices)",
        range.min.value,
        &range.min.at[..2],
        range.max.value,
        &range.max.at[..2]
    );
    Ok(())
}
