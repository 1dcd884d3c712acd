//! The element load vector F_K = (f, phi_i)_K on the host: a backend that cannot evaluate the
//! source itself (a closure is host code) gets the loads from here, the same to the bit on
//! every backend.
use crate::geometry::map_point;
use crate::problem::Source;
use crate::tables::ElementTables;
use crate::Real;

/// The element load F = (f, phi_i)_K by the tables' load quadrature, overwriting `load` (n);
/// `point` (dim) is work space.
pub fn element_load<T: Real>(
    t: &ElementTables<T>,
    vertices: &[f64],
    det: T,
    source: &Source,
    point: &mut [f64],
    load: &mut [T],
) {
    let n = t.n;
    load.iter_mut().for_each(|v| *v = T::zero());
    let rule = &t.load_rule;
    for q in 0..rule.n_points() {
        map_point(t.dim, vertices, rule.point(q), point);
        let fq = T::from_f64_lossy(rule.weights[q] * source.evaluate(point)) * det;
        for (li, &phi) in load.iter_mut().zip(&t.load_basis[q * n..(q + 1) * n]) {
            *li += fq * phi;
        }
    }
}
