//! The reference tetrahedron `(-1,-1,-1), (1,-1,-1), (-1,1,-1), (-1,-1,1)` with the orthonormal
//! Dubiner basis in the volume and the orthonormal Dubiner triangle basis on the faces.

use ndarray::Array2;

use super::jacobi::{
    dubiner_count, dubiner_tetrahedron_count, dubiner_tetrahedron_impl, dubiner_triangle_impl,
};
use super::quadrature::{
    smallest_tetrahedron_rule, tetrahedron_rule, triangle_rule, QuadratureRule,
};
use super::{
    face_point_generic, reference_matrices, to_canonical_generic, ReferenceElement,
    ReferenceMatrices,
};
use crate::error::CoreError;
use crate::CellType;

/// Largest supported polynomial order of the tetrahedron.
///
/// The recurrences and the Gauss rules stay accurate beyond; the limit keeps the precomputed
/// matrices (`n = 816` functions at order 15: seven `n x n` derivative and face mass matrices and
/// 24 `n x 136` trace matrices, about 60 MB) and their construction time (about a second at
/// order 15, 0.1 s at order 11, growing like `k^9`) reasonable. The pipeline needs order `k + 1`
/// for postprocessing, so this must exceed the pipeline's largest order.
pub const MAX_TETRAHEDRON_ORDER: usize = 15;

/// Reference vertex coordinates, vertex-major.
const VERTICES: [f64; 12] = [-1.0, -1.0, -1.0, 1.0, -1.0, -1.0, -1.0, 1.0, -1.0, -1.0, -1.0, 1.0];

/// The reference tetrahedron of order `k`: volume space `P_k` with the orthonormal Dubiner basis,
/// trace space `P_k` on each triangular face with the orthonormal Dubiner triangle basis on the
/// face parameter domain (the reference triangle `(-1,-1), (1,-1), (-1,1)`, measure 2), and the
/// precomputed reference matrices.
///
/// All matrices are computed in [`ReferenceTetrahedron::new`] with quadrature exact for their
/// integrands (degree `2k`), so they are exact to rounding.
#[derive(Clone, Debug)]
pub struct ReferenceTetrahedron {
    order: usize,
    n_volume: usize,
    n_face: usize,
    /// `D^_x`, `D^_y`, `D^_z`; `E^_f`, `f = 0..4`; `G^_{f,o}`, `f = 0..4`, `o = 0..6`.
    matrices: ReferenceMatrices,
}

impl ReferenceTetrahedron {
    /// The reference tetrahedron of order `order`, with all reference matrices precomputed.
    ///
    /// # Errors
    /// [`CoreError::InvalidOrder`] if `order > MAX_TETRAHEDRON_ORDER`.
    pub fn new(order: usize) -> Result<Self, CoreError> {
        if order > MAX_TETRAHEDRON_ORDER {
            return Err(CoreError::InvalidOrder { order, min: 0, max: MAX_TETRAHEDRON_ORDER });
        }
        let n = dubiner_tetrahedron_count(order);
        let n_face = dubiner_count(order);

        // Integrands of degree 2k - 1 (derivatives) and 2k (faces).
        let matrices = reference_matrices(
            CellType::Tetrahedron,
            &VERTICES,
            (n, n_face),
            (&tetrahedron_rule(2 * order), &triangle_rule(2 * order)),
            |xi, values, gradients| {
                let point = [xi[0], xi[1], xi[2]];
                match gradients {
                    Some(g) => {
                        let (gx, rest) = g.split_at_mut(n);
                        let (gy, gz) = rest.split_at_mut(n);
                        dubiner_tetrahedron_impl(order, point, values, Some([gx, gy, gz]));
                    }
                    None => dubiner_tetrahedron_impl(order, point, values, None),
                }
            },
            |s, values| dubiner_triangle_impl(order, s[0], s[1], values, None),
        );
        Ok(ReferenceTetrahedron { order, n_volume: n, n_face, matrices })
    }
}

impl ReferenceElement for ReferenceTetrahedron {
    fn cell_type(&self) -> CellType {
        CellType::Tetrahedron
    }

    fn order(&self) -> usize {
        self.order
    }

    fn n_volume(&self) -> usize {
        self.n_volume
    }

    fn n_face(&self) -> usize {
        self.n_face
    }

    fn reference_measure(&self) -> f64 {
        4.0 / 3.0
    }

    fn face_parameter_measure(&self) -> f64 {
        2.0
    }

    fn vertices(&self) -> &[f64] {
        &VERTICES
    }

    fn derivative(&self, s: usize) -> &Array2<f64> {
        &self.matrices.derivative[s]
    }

    fn face_mass(&self, face: usize) -> &Array2<f64> {
        &self.matrices.face_mass[face]
    }

