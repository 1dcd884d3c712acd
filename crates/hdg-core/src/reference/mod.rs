//! Reference elements: polynomial bases, quadrature and the constant reference matrices.
//!
//! For affine elements every element matrix of the HDG method is one of the constant reference
//! matrices of a [`ReferenceElement`] times geometric factors of the element (Jacobian, face
//! measures, normals). They are computed once, on the host, in `f64`; backends convert them to
//! their own precision.

pub mod jacobi;
pub mod quadrature;
mod symmetric_rules;
pub mod tetrahedron;
pub mod triangle;

pub use jacobi::{
    dubiner_tetrahedron, dubiner_triangle, jacobi, jacobi_derivative, legendre_orthonormal,
};
pub use quadrature::{
    gauss_jacobi, gauss_legendre, segment_rule, smallest_tetrahedron_rule, smallest_triangle_rule,
    tetrahedron_rule, triangle_rule, QuadratureRule,
};
pub use tetrahedron::{ReferenceTetrahedron, MAX_TETRAHEDRON_ORDER};
pub use triangle::{ReferenceTriangle, MAX_REFERENCE_ORDER};

use crate::error::CoreError;
use crate::CellType;
use ndarray::Array2;

/// Constant (reference) data of one element type and one polynomial order.
///
/// Host-side, in `f64`; backends convert to their precision. Everything the element matrices need
/// is one of these constant matrices times geometric factors (affine elements).
///
/// Conventions: `phi_i` (`i < n_volume()`) are the volume basis functions on the reference cell,
/// `mu_m` (`m < n_face()`) the trace basis functions on the face parameter domain, orthonormal
/// there. Local face `f` is parametrised by the face parameter `s` through
/// [`ReferenceElement::face_point`], following the local vertex order
/// `cell_type().face_vertices(f)`; the trace unknowns live in the face's canonical
/// parametrisation, reached through [`ReferenceElement::to_canonical`].
pub trait ReferenceElement: Send + Sync + std::fmt::Debug {
    /// The cell type this reference element describes.
    fn cell_type(&self) -> CellType;
    /// The polynomial order `k` of the volume and trace spaces.
    fn order(&self) -> usize;
    /// `n`: number of volume basis functions.
    fn n_volume(&self) -> usize;
    /// `n_f`: number of trace basis functions on one face.
    fn n_face(&self) -> usize;
    /// Measure of the reference cell (2 for the triangle, 4/3 for the tetrahedron).
    fn reference_measure(&self) -> f64;
    /// Measure of the face parameter domain (2 for `[-1,1]`, 2 for the reference triangle
    /// `(-1,-1), (1,-1), (-1,1)`).
    fn face_parameter_measure(&self) -> f64;
    /// Reference vertex coordinates, vertex-major (triangle: `[-1,-1, 1,-1, -1,1]`; tetrahedron:
    /// `(-1,-1,-1), (1,-1,-1), (-1,1,-1), (-1,-1,1)`).
    fn vertices(&self) -> &[f64];
    /// `D^_s[i][j] = int_{K^} phi_i d_s phi_j`, `s < dim`; `n x n`.
    fn derivative(&self, s: usize) -> &Array2<f64>;
    /// `E^_f[i][j] = int` over the face parameter domain of `phi_i(x_f(s)) phi_j(x_f(s)) ds`;
    /// `n x n`.
    fn face_mass(&self, face: usize) -> &Array2<f64>;
    /// `G^_{f,o}[i][m] = int phi_i(x_f(s)) mu_m(to_canonical(o, s)) ds`; `n x n_f`, for every
    /// local face `f` and orientation `o < cell_type().n_orientations()`.
    fn face_trace(&self, face: usize, orientation: usize) -> &Array2<f64>;
    /// All `n` basis values at a reference point, and optionally the reference gradients laid
    /// out `[s*n + i]` (`d phi_i / d xi_s`).
    fn eval_basis(&self, xi: &[f64], values: &mut [f64], gradients: Option<&mut [f64]>);
    /// The `n_f` trace basis functions (orthonormal on the parameter domain: `H^ = I`) at a
    /// canonical face parameter point.
    fn eval_trace_basis(&self, s: &[f64], values: &mut [f64]);
    /// Reference coordinates of the point with local face parameter `s` on local face `face`: for
    /// the triangle `x_f(s) = (1-s)/2 v_a + (1+s)/2 v_b`, `(a,b) = CellType::face_vertices(f)`;
    /// in general `x_f(s) = sum_i lambda_i(s) v_{face_vertices(f)[i]}` with the barycentric
    /// coordinates of [`face_parameter_barycentric`].
    fn face_point(&self, face: usize, s: &[f64], xi: &mut [f64]);
    /// Canonical face parameter of the local face parameter `s` for orientation code `o`
    /// (triangle: `o = 0 -> s`, `o = 1 -> -s`; tetrahedron: the six vertex permutations of
    /// `CellType::orientation_permutation`).
    fn to_canonical(&self, orientation: usize, s: &[f64], out: &mut [f64]);
    /// Quadrature exact to `degree` on the reference cell, with positive weights and no point on
    /// its boundary (the one with the fewest points the library has).
    fn cell_quadrature(&self, degree: usize) -> QuadratureRule;
    /// Quadrature exact to `degree` on the face parameter domain.
    fn face_quadrature(&self, degree: usize) -> QuadratureRule;
}

