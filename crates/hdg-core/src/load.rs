//! The element load vector F_K = (f, phi_i)_K on the host: a backend that cannot evaluate the
//! source itself (a closure is host code) gets the loads from here, the same to the bit on
//! every backend.
use crate::geometry::map_point;
use crate::problem::Source;
use crate::tables::ElementTables;
use crate::Real;

/// The element load F = (f, phi_i)_K by the tables' load quadrature, overwriting `load` (n);
/// `work` is work space (resized to the quadrature points' coordinates and values). The
/// source is evaluated at all points at once ([`Source::evaluate_at`]), then summed point by
/// point.
pub fn element_load<T: Real>(
    t: &ElementTables<T>,
    vertices: &[f64],
    det: T,
    source: &Source,
    work: &mut Vec<f64>,
    load: &mut [T],
) {
    let (n, d) = (t.n, t.dim);
    let rule = &t.load_rule;
    let points = rule.n_points();
    work.resize(points * (d + 1), 0.0);
    let (x, f) = work.split_at_mut(points * d);
    for (q, xq) in x.chunks_exact_mut(d).enumerate() {
        map_point(d, vertices, rule.point(q), xq);
    }
    source.evaluate_at(d, x, f);
    load.iter_mut().for_each(|v| *v = T::zero());
    for (q, &fq) in f.iter().enumerate() {
        let fq = T::from_f64_lossy(rule.weights[q] * fq) * det;
        for (li, &phi) in load.iter_mut().zip(&t.load_basis[q * n..(q + 1) * n]) {
            *li += fq * phi;
        }
    }
}