    fn face_trace(&self, face: usize, orientation: usize) -> &Array2<f64> {
        &self.matrices.face_trace[face][orientation]
    }

    fn eval_basis(&self, xi: &[f64], values: &mut [f64], gradients: Option<&mut [f64]>) {
        let n = self.n_volume;
        let point = [xi[0], xi[1], xi[2]];
        match gradients {
            Some(g) => {
                let (gx, rest) = g.split_at_mut(n);
                let (gy, rest) = rest.split_at_mut(n);
                dubiner_tetrahedron_impl(self.order, point, values, Some([gx, gy, &mut rest[..n]]));
            }
            None => dubiner_tetrahedron_impl(self.order, point, values, None),
        }
    }

    fn eval_trace_basis(&self, s: &[f64], values: &mut [f64]) {
        dubiner_triangle_impl(self.order, s[0], s[1], values, None);
    }

    fn face_point(&self, face: usize, s: &[f64], xi: &mut [f64]) {
        face_point_generic(CellType::Tetrahedron, &VERTICES, face, s, xi);
    }

    fn to_canonical(&self, orientation: usize, s: &[f64], out: &mut [f64]) {
        to_canonical_generic(CellType::Tetrahedron, orientation, s, out);
    }

    fn cell_quadrature(&self, degree: usize) -> QuadratureRule {
        smallest_tetrahedron_rule(degree)
    }

    fn face_quadrature(&self, degree: usize) -> QuadratureRule {
        triangle_rule(degree)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::face_parameter_barycentric;
    use crate::reference::jacobi::{dubiner_tetrahedron, dubiner_triangle};
    use crate::reference::test_util::Rng;
    use crate::tables::ElementTables;

    /// The reference vertices, written out.
    const V: [[f64; 3]; 4] =
        [[-1.0, -1.0, -1.0], [1.0, -1.0, -1.0], [-1.0, 1.0, -1.0], [-1.0, -1.0, 1.0]];

    /// Vertices of the face parameter domain (the reference triangle), written out.
    const W: [[f64; 2]; 3] = [[-1.0, -1.0], [1.0, -1.0], [-1.0, 1.0]];

    /// Local face vertex order, written out (face f opposite vertex f), to check the mesh's
    /// `CellType::face_vertices` against.
    const FACES: [[usize; 3]; 4] = [[1, 2, 3], [0, 3, 2], [0, 1, 3], [0, 2, 1]];

    /// Outward unit normals and areas of the reference faces: face 0 is the slanted face
    /// x + y + z = -1 (an equilateral triangle of side 2 sqrt(2)), faces 1..3 are the right
    /// triangles x = -1, y = -1, z = -1 with legs 2.
    fn normals_and_areas() -> ([[f64; 3]; 4], [f64; 4]) {
        let r = 1.0 / 3f64.sqrt();
        (
            [[r, r, r], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, -1.0]],
            [2.0 * 3f64.sqrt(), 2.0, 2.0, 2.0],
        )
    }

    fn max_abs_diff(a: &Array2<f64>, b: &Array2<f64>) -> f64 {
        assert_eq!(a.dim(), b.dim());
        a.iter().zip(b.iter()).fold(0.0, |m, (x, y)| m.max((x - y).abs()))
    }

    /// Explicit reference point of face `f` at local parameter `s` (not the generic helper).
    fn explicit_face_point(f: usize, s: &[f64]) -> [f64; 3] {
        let l1 = 0.5 * (1.0 + s[0]);
        let l2 = 0.5 * (1.0 + s[1]);
        let l0 = 1.0 - l1 - l2;
        let [a, b, c] = FACES[f].map(|v| V[v]);
        [0, 1, 2].map(|k| l0 * a[k] + l1 * b[k] + l2 * c[k])
    }

    /// Explicit canonical point of the local parameter `s` for orientation `o`: local vertex `i`
    /// is canonical vertex `perm[i]`, so the point with local barycentric weights `l_i` is
    /// `sum_i l_i W[perm[i]]` (not the generic helper, which uses an affine form).
    fn explicit_canonical(o: usize, s: &[f64]) -> [f64; 2] {
        let perm = CellType::Tetrahedron.orientation_permutation(o as u8);
        let l =
            [1.0 - 0.5 * (1.0 + s[0]) - 0.5 * (1.0 + s[1]), 0.5 * (1.0 + s[0]), 0.5 * (1.0 + s[1])];
        [0, 1].map(|k| (0..3).map(|i| l[i] * W[perm[i]][k]).sum())
    }

