//! L2 error norms of a solution against an exact one, on the host: per element by the tables'
//! error quadrature, then summed over the mesh. A backend that cannot evaluate the exact
//! solution itself (closures are host code) brings the fields here.
use rayon::prelude::*;

use crate::backend::{ErrorNorms, HostFields};
use crate::discretization::Discretization;
use crate::geometry::{map_point, GeometryLayout};
use crate::problem::{Coefficient, ExactSolution};
use crate::tables::ElementTables;
use crate::Real;

/// Cells per chunk of the error norms' deterministic sum.
const CELLS_PER_SUM: usize = 256;

/// ||u - u_h||, ||q - q_h|| and ||u - u*|| over the mesh: the per-element squares of
/// [`cell_errors`], summed in a fixed order. `geometry` and `cell_vertices` are
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
    let add = |a: [f64; 3], b: &[f64; 3]| [a[0] + b[0], a[1] + b[1], a[2] + b[2]];
    let squares = cell_errors(disc, geometry, cell_vertices, fields, u_star, exact);
    // Fixed chunks summed in order, then the chunks' sums in order: the same sum on every run
    // and thread count (a rayon reduce splits where the threads happen to steal work).
    let chunk_sums: Vec<[f64; 3]> =
        squares.par_chunks(CELLS_PER_SUM).map(|chunk| chunk.iter().fold([0.0; 3], add)).collect();
    let sums = chunk_sums.iter().fold([0.0; 3], add);
    ErrorNorms { u: sums[0].sqrt(), q: sums[1].sqrt(), u_star: sums[2].sqrt() }
}

/// The squared L2 errors of u_h, q_h and u* on every cell (`[cell] = [u, q, u*]`), by the
/// tables' error quadrature; the q entries are NaN for an exact solution without gradient.
pub fn cell_errors<T: Real>(
    disc: &Discretization<'_, T>,
    geometry: &[T],
    cell_vertices: &[f64],
    fields: &HostFields<T>,
    u_star: &[T],
    exact: &ExactSolution,
) -> Vec<[f64; 3]> {
    let t = &disc.tables;
    let (n, d, np) = (t.n, t.dim, t.n_post);
    let stride = GeometryLayout::new(disc.mesh.cell_type()).stride();
    let n_cells = disc.mesh.n_cells();
    let vsz = cell_vertices.len() / n_cells.max(1);
    let basis = PointMajorBasis::new(t);
    let mut squares = vec![[0.0; 3]; n_cells];
    let capture = crate::user_code::Capture::current();
    squares.par_chunks_mut(CELLS_PER_SUM).enumerate().for_each(|(chunk, out)| {
        let mut scratch = ElementScratch::new(t);
        capture.within(|| {
            for (i, slot) in out.iter_mut().enumerate() {
                let e = chunk * CELLS_PER_SUM + i;
                *slot = element_errors(
                    t,
                    &basis,
                    &mut scratch,
                    &geometry[e * stride..(e + 1) * stride],
                    &cell_vertices[e * vsz..(e + 1) * vsz],
                    Kappa { cell: e, value: disc.kappa[e].as_f64(), of: &disc.problem.kappa },
                    &fields.u[e * n..(e + 1) * n],
                    &fields.q[e * d * n..(e + 1) * d * n],
                    &u_star[e * np..(e + 1) * np],
                    exact,
                );
            }
        });
    });
    squares
}

/// The error basis tables transposed, function by function (`[i * points + qp]`): the sums
/// over the basis then run for all points at once, as independent chains the processor
/// overlaps and vectorizes, each point's sum still in the basis order (the same bits).
struct PointMajorBasis<T> {
    points: usize,
    basis: Vec<T>,
    basis_post: Vec<T>,
}

impl<T: Real> PointMajorBasis<T> {
    fn new(t: &ElementTables<T>) -> Self {
        let points = t.error_rule.n_points();
        let transpose = |table: &[T], n: usize| -> Vec<T> {
            (0..n * points).map(|p| table[(p % points) * n + p / points]).collect()
        };
        PointMajorBasis {
            points,
            basis: transpose(&t.error_basis, t.n),
            basis_post: transpose(&t.error_basis_post, t.n_post),
        }
    }
}