/// The reference element of cell type `cell` and polynomial order `order`, boxed behind the
/// trait so that the pipeline is written once for every cell type.
///
/// # Errors
/// [`CoreError::InvalidOrder`] for an order beyond the cell type's largest supported order
/// ([`MAX_REFERENCE_ORDER`] for triangles, [`MAX_TETRAHEDRON_ORDER`] for tetrahedra).
pub fn reference_element(
    cell: CellType,
    order: usize,
) -> Result<Box<dyn ReferenceElement>, CoreError> {
    match cell {
        CellType::Triangle => Ok(Box::new(ReferenceTriangle::new(order)?)),
        CellType::Tetrahedron => Ok(Box::new(ReferenceTetrahedron::new(order)?)),
    }
}

/// Barycentric coordinates of the point `s` of the face parameter domain, the reference simplex
/// of dimension `s.len()` with vertices `w_0 = (-1,..,-1)` and `w_j = w_0 + 2 e_{j-1}`:
/// `lambda_j = (1 + s_{j-1})/2` for `j >= 1` and `lambda_0 = 1 - sum_{j>=1} lambda_j`.
///
/// `lambda` has length `s.len() + 1`. For the segment this is `((1-s)/2, (1+s)/2)`.
pub fn face_parameter_barycentric(s: &[f64], lambda: &mut [f64]) {
    debug_assert_eq!(lambda.len(), s.len() + 1);
    let mut rest = 1.0;
    for (j, sj) in s.iter().enumerate() {
        lambda[j + 1] = 0.5 * (1.0 + sj);
        rest -= lambda[j + 1];
    }
    lambda[0] = rest;
}

/// Coordinate `k` of vertex `c` of the face parameter domain (see
/// [`face_parameter_barycentric`]).
#[inline]
fn face_parameter_vertex(c: usize, k: usize) -> f64 {
    if c == k + 1 {
        1.0
    } else {
        -1.0
    }
}

/// Generic reference point on local face `face` of `cell` for the local face parameter `s`:
/// `x_f(s) = sum_i lambda_i(s) v_{face_vertices(f)[i]}`, the local face vertices taken in their
/// local order (the `i`-th sits at parameter-domain vertex `w_i`).
pub(crate) fn face_point_generic(
    cell: CellType,
    vertices: &[f64],
    face: usize,
    s: &[f64],
    xi: &mut [f64],
) {
    let dim = cell.dim();
    let fv = cell.face_vertices(face);
    let mut lambda = [0.0f64; 4];
    face_parameter_barycentric(s, &mut lambda[..fv.len()]);
    for (k, x) in xi[..dim].iter_mut().enumerate() {
        *x = fv.iter().zip(&lambda).map(|(&v, l)| l * vertices[v * dim + k]).sum();
    }
}

/// Generic map from local to canonical face parameters for orientation code `orientation`.
///
/// The local face vertex `i` is the canonical vertex `perm[i]`, with
/// `perm = cell.orientation_permutation(orientation)`. A point with local barycentric coordinates
/// `lambda` (weight `lambda_i` on local vertex `i`) is therefore the canonical parameter point
/// `sum_i lambda_i w_{perm[i]}`. Written with barycentric coordinates so that the same code
/// serves the six orientations of a triangular face.
///
/// The map is affine, `out = c + A s`; `c` and the columns of `A` are evaluated from the
/// barycentric formula at `s = 0` and `s = e_j`, where every quantity is a small dyadic number
/// and hence exact. Applying `c + A s` (entries of `A` in `{-1, 0, 1}`) rather than summing
/// barycentric terms at `s` keeps the identity and the reversal exact (`s -> s`, `s -> -s`
/// bit for bit), so both sides of a face see identical canonical points.
pub(crate) fn to_canonical_generic(cell: CellType, orientation: usize, s: &[f64], out: &mut [f64]) {
    let perm = cell.orientation_permutation(orientation as u8);
    let m = perm.len();
    let face_dim = m - 1;
    debug_assert!(s.len() >= face_dim && out.len() >= face_dim);
    // Coordinate k of the canonical point of the local parameter point `t`.
    let canonical = |t: &[f64], k: usize| -> f64 {
        let mut lambda = [0.0f64; 4];
        face_parameter_barycentric(t, &mut lambda[..m]);
        perm.iter().zip(&lambda).map(|(&c, l)| l * face_parameter_vertex(c, k)).sum()
    };
    let mut t = [0.0f64; 3];
    for (k, o) in out[..face_dim].iter_mut().enumerate() {
        let c = canonical(&t[..face_dim], k);
        let mut acc = c;
        for (j, sj) in s[..face_dim].iter().enumerate() {
            t[j] = 1.0;
            let a = canonical(&t[..face_dim], k) - c;
            t[j] = 0.0;
            if a != 0.0 {
                acc += a * sj;
            }
        }
        *o = acc;
    }
}