    #[test]
    fn new_accepts_orders_up_to_max_and_rejects_beyond() {
        let r0 = ReferenceTetrahedron::new(0).unwrap();
        assert_eq!((r0.n_volume(), r0.n_face()), (1, 1));
        assert_eq!(r0.derivative(2).dim(), (1, 1));
        assert_eq!(r0.derivative(2)[[0, 0]], 0.0);
        // phi_0 = sqrt(3)/2, mu_0 = 1/sqrt(2), parameter measure 2: E = 3/4 * 2, G = sqrt(3/2).
        for f in 0..4 {
            assert!((r0.face_mass(f)[[0, 0]] - 1.5).abs() < 1e-15);
            for o in 0..6 {
                assert!((r0.face_trace(f, o)[[0, 0]] - 1.5f64.sqrt()).abs() < 1e-15);
            }
        }
        let rmax = ReferenceTetrahedron::new(MAX_TETRAHEDRON_ORDER).unwrap();
        assert_eq!((rmax.n_volume(), rmax.n_face()), (816, 136));
        assert_eq!(rmax.face_trace(3, 5).dim(), (816, 136));
        assert!(rmax.derivative(1).iter().all(|x| x.is_finite()));
        assert_eq!(
            ReferenceTetrahedron::new(MAX_TETRAHEDRON_ORDER + 1).unwrap_err(),
            CoreError::InvalidOrder {
                order: MAX_TETRAHEDRON_ORDER + 1,
                min: 0,
                max: MAX_TETRAHEDRON_ORDER
            }
        );
    }

    #[test]
    fn metadata_and_face_points() {
        let r = ReferenceTetrahedron::new(2).unwrap();
        assert_eq!(r.cell_type(), CellType::Tetrahedron);
        assert_eq!(r.order(), 2);
        assert_eq!((r.n_volume(), r.n_face()), (10, 6));
        assert_eq!(r.reference_measure(), 4.0 / 3.0);
        assert_eq!(r.face_parameter_measure(), 2.0);
        assert_eq!(r.vertices(), V.concat().as_slice());
        for f in 0..4 {
            let fv = CellType::Tetrahedron.face_vertices(f);
            assert_eq!(fv, &FACES[f][..]);
            assert!(!fv.contains(&f), "face {f} is opposite vertex {f}");
            // The parameter-domain vertices w_i go to the local face vertices in order.
            for (i, w) in W.iter().enumerate() {
                let mut xi = [0.0; 3];
                r.face_point(f, w, &mut xi);
                assert_eq!(xi, V[fv[i]], "face {f} vertex {i}");
            }
            // An interior parameter point: the affine combination, and on the face (the
            // barycentric coordinate of the opposite vertex vanishes).
            let s = [-0.3, 0.1];
            let mut xi = [0.0; 3];
            r.face_point(f, &s, &mut xi);
            let want = explicit_face_point(f, &s);
            for k in 0..3 {
                assert!((xi[k] - want[k]).abs() < 1e-15);
            }
            let lambda = [-0.5 * (1.0 + xi[0] + xi[1] + xi[2]), 0.5 * (1.0 + xi[0])];
            let lambda = [lambda[0], lambda[1], 0.5 * (1.0 + xi[1]), 0.5 * (1.0 + xi[2])];
            assert!(lambda[f].abs() < 1e-15, "face {f}: {lambda:?}");
        }
        // to_canonical: code 0 is the identity, every code maps the parameter vertices by its
        // permutation.
        let mut out = [0.0; 2];
        r.to_canonical(0, &[0.3, -0.6], &mut out);
        assert_eq!(out, [0.3, -0.6]);
        for o in 0..6 {
            let perm = CellType::Tetrahedron.orientation_permutation(o as u8);
            for i in 0..3 {
                r.to_canonical(o, &W[i], &mut out);
                assert_eq!(out, W[perm[i]]);
            }
        }
        // The quadratures are the ones of the quadrature module (cells: the symmetric rule).
        assert_eq!(r.cell_quadrature(7).n_points(), 35);
        assert_eq!(r.cell_quadrature(7).dim, 3);
        assert_eq!(r.face_quadrature(7).n_points(), 16);
        assert_eq!(r.face_quadrature(7).dim, 2);
    }

