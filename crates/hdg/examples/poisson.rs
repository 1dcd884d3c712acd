//! The first solve: -lap u = f on the unit square with u = sin(pi x) sin(pi y), Dirichlet data
//! 0, at order 3 on a generated 32 x 32 mesh. Prints the errors against the exact solution,
//! u_h at the centre and the run's summary (`PipelineReport`'s `Display`).
//!
//! Run with `cargo run --release -p hdg --example poisson`.
use std::f64::consts::PI;

use hdg::mesh::Diagonal;
use hdg::{generate, Problem, Solver};

fn main() -> Result<(), hdg::Error> {
    let mesh = generate::unit_square(32, Diagonal::Right)?;
    let u = |x: &[f64]| (PI * x[0]).sin() * (PI * x[1]).sin();
    let problem = Problem::builder().source(move |x| 2.0 * PI * PI * u(x)).exact(u).build();
    let solution = Solver::new(mesh, problem).order(3).solve()?;

    let errors = solution.errors_against(u)?;
    println!("||u - u_h|| = {:.3e}, ||u - u*|| = {:.3e}", errors.u, errors.u_star);
    let centre = solution.evaluate(&[0.5, 0.5])?.expect("the centre is in the mesh");
    println!("u_h(0.5, 0.5) = {:.10} (exact 1)", centre.u);
    println!("{}", solution.report());
    Ok(())
}