/// The reference matrices of one element type (see [`ReferenceElement`]): `derivative[s]`,
/// `face_mass[f]`, `face_trace[f][o]`.
#[derive(Clone, Debug)]
pub(crate) struct ReferenceMatrices {
    pub(crate) derivative: Vec<Array2<f64>>,
    pub(crate) face_mass: Vec<Array2<f64>>,
    pub(crate) face_trace: Vec<Vec<Array2<f64>>>,
}

/// Computes the reference matrices of `cell` once for every element type, with the volume
/// basis `volume(xi, values, gradients)` (`n` functions, gradients laid out `[s*n + i]`) and
/// the trace basis `trace(s, values)` (`n_face` functions on the face parameter domain).
/// `cell_rule` and `face_rule` must integrate the products exactly (degree `2k`).
///
/// Every matrix is written as a product of (points x functions) tables, `(W V)^T G`, so that
/// the O(points n^2) work is one matrix product per matrix rather than a scalar triple loop:
/// this dominates the construction time at high order.
pub(crate) fn reference_matrices(
    cell: CellType,
    vertices: &[f64],
    (n, n_face): (usize, usize),
    (cell_rule, face_rule): (&QuadratureRule, &QuadratureRule),
    volume: impl Fn(&[f64], &mut [f64], Option<&mut [f64]>),
    trace: impl Fn(&[f64], &mut [f64]),
) -> ReferenceMatrices {
    let dim = cell.dim();
    // D^_s[i][j] = int phi_i d_s phi_j.
    let n_points = cell_rule.n_points();
    let mut weighted = Array2::<f64>::zeros((n_points, n));
    let mut grads: Vec<Array2<f64>> = (0..dim).map(|_| Array2::zeros((n_points, n))).collect();
    let (mut values, mut gradient) = (vec![0.0; n], vec![0.0; dim * n]);
    for q in 0..n_points {
        volume(cell_rule.point(q), &mut values, Some(&mut gradient));
        let w = cell_rule.weights[q];
        for (dst, v) in weighted.row_mut(q).iter_mut().zip(&values) {
            *dst = w * v;
        }
        for (s, g) in grads.iter_mut().enumerate() {
            g.row_mut(q).assign(&ndarray::ArrayView1::from(&gradient[s * n..(s + 1) * n]));
        }
    }
    let derivative = grads.iter().map(|g| weighted.t().dot(g)).collect();

    // E^_f = int phi_i phi_j and G^_{f,o} = int phi_i mu_m(to_canonical(o, s)) over the face
    // parameter domain. The trace basis at the canonical image of a face point depends on the
    // orientation only, not on the face: tabulated once per orientation.
    let n_fp = face_rule.n_points();
    let mut canonical = [0.0; 2];
    let mu: Vec<Array2<f64>> = (0..cell.n_orientations())
        .map(|o| {
            let mut table = Array2::<f64>::zeros((n_fp, n_face));
            for q in 0..n_fp {
                let s = face_rule.point(q);
                to_canonical_generic(cell, o, s, &mut canonical[..s.len()]);
                trace(&canonical[..s.len()], table.row_mut(q).into_slice().expect("row-major"));
            }
            table
        })
        .collect();
    let mut face_values = Array2::<f64>::zeros((n_fp, n));
    let mut face_weighted = Array2::<f64>::zeros((n_fp, n));
    let mut xi = [0.0; 3];
    let (mut face_mass, mut face_trace) = (Vec::new(), Vec::new());
    for f in 0..cell.faces_per_cell() {
        for q in 0..n_fp {
            face_point_generic(cell, vertices, f, face_rule.point(q), &mut xi);
            let row = face_values.row_mut(q).into_slice().expect("row-major");
            volume(&xi[..dim], row, None);
            let w = face_rule.weights[q];
            for (dst, v) in face_weighted.row_mut(q).iter_mut().zip(face_values.row(q)) {
                *dst = w * v;
            }
        }
        face_mass.push(face_weighted.t().dot(&face_values));
        face_trace.push(mu.iter().map(|mu_o| face_weighted.t().dot(mu_o)).collect());
    }
    ReferenceMatrices { derivative, face_mass, face_trace }
}