    #[test]
    fn eval_basis_matches_dubiner_with_gradient_layout() {
        let order = 4;
        let r = ReferenceTetrahedron::new(order).unwrap();
        let n = r.n_volume();
        let mut rng = Rng::new(3);
        for _ in 0..5 {
            let [x, y, z] = rng.tetrahedron_point(0.0);
            let [mut v, mut dx, mut dy, mut dz] = [0, 1, 2, 3].map(|_| vec![0.0; n]);
            dubiner_tetrahedron(order, x, y, z, &mut v, &mut dx, &mut dy, &mut dz);
            let mut v2 = vec![0.0; n];
            let mut g = vec![0.0; 3 * n];
            r.eval_basis(&[x, y, z], &mut v2, Some(&mut g));
            assert_eq!(v, v2);
            assert_eq!(&g[..n], &dx[..]);
            assert_eq!(&g[n..2 * n], &dy[..]);
            assert_eq!(&g[2 * n..], &dz[..]);
            let mut v3 = vec![0.0; n];
            r.eval_basis(&[x, y, z], &mut v3, None);
            assert_eq!(v, v3);
        }
        // The trace basis is the orthonormal Dubiner triangle basis of the parameter domain.
        let nf = r.n_face();
        let (mut mu, mut t, mut tx, mut ty) =
            (vec![0.0; nf], vec![0.0; nf], vec![0.0; nf], vec![0.0; nf]);
        r.eval_trace_basis(&[0.25, -0.5], &mut mu);
        dubiner_triangle(order, 0.25, -0.5, &mut t, &mut tx, &mut ty);
        assert_eq!(mu, t);
        assert!((mu[0] - std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-15);
    }

    #[test]
    fn derivative_matrices_match_finite_difference_quadrature() {
        let h = 1e-6;
        for order in 1..=4 {
            let r = ReferenceTetrahedron::new(order).unwrap();
            let n = r.n_volume();
            // A different (higher) rule than the one new() uses, and no analytic gradients.
            let rule = tetrahedron_rule(2 * order + 3);
            let mut fd: [Array2<f64>; 3] = std::array::from_fn(|_| Array2::zeros((n, n)));
            let (mut v, mut vp, mut vm) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
            for q in 0..rule.n_points() {
                let p = rule.point(q);
                r.eval_basis(p, &mut v, None);
                for (s, mat) in fd.iter_mut().enumerate() {
                    let mut xp = [p[0], p[1], p[2]];
                    let mut xm = xp;
                    xp[s] += h;
                    xm[s] -= h;
                    r.eval_basis(&xp, &mut vp, None);
                    r.eval_basis(&xm, &mut vm, None);
                    for i in 0..n {
                        for j in 0..n {
                            mat[[i, j]] += rule.weights[q] * v[i] * (vp[j] - vm[j]) / (2.0 * h);
                        }
                    }
                }
            }
            for (s, mat) in fd.iter().enumerate() {
                let scale = r.derivative(s).iter().fold(1.0f64, |m, x| m.max(x.abs()));
                let err = max_abs_diff(r.derivative(s), mat);
                assert!(err < 1e-6 * scale, "order {order} s {s}: {err:e}");
            }
        }
    }

    #[test]
    fn integration_by_parts_identity() {
        // D^_s + D^_s^T = sum_f n_{f,s} |f|/2 E^_f: the boundary term of int d_s(phi_i phi_j),
        // the face integrals taken over the parameter domain (measure 2) hence the |f|/2.
        let (normals, areas) = normals_and_areas();
        for order in 0..=11 {
            let r = ReferenceTetrahedron::new(order).unwrap();
            for s in 0..3 {
                let d = r.derivative(s);
                let lhs = d + &d.t();
                let mut rhs = Array2::<f64>::zeros(lhs.dim());
                for f in 0..4 {
                    rhs.scaled_add(
                        normals[f][s] * areas[f] / r.face_parameter_measure(),
                        r.face_mass(f),
                    );
                }
                let err = max_abs_diff(&lhs, &rhs);
                assert!(err < 1e-11, "order {order} s {s}: {err:e}");
                if order >= 1 {
                    assert!(d.iter().any(|x| x.abs() > 0.1), "D_{s} should not vanish");
                }
            }
        }
    }

    /// Direct evaluation of E^_f and G^_{f,o} with a higher rule and the explicit
    /// parametrisations written in this test (not the generic helpers).
    #[test]
    fn face_matrices_match_direct_high_order_quadrature() {
        for order in [0, 1, 2, 5] {
            let r = ReferenceTetrahedron::new(order).unwrap();
            let n = r.n_volume();
            let nf = r.n_face();
            let rule = triangle_rule(2 * order + 6);
            let [mut v, mut dx, mut dy, mut dz] = [0, 1, 2, 3].map(|_| vec![0.0; n]);
            let (mut mu, mut mx, mut my) = (vec![0.0; nf], vec![0.0; nf], vec![0.0; nf]);
            for f in 0..4 {
                let mut e = Array2::<f64>::zeros((n, n));
                let mut g: [Array2<f64>; 6] = std::array::from_fn(|_| Array2::zeros((n, nf)));
                for q in 0..rule.n_points() {
                    let s = rule.point(q);
                    let w = rule.weights[q];
                    let [x, y, z] = explicit_face_point(f, s);
                    dubiner_tetrahedron(order, x, y, z, &mut v, &mut dx, &mut dy, &mut dz);
                    for i in 0..n {
                        for j in 0..n {
                            e[[i, j]] += w * v[i] * v[j];
                        }
                    }
                    for (o, go) in g.iter_mut().enumerate() {
                        let c = explicit_canonical(o, s);
                        dubiner_triangle(order, c[0], c[1], &mut mu, &mut mx, &mut my);
                        for i in 0..n {
                            for m in 0..nf {
                                go[[i, m]] += w * v[i] * mu[m];
                            }
                        }
                    }
                }
                let err = max_abs_diff(r.face_mass(f), &e);
                assert!(err < 1e-12, "order {order} E_{f}: {err:e}");
                for (o, go) in g.iter().enumerate() {
                    let err = max_abs_diff(r.face_trace(f, o), go);
                    assert!(err < 1e-12, "order {order} G_{f},{o}: {err:e}");
                }
            }
        }
    }

    #[test]
    fn trace_projection_reproduces_face_restriction() {
        // phi_i restricted to a face is a polynomial of degree <= k in s, so its projection onto
        // the trace space reproduces it: sum_m G[i][m] mu_m(to_canonical(o, s)) = phi_i(x_f(s)),
        // for every face and orientation, at the parameter vertices too.
        let points =
            [[-1.0, -1.0], [1.0, -1.0], [-1.0, 1.0], [-0.2, -0.7], [0.3, -0.4], [-0.9, 0.5]];
        for order in [0, 1, 3, 6] {
            let r = ReferenceTetrahedron::new(order).unwrap();
            let n = r.n_volume();
            let nf = r.n_face();
            let mut v = vec![0.0; n];
            let mut mu = vec![0.0; nf];
            for f in 0..4 {
                for o in 0..6 {
                    let g = r.face_trace(f, o);
                    for s in &points {
                        let mut xi = [0.0; 3];
                        r.face_point(f, s, &mut xi);
                        r.eval_basis(&xi, &mut v, None);
                        let mut sc = [0.0; 2];
                        r.to_canonical(o, s, &mut sc);
                        r.eval_trace_basis(&sc, &mut mu);
                        for i in 0..n {
                            let proj: f64 = (0..nf).map(|m| g[[i, m]] * mu[m]).sum();
                            assert!(
                                (proj - v[i]).abs() < 1e-11 * v[i].abs().max(1.0),
                                "order {order} f {f} o {o} s {s:?} i {i}: {proj} vs {}",
                                v[i]
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn face_trace_orientations_differ_by_orthogonal_transforms() {
        // mu_l(to_canonical(o, s)) = sum_m T_o[m][l] mu_m(s) with T_o orthogonal (the vertex
        // permutation is an affine, measure-preserving map of the parameter triangle onto itself
        // that maps P_k onto P_k), hence G_{f,o} = G_{f,0} T_o.
        let order = 4;
        let r = ReferenceTetrahedron::new(order).unwrap();
        let nf = r.n_face();
        let rule = triangle_rule(2 * order);
        let (mut a, mut b) = (vec![0.0; nf], vec![0.0; nf]);
        for o in 0..6 {
            let mut t = Array2::<f64>::zeros((nf, nf));
            for q in 0..rule.n_points() {
                let s = rule.point(q);
                let mut sc = [0.0; 2];
                r.to_canonical(o, s, &mut sc);
                r.eval_trace_basis(s, &mut a);
                r.eval_trace_basis(&sc, &mut b);
                for m in 0..nf {
                    for l in 0..nf {
                        t[[m, l]] += rule.weights[q] * a[m] * b[l];
                    }
                }
            }
            let tt = t.t().dot(&t);
            assert!(max_abs_diff(&tt, &Array2::eye(nf)) < 1e-13, "T_{o} not orthogonal");
            if o != 0 {
                assert!(max_abs_diff(&t, &Array2::eye(nf)) > 0.1, "T_{o} is the identity");
            }
            for f in 0..4 {
                let err = max_abs_diff(r.face_trace(f, o), &r.face_trace(f, 0).dot(&t));
                assert!(err < 1e-12, "f {f} o {o}: {err:e}");
            }
        }
    }

    #[test]
    fn canonical_trace_function_is_integrated_consistently_in_every_orientation() {
        // A trace polynomial given in canonical coordinates, g(c), projected onto the trace basis
        // (lambda_m = int g mu_m, exact: g has degree k); G_{f,o} lambda must equal the direct
        // integral of phi_i(x_f(s)) g(canonical(o, s)) over the local parameters.
        for order in [1, 2, 4] {
            let r = ReferenceTetrahedron::new(order).unwrap();
            let n = r.n_volume();
            let nf = r.n_face();
            let g = |c: [f64; 2]| -> f64 {
                (0.3 + c[0] - 0.7 * c[1]).powi(order as i32)
                    + 0.4 * c[0] * c[1].powi(order as i32 - 1)
                    - 0.2
            };
            let rule = triangle_rule(2 * order);
            let mut mu = vec![0.0; nf];
            let mut lambda = vec![0.0; nf];
            for q in 0..rule.n_points() {
                let c = rule.point(q);
                r.eval_trace_basis(c, &mut mu);
                for m in 0..nf {
                    lambda[m] += rule.weights[q] * g([c[0], c[1]]) * mu[m];
                }
            }
            let fine = triangle_rule(2 * order + 6);
            let mut v = vec![0.0; n];
            for f in 0..4 {
                for o in 0..6 {
                    let mut direct = vec![0.0; n];
                    for q in 0..fine.n_points() {
                        let s = fine.point(q);
                        let xi = explicit_face_point(f, s);
                        r.eval_basis(&xi, &mut v, None);
                        let gv = g(explicit_canonical(o, s));
                        for i in 0..n {
                            direct[i] += fine.weights[q] * v[i] * gv;
                        }
                    }
                    let gl = r.face_trace(f, o).dot(&ndarray::ArrayView1::from(&lambda));
                    for i in 0..n {
                        assert!(
                            (gl[i] - direct[i]).abs() < 1e-12,
                            "order {order} f {f} o {o} i {i}: {} vs {}",
                            gl[i],
                            direct[i]
                        );
                    }
                }
            }
        }
    }

    /// All permutations of 0..4.
    fn permutations4() -> Vec<[usize; 4]> {
        let mut out = Vec::new();
        for a in 0..4 {
            for b in 0..4 {
                for c in 0..4 {
                    for d in 0..4 {
                        let p = [a, b, c, d];
                        if (0..4).all(|i| p.contains(&i)) {
                            out.push(p);
                        }
                    }
                }
            }
        }
        out
    }

    /// Reference coordinates of the physical point `x` in the affine cell with vertex
    /// coordinates `xs` (local order): `x = x_0 + J (xi + 1)`, `J = [(x_{s+1} - x_0)/2]`, solved
    /// by Cramer's rule.
    fn to_reference(xs: &[[f64; 3]; 4], x: [f64; 3]) -> [f64; 3] {
        let col = |s: usize| [0, 1, 2].map(|k| 0.5 * (xs[s + 1][k] - xs[0][k]));
        let cols = [col(0), col(1), col(2)];
        let det3 = |a: [f64; 3], b: [f64; 3], c: [f64; 3]| {
            a[0] * (b[1] * c[2] - b[2] * c[1]) - b[0] * (a[1] * c[2] - a[2] * c[1])
                + c[0] * (a[1] * b[2] - a[2] * b[1])
        };
        let rhs = [0, 1, 2].map(|k| x[k] - xs[0][k]);
        let det = det3(cols[0], cols[1], cols[2]);
        let mut xi = [0.0; 3];
        for s in 0..3 {
            let mut c = cols;
            c[s] = rhs;
            xi[s] = det3(c[0], c[1], c[2]) / det - 1.0;
        }
        xi
    }

    #[test]
    fn two_cells_sharing_a_face_see_the_same_canonical_trace() {
        // Global vertices 0, 1, 2 span the shared face; cell A adds vertex 3, cell B vertex 4.
        // Every local vertex order of both cells: each meets the face as its local face f (the
        // one opposite the unshared vertex) in orientation CellType::orientation of the face's
        // global numbers. A trace function in the face's canonical basis must be the same
        // function of the physical point from both sides, and its moments against cell A's basis
        // computed through A's G_{f,o} must equal the moments integrated with B's parametrisation.
        let order = 3;
        let r = ReferenceTetrahedron::new(order).unwrap();
        let (n, nf) = (r.n_volume(), r.n_face());
        let coords =
            [[0.1, 0.0, 0.2], [1.3, 0.2, -0.1], [0.2, 1.1, 0.3], [0.4, 0.3, 1.2], [0.5, 0.4, -0.9]];
        let mut rng = Rng::new(21);
        let lambda: Vec<f64> = (0..nf).map(|_| rng.next_f64() - 0.5).collect();
        let trace_at = |c: &[f64]| -> f64 {
            let mut mu = vec![0.0; nf];
            r.eval_trace_basis(c, &mut mu);
            mu.iter().zip(&lambda).map(|(m, l)| m * l).sum()
        };
        // (local face, orientation, local parameters of a physical point) of one cell.
        let meet = |cell: &[usize; 4], omega: &[f64; 3]| -> (usize, usize, [f64; 2]) {
            let f = cell.iter().position(|&g| g > 2).unwrap();
            let fv = CellType::Tetrahedron.face_vertices(f);
            let global: Vec<usize> = fv.iter().map(|&i| cell[i]).collect();
            let o = CellType::Tetrahedron.orientation(&global) as usize;
            // Local barycentric weight of local face vertex i is omega[global[i]].
            let s = [2.0 * omega[global[1]] - 1.0, 2.0 * omega[global[2]] - 1.0];
            (f, o, s)
        };
        let weights = [[0.2, 0.5, 0.3], [0.6, 0.1, 0.3], [1.0, 0.0, 0.0], [0.0, 0.25, 0.75]];
        let fine = triangle_rule(2 * order + 4);
        let mut v = vec![0.0; n];
        let perms = permutations4();
        for (pa_i, pa) in perms.iter().enumerate() {
            let cell_a = pa.map(|i| [0, 1, 2, 3][i]);
            for pb in perms.iter().skip(pa_i % 5).step_by(5) {
                let cell_b = pb.map(|i| [0, 1, 2, 4][i]);
                for omega in &weights {
                    let x = [0, 1, 2].map(|k| (0..3).map(|g| omega[g] * coords[g][k]).sum::<f64>());
                    // Expected canonical point: the face's vertices sorted by global number are
                    // 0, 1, 2, i.e. canonical vertex j is global vertex j.
                    let want = [0, 1].map(|k| (0..3).map(|j| omega[j] * W[j][k]).sum::<f64>());
                    let mut seen = Vec::new();
                    for cell in [&cell_a, &cell_b] {
                        let (f, o, s) = meet(cell, omega);
                        // The local parameters are those of the physical point in this cell.
                        let xs = cell.map(|g| coords[g]);
                        let mut xi = [0.0; 3];
                        r.face_point(f, &s, &mut xi);
                        let back = to_reference(&xs, x);
                        for k in 0..3 {
                            assert!(
                                (xi[k] - back[k]).abs() < 1e-13,
                                "{cell:?}: {xi:?} vs {back:?}"
                            );
                        }
                        let mut c = [0.0; 2];
                        r.to_canonical(o, &s, &mut c);
                        for k in 0..2 {
                            assert!(
                                (c[k] - want[k]).abs() < 1e-14,
                                "{cell:?} o {o}: {c:?} vs {want:?}"
                            );
                        }
                        seen.push(trace_at(&c));
                    }
                    assert!((seen[0] - seen[1]).abs() < 1e-12, "{cell_a:?} / {cell_b:?}");
                }
                // Moments of the trace against A's basis: through A's reference matrix, and by
                // quadrature over B's local face parameters (points mapped to A's reference
                // coordinates, trace evaluated in B's canonical coordinates). Both are integrals
                // over the parameter domain of the same face (Jacobian |F|/2 on both sides).
                let (fa, oa, _) = meet(&cell_a, &[0.0; 3]);
                let (fb, ob, _) = meet(&cell_b, &[0.0; 3]);
                let via_a = r.face_trace(fa, oa).dot(&ndarray::ArrayView1::from(&lambda));
                let xs_a = cell_a.map(|g| coords[g]);
                let xs_b = cell_b.map(|g| coords[g]);
                let mut via_b = vec![0.0; n];
                for q in 0..fine.n_points() {
                    let s = fine.point(q);
                    let mut xi_b = [0.0; 3];
                    r.face_point(fb, s, &mut xi_b);
                    let x = [0, 1, 2].map(|k| {
                        xs_b[0][k]
                            + (0..3)
                                .map(|t| 0.5 * (xs_b[t + 1][k] - xs_b[0][k]) * (xi_b[t] + 1.0))
                                .sum::<f64>()
                    });
                    r.eval_basis(&to_reference(&xs_a, x), &mut v, None);
                    let mut c = [0.0; 2];
                    r.to_canonical(ob, s, &mut c);
                    let tv = trace_at(&c);
                    for i in 0..n {
                        via_b[i] += fine.weights[q] * v[i] * tv;
                    }
                }
                for i in 0..n {
                    assert!(
                        (via_a[i] - via_b[i]).abs() < 1e-11,
                        "{cell_a:?} / {cell_b:?} i {i}: {} vs {}",
                        via_a[i],
                        via_b[i]
                    );
                }
            }
        }
        // face_parameter_barycentric is the convention used for omega -> s above.
        let mut l = [0.0; 3];
        face_parameter_barycentric(&[0.2, -0.4], &mut l);
        let want = [0.1, 0.6, 0.3];
        assert!((0..3).all(|i| (l[i] - want[i]).abs() < 1e-15), "{l:?}");
    }

    #[test]
    fn element_tables_for_tetrahedra_orders_1_to_4() {
        let (normals, areas) = normals_and_areas();
        for k in 1..=4 {
            let e = ReferenceTetrahedron::new(k).unwrap();
            let post = ReferenceTetrahedron::new(k + 1).unwrap();
            let t = ElementTables::<f64>::new(&e, &post, 2 * k + 4);
            let (n, nf, np) = (t.n, t.n_f, t.n_post);
            assert_eq!((t.dim, t.n_faces, t.n_orientations), (3, 4, 6));
            assert_eq!((n, nf, np), (e.n_volume(), e.n_face(), post.n_volume()));
            assert_eq!((t.reference_measure, t.face_parameter_measure), (4.0 / 3.0, 2.0));
            assert_eq!(t.n_local_trace(), 4 * nf);
            let transpose_err = |a: &[f64], b: &[f64], rows: usize, cols: usize| -> f64 {
                let mut err: f64 = 0.0;
                for i in 0..rows {
                    for j in 0..cols {
                        err = err.max((a[i * cols + j] - b[j * rows + i]).abs());
                    }
                }
                err
            };
            // Products of reference matrices: (D_s D_t^T)^T = D_t D_s^T, (G^T G)^T swapped.
            for s in 0..3 {
                for u in 0..3 {
                    let err =
                        transpose_err(t.derivative_product(s, u), t.derivative_product(u, s), n, n);
                    assert!(err < 1e-12, "k {k}: D_{s} D_{u}^T");
                    let err = transpose_err(t.post_stiffness(s, u), t.post_stiffness(u, s), np, np);
                    assert!(err < 1e-12, "k {k}: post stiffness {s} {u}");
                }
            }
            for f in 0..4 {
                for o in 0..6 {
                    for g in 0..4 {
                        for p in 0..6 {
                            let err = transpose_err(
                                t.trace_product(f, o, g, p),
                                t.trace_product(g, p, f, o),
                                nf,
                                nf,
                            );
                            assert!(err < 1e-12, "k {k}: trace product {f} {o} {g} {p}");
                        }
                    }
                    // ||G_{f,o}||_F is the same in every orientation (orthogonal transforms).
                    let tr: f64 = (0..nf).map(|m| t.trace_product(f, o, f, o)[m * nf + m]).sum();
                    let tr0: f64 = (0..nf).map(|m| t.trace_product(f, 0, f, 0)[m * nf + m]).sum();
                    assert!((tr - tr0).abs() < 1e-12 * tr0, "k {k} f {f} o {o}");
                }
            }
            // The Laplace stiffness of P_{k+1} annihilates the constant (function 0).
            for j in 0..np {
                let row: f64 = (0..3).map(|s| t.post_stiffness(s, s)[j]).sum();
                assert!(row.abs() < 1e-12, "k {k}: stiffness row 0, col {j}");
            }
            // int phi_l d_s phi'_j restricted to j < n is D_s of order k (hierarchical basis).
            for s in 0..3 {
                for l in 0..n {
                    for j in 0..n {
                        let a = t.post_derivative(s)[l * np + j];
                        assert!((a - t.derivative(s)[l * n + j]).abs() < 1e-12, "k {k}");
                    }
                }
            }
            // Basis integrals: int phi_i = delta_{i0} * 4/3 * sqrt(3)/2 with both cell rules.
            let phi0 = 0.75f64.sqrt();
            for (rule, basis, m) in [
                (&t.load_rule, &t.load_basis, n),
                (&t.error_rule, &t.error_basis, n),
                (&t.error_rule, &t.error_basis_post, np),
            ] {
                for i in 0..m {
                    let int: f64 =
                        (0..rule.n_points()).map(|q| rule.weights[q] * basis[q * m + i]).sum();
                    let want = if i == 0 { 4.0 / 3.0 * phi0 } else { 0.0 };
                    assert!((int - want).abs() < 1e-13, "k {k}: int phi_{i} = {int}");
                }
            }
            // Divergence theorem on the face integrals: int_K d_s phi_j = sum_f n_{f,s} |f|/2
            // int_param phi_j, and int_K d_s phi_j = (int_K phi_0 d_s phi_j) / phi_0 = D_s[0][j] / phi_0.
            for f in 0..4 {
                assert!((t.face_basis_integral[f * n] - 2.0 * phi0).abs() < 1e-14);
            }
            for s in 0..3 {
                for j in 0..n {
                    let boundary: f64 = (0..4)
                        .map(|f| normals[f][s] * areas[f] / 2.0 * t.face_basis_integral[f * n + j])
                        .sum();
                    let volume = t.derivative(s)[j] / phi0;
                    assert!(
                        (boundary - volume).abs() < 1e-12,
                        "k {k} s {s} j {j}: {boundary} vs {volume}"
                    );
                }
            }
        }
    }
}
