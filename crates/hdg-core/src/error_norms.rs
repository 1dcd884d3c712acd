//! L2 error norms of a solution against an exact one, on the host: per element by the tables'
//! error quadrature, then summed over the mesh. A backend that cannot evaluate the exact
//! solution itself (closures are host code) brings the fields here.
use rayon::prelude::*;

use crate::backend::{ErrorNorms, HostFields};
use crate::discretization::Discretization;
use crate::geometry::{map_point, GeometryLayout};
use crate::problem::ExactSolution;
use crate::tables::ElementTables;
use crate::Real;

/// Cells per chunk of the error norms' deterministic sum.
const CELLS_PER_SUM: usize = 256;

/// ||u - u_h||, ||q - q_h|| and ||u - u*|| over the mesh: the per-element squares of
/// [`element_errors`], summed in parallel in a fixed order. `geometry` and `cell_vertices` are
/// [`crate::geometry::mesh_geometry`]'s, `fields` and `u_star` the solution's coefficients,
/// cell by cell.
pub fn error_norms<T: Real>(
    disc: &Discretization<'_, T>,
    geometry: &[T],
    cell_vertices: &[f64],
    fields: &HostFields<T>,
    u_star: &[T],
    exact: &ExactSolution,
) -> ErrorNorms {
    let t = &disc.tables;
    let (n, d, np) = (t.n, t.dim, t.n_post);
    let stride = GeometryLayout::new(disc.mesh.cell_type()).stride();
    let n_cells = disc.mesh.n_cells();
    let vsz = cell_vertices.len() / n_cells.max(1);
    let add = |a: [f64; 3], b: [f64; 3]| [a[0] + b[0], a[1] + b[1], a[2] + b[2]];
    // Fixed chunks summed in order, then the chunks' sums in order: the same sum on every run
    // and thread count (a rayon reduce splits where the threads happen to steal work).
    let chunk_sums: Vec<[f64; 3]> = (0..n_cells.div_ceil(CELLS_PER_SUM))
        .into_par_iter()
        .map(|chunk| {
            (chunk * CELLS_PER_SUM..((chunk + 1) * CELLS_PER_SUM).min(n_cells))
                .map(|e| {
                    element_errors(
                        t,
                        &geometry[e * stride..(e + 1) * stride],
                        &cell_vertices[e * vsz..(e + 1) * vsz],
                        disc.kappa[e].as_f64(),
                        &fields.u[e * n..(e + 1) * n],
                        &fields.q[e * d * n..(e + 1) * d * n],
                        &u_star[e * np..(e + 1) * np],
                        exact,
                    )
                })
                .fold([0.0; 3], add)
        })
        .collect();
    let sums = chunk_sums.into_iter().fold([0.0; 3], add);
    ErrorNorms { u: sums[0].sqrt(), q: sums[1].sqrt(), u_star: sums[2].sqrt() }
}

/// Squared L2 errors (u, q, u*) on one element against the exact solution.
#[allow(clippy::too_many_arguments)]
pub fn element_errors<T: Real>(
    t: &ElementTables<T>,
    geometry: &[T],
    vertices: &[f64],
    kappa: f64,
    u: &[T],
    q: &[T],
    u_star: &[T],
    exact: &ExactSolution,
) -> [f64; 3] {
    let (d, n, np) = (t.dim, t.n, t.n_post);
    let det = geometry[GeometryLayout { dim: d, n_faces: t.n_faces }.det()].as_f64();
    let rule = &t.error_rule;
    let mut x = [0.0; 3];
    let mut grad = [0.0; 3];
    let mut err = [0.0; 3];
    for qp in 0..rule.n_points() {
        map_point(d, vertices, rule.point(qp), &mut x[..d]);
        let phi = &t.error_basis[qp * n..(qp + 1) * n];
        let phi_post = &t.error_basis_post[qp * np..(qp + 1) * np];
        let w = rule.weights[qp] * det;
        let ue = exact.u_and_gradient(&x[..d], &mut grad[..d]);
        let uh: f64 = phi.iter().zip(u).map(|(&p, &c)| (p * c).as_f64()).sum();
        err[0] += w * (ue - uh).powi(2);
        for r in 0..d {
            let qh: f64 =
                phi.iter().zip(&q[r * n..(r + 1) * n]).map(|(&p, &c)| (p * c).as_f64()).sum();
            err[1] += w * (-kappa * grad[r] - qh).powi(2);
        }
        let us: f64 = phi_post.iter().zip(u_star).map(|(&p, &c)| (p * c).as_f64()).sum();
        err[2] += w * (ue - us).powi(2);
    }
    err
}