/// Helpers shared by the tests of this module.
#[cfg(test)]
pub(crate) mod test_util {
    /// Deterministic pseudo-random numbers in `[0, 1)` (xorshift64*), so the tests need no crate.
    pub(crate) struct Rng(u64);

    impl Rng {
        /// A generator from a seed.
        pub(crate) fn new(seed: u64) -> Self {
            Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
        }

        /// The next number in `[0, 1)`.
        pub(crate) fn next_f64(&mut self) -> f64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            let v = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
            (v >> 11) as f64 / (1u64 << 53) as f64
        }

        /// A point strictly inside the reference triangle, at least `margin` from the edges
        /// `x = -1`, `y = -1` and (in `x + y`) from the hypotenuse.
        pub(crate) fn triangle_point(&mut self, margin: f64) -> (f64, f64) {
            loop {
                let x = -1.0 + 2.0 * self.next_f64();
                let y = -1.0 + 2.0 * self.next_f64();
                if x > -1.0 + margin && y > -1.0 + margin && x + y < -margin {
                    return (x, y);
                }
            }
        }

        /// A point strictly inside the reference tetrahedron, at least `margin` from the faces
        /// `x = -1`, `y = -1`, `z = -1` and (in `x + y + z`) from the slanted face.
        pub(crate) fn tetrahedron_point(&mut self, margin: f64) -> [f64; 3] {
            loop {
                let p = [0, 1, 2].map(|_| -1.0 + 2.0 * self.next_f64());
                if p.iter().all(|c| *c > -1.0 + margin) && p[0] + p[1] + p[2] < -1.0 - margin {
                    return p;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn to_canonical_segment_orientations() {
        for &s in &[-1.0, -0.4, 0.0, 0.7, 1.0] {
            let mut out = [0.0];
            to_canonical_generic(CellType::Triangle, 0, &[s], &mut out);
            assert!((out[0] - s).abs() < 1e-15);
            to_canonical_generic(CellType::Triangle, 1, &[s], &mut out);
            assert!((out[0] + s).abs() < 1e-15);
        }
    }

    #[test]
    fn to_canonical_triangle_faces_map_vertices_consistently() {
        // For a triangular face (tetrahedra): local vertex i must land on canonical vertex
        // perm[i], and the map must be affine (midpoints go to midpoints).
        let w = [[-1.0, -1.0], [1.0, -1.0], [-1.0, 1.0]];
        for code in 0..6 {
            let perm = CellType::Tetrahedron.orientation_permutation(code as u8);
            for i in 0..3 {
                let mut out = [0.0; 2];
                to_canonical_generic(CellType::Tetrahedron, code, &w[i], &mut out);
                assert_eq!(out, w[perm[i]], "code {code} vertex {i}");
            }
            let mid = [0.0, -1.0];
            let mut out = [0.0; 2];
            to_canonical_generic(CellType::Tetrahedron, code, &mid, &mut out);
            let want =
                [0.5 * (w[perm[0]][0] + w[perm[1]][0]), 0.5 * (w[perm[0]][1] + w[perm[1]][1])];
            assert_eq!(out, want);
        }
    }

    #[test]
    fn reference_element_dispatches_on_cell_type() {
        let e = reference_element(CellType::Triangle, 3).unwrap();
        assert_eq!(e.cell_type(), CellType::Triangle);
        assert_eq!((e.order(), e.n_volume(), e.n_face()), (3, 10, 4));
        assert!(matches!(
            reference_element(CellType::Triangle, MAX_REFERENCE_ORDER + 1),
            Err(CoreError::InvalidOrder { .. })
        ));
        let e = reference_element(CellType::Tetrahedron, 2).unwrap();
        assert_eq!(e.cell_type(), CellType::Tetrahedron);
        assert_eq!((e.order(), e.n_volume(), e.n_face()), (2, 10, 6));
        assert_eq!(e.face_trace(3, 5).dim(), (10, 6));
        assert!(matches!(
            reference_element(CellType::Tetrahedron, MAX_TETRAHEDRON_ORDER + 1),
            Err(CoreError::InvalidOrder { .. })
        ));
    }
}