/// Per-point values of one element: u_h, the d components of q_h, u* (`[field * points +
/// qp]`).
struct ElementScratch {
    values: Vec<f64>,
    /// The points (`[qp * d + r]`), and the exact u and grad u there.
    x: Vec<f64>,
    u: Vec<f64>,
    grad: Vec<f64>,
}

impl ElementScratch {
    fn new<T: Real>(t: &ElementTables<T>) -> Self {
        let points = t.error_rule.n_points();
        ElementScratch {
            values: vec![0.0; (t.dim + 2) * points],
            x: vec![0.0; t.dim * points],
            u: vec![0.0; points],
            grad: vec![0.0; t.dim * points],
        }
    }
}

/// out[qp] = sum_i basis[i][qp] c[i], summed in the order of i (what `Iterator::sum` over the
/// basis of one point gives: it folds from -0.0).
fn evaluate_at_points<T: Real>(basis: &[T], points: usize, c: &[T], out: &mut [f64]) {
    out.fill(-0.0);
    for (row, &ci) in basis.chunks_exact(points).zip(c) {
        for (o, &p) in out.iter_mut().zip(row) {
            *o += (p * ci).as_f64();
        }
    }
}

/// kappa on one cell: the working-precision value of a constant or per-cell kappa (what the
/// element kernels used), the function itself where it varies inside cells.
struct Kappa<'a> {
    cell: usize,
    value: f64,
    of: &'a Coefficient,
}

impl Kappa<'_> {
    /// The exact flux q = -kappa grad u at `x`, into `q`.
    fn flux(&self, x: &[f64], grad: &[f64], q: &mut [f64]) {
        if self.of.varies_in_cells() {
            self.of.apply(self.cell, x, grad, q);
            q.iter_mut().for_each(|v| *v = -*v);
        } else {
            for (q, g) in q.iter_mut().zip(grad) {
                *q = -self.value * g;
            }
        }
    }
}

/// Squared L2 errors (u, q, u*) on one element against the exact solution.
#[allow(clippy::too_many_arguments)]
fn element_errors<T: Real>(
    t: &ElementTables<T>,
    basis: &PointMajorBasis<T>,
    scratch: &mut ElementScratch,
    geometry: &[T],
    vertices: &[f64],
    kappa: Kappa<'_>,
    u: &[T],
    q: &[T],
    u_star: &[T],
    exact: &ExactSolution,
) -> [f64; 3] {
    let (d, n, points) = (t.dim, t.n, basis.points);
    let det = geometry[GeometryLayout { dim: d, n_faces: t.n_faces }.det()].as_f64();
    let rule = &t.error_rule;
    let (uh, rest) = scratch.values.split_at_mut(points);
    let (qh, us) = rest.split_at_mut(d * points);
    evaluate_at_points(&basis.basis, points, u, uh);
    for r in 0..d {
        let out = &mut qh[r * points..(r + 1) * points];
        evaluate_at_points(&basis.basis, points, &q[r * n..(r + 1) * n], out);
    }
    evaluate_at_points(&basis.basis_post, points, u_star, us);
    let ElementScratch { x, u: exact_u, grad, .. } = scratch;
    for (qp, xq) in x.chunks_exact_mut(d).enumerate() {
        map_point(d, vertices, rule.point(qp), xq);
    }
    exact.u_and_gradient_at(d, x, exact_u, grad);
    let mut flux = [0.0; 3];
    let mut err = [0.0; 3];
    for qp in 0..points {
        let w = rule.weights[qp] * det;
        let (xq, ue) = (&x[qp * d..(qp + 1) * d], exact_u[qp]);
        kappa.flux(xq, &grad[qp * d..(qp + 1) * d], &mut flux[..d]);
        err[0] += w * (ue - uh[qp]).powi(2);
        for r in 0..d {
            err[1] += w * (flux[r] - qh[r * points + qp]).powi(2);
        }
        err[2] += w * (ue - us[qp]).powi(2);
    }
    err
}

/// The componentwise sum of `errors[..cells]`, in cell order.
pub fn sum_first(errors: &[[f64; 3]], cells: usize) -> [f64; 3] {
    errors[..cells.min(errors.len())]
        .iter()
        .fold([0.0; 3], |a, e| [a[0] + e[0], a[1] + e[1], a[2] + e[2]])
}
