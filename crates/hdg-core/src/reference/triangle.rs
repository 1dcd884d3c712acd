//! The reference triangle `(-1,-1), (1,-1), (-1,1)` with the orthonormal Dubiner basis in the
//! volume and orthonormal Legendre polynomials on the faces.

use ndarray::Array2;

use super::jacobi::{dubiner_count, dubiner_triangle_impl, legendre_orthonormal};
use super::quadrature::{segment_rule, smallest_triangle_rule, triangle_rule, QuadratureRule};
use super::{
    face_point_generic, reference_matrices, to_canonical_generic, ReferenceElement,
    ReferenceMatrices,
};
use crate::error::CoreError;
use crate::CellType;

/// Largest supported polynomial order.
///
/// The Dubiner recurrences and the Gauss rules stay accurate well beyond; the limit keeps the
/// precomputed matrices (`n = 231` functions at order 20) and their assembly cost reasonable.
pub const MAX_REFERENCE_ORDER: usize = 20;

/// Reference vertex coordinates, vertex-major.
const VERTICES: [f64; 6] = [-1.0, -1.0, 1.0, -1.0, -1.0, 1.0];

/// The reference triangle of order `k`: volume space `P_k` with the orthonormal Dubiner basis,
/// trace space `P_k` on each edge with orthonormal Legendre polynomials, and the precomputed
/// reference matrices.
///
/// All matrices are computed in [`ReferenceTriangle::new`] with quadrature exact for their
/// integrands (degree `2k`), so they are exact to rounding.
#[derive(Clone, Debug)]
pub struct ReferenceTriangle {
    order: usize,
    n_volume: usize,
    n_face: usize,
    /// `D^_x`, `D^_y`; `E^_f`, `f = 0..3`; `G^_{f,o}`, `f = 0..3`, `o = 0..2`.
    matrices: ReferenceMatrices,
}

impl ReferenceTriangle {
    /// The reference triangle of order `order`, with all reference matrices precomputed.
    ///
    /// # Errors
    /// [`CoreError::InvalidOrder`] if `order > MAX_REFERENCE_ORDER`.
    pub fn new(order: usize) -> Result<Self, CoreError> {
        if order > MAX_REFERENCE_ORDER {
            return Err(CoreError::InvalidOrder { order, min: 0, max: MAX_REFERENCE_ORDER });
        }
        let n = dubiner_count(order);
        let n_face = order + 1;

        // Integrands of degree 2k - 1 (derivatives) and 2k (faces).
        let matrices = reference_matrices(
            CellType::Triangle,
            &VERTICES,
            (n, n_face),
            (&triangle_rule(2 * order), &segment_rule(2 * order)),
            |xi, values, gradients| match gradients {
                Some(g) => {
                    let (gx, gy) = g.split_at_mut(n);
                    dubiner_triangle_impl(order, xi[0], xi[1], values, Some((gx, gy)));
                }
                None => dubiner_triangle_impl(order, xi[0], xi[1], values, None),
            },
            |s, values| legendre_orthonormal(order, s[0], values),
        );
        Ok(ReferenceTriangle { order, n_volume: n, n_face, matrices })
    }
}

impl ReferenceElement for ReferenceTriangle {
    fn cell_type(&self) -> CellType {
        CellType::Triangle
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
        2.0
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
        match gradients {
            Some(g) => {
                let (gx, rest) = g.split_at_mut(n);
                dubiner_triangle_impl(self.order, xi[0], xi[1], values, Some((gx, &mut rest[..n])));
            }
            None => dubiner_triangle_impl(self.order, xi[0], xi[1], values, None),
        }
    }

    fn eval_trace_basis(&self, s: &[f64], values: &mut [f64]) {
        legendre_orthonormal(self.order, s[0], values);
    }

    fn face_point(&self, face: usize, s: &[f64], xi: &mut [f64]) {
        face_point_generic(CellType::Triangle, &VERTICES, face, s, xi);
    }

    fn to_canonical(&self, orientation: usize, s: &[f64], out: &mut [f64]) {
        to_canonical_generic(CellType::Triangle, orientation, s, out);
    }

    fn cell_quadrature(&self, degree: usize) -> QuadratureRule {
        smallest_triangle_rule(degree)
    }

    fn face_quadrature(&self, degree: usize) -> QuadratureRule {
        segment_rule(degree)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::jacobi::dubiner_triangle;
    use crate::reference::test_util::Rng;

    fn max_abs_diff(a: &Array2<f64>, b: &Array2<f64>) -> f64 {
        assert_eq!(a.dim(), b.dim());
        a.iter().zip(b.iter()).fold(0.0, |m, (x, y)| m.max((x - y).abs()))
    }

    #[test]
    fn new_accepts_orders_up_to_max_and_rejects_beyond() {
        let r0 = ReferenceTriangle::new(0).unwrap();
        assert_eq!(r0.n_volume(), 1);
        assert_eq!(r0.n_face(), 1);
        assert_eq!(r0.derivative(0).dim(), (1, 1));
        assert_eq!(r0.derivative(0)[[0, 0]], 0.0);
        // phi_0 = 1/sqrt(2), mu_0 = 1/sqrt(2): E = 1/2 * 2 = 1, G = 1.
        for f in 0..3 {
            assert!((r0.face_mass(f)[[0, 0]] - 1.0).abs() < 1e-15);
            assert!((r0.face_trace(f, 1)[[0, 0]] - 1.0).abs() < 1e-15);
        }
        let rmax = ReferenceTriangle::new(MAX_REFERENCE_ORDER).unwrap();
        assert_eq!(rmax.n_volume(), 231);
        assert_eq!(rmax.n_face(), 21);
        assert_eq!(rmax.face_trace(2, 1).dim(), (231, 21));
        assert_eq!(
            ReferenceTriangle::new(MAX_REFERENCE_ORDER + 1).unwrap_err(),
            CoreError::InvalidOrder {
                order: MAX_REFERENCE_ORDER + 1,
                min: 0,
                max: MAX_REFERENCE_ORDER
            }
        );
    }

    #[test]
    fn metadata_and_face_points() {
        let r = ReferenceTriangle::new(2).unwrap();
        assert_eq!(r.cell_type(), CellType::Triangle);
        assert_eq!(r.order(), 2);
        assert_eq!((r.n_volume(), r.n_face()), (6, 3));
        assert_eq!(r.reference_measure(), 2.0);
        assert_eq!(r.face_parameter_measure(), 2.0);
        assert_eq!(r.vertices(), &[-1.0, -1.0, 1.0, -1.0, -1.0, 1.0]);
        // x_f(-1) = v_a, x_f(1) = v_b with (a, b) = face_vertices(f); face f is opposite vertex f.
        let v = r.vertices();
        for f in 0..3 {
            let fv = CellType::Triangle.face_vertices(f);
            assert!(!fv.contains(&f));
            let mut xi = [0.0; 2];
            r.face_point(f, &[-1.0], &mut xi);
            assert_eq!(xi, [v[2 * fv[0]], v[2 * fv[0] + 1]]);
            r.face_point(f, &[1.0], &mut xi);
            assert_eq!(xi, [v[2 * fv[1]], v[2 * fv[1] + 1]]);
            r.face_point(f, &[0.5], &mut xi);
            let want = [
                0.25 * v[2 * fv[0]] + 0.75 * v[2 * fv[1]],
                0.25 * v[2 * fv[0] + 1] + 0.75 * v[2 * fv[1] + 1],
            ];
            assert!((xi[0] - want[0]).abs() < 1e-15 && (xi[1] - want[1]).abs() < 1e-15);
        }
        let mut out = [0.0];
        r.to_canonical(1, &[0.3], &mut out);
        assert_eq!(out, [-0.3]);
        r.to_canonical(0, &[0.3], &mut out);
        assert_eq!(out, [0.3]);
        // The quadratures are the ones of the quadrature module (cells: the symmetric rule).
        assert_eq!(r.cell_quadrature(7).n_points(), 15);
        assert_eq!(r.face_quadrature(7).n_points(), 4);
    }

    #[test]
    fn eval_basis_matches_dubiner_with_gradient_layout() {
        let order = 4;
        let r = ReferenceTriangle::new(order).unwrap();
        let n = r.n_volume();
        let mut rng = Rng::new(3);
        for _ in 0..5 {
            let (x, y) = rng.triangle_point(0.0);
            let (mut v, mut dx, mut dy) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
            dubiner_triangle(order, x, y, &mut v, &mut dx, &mut dy);
            let mut v2 = vec![0.0; n];
            let mut g = vec![0.0; 2 * n];
            r.eval_basis(&[x, y], &mut v2, Some(&mut g));
            assert_eq!(v, v2);
            assert_eq!(&g[..n], &dx[..]);
            assert_eq!(&g[n..], &dy[..]);
            let mut v3 = vec![0.0; n];
            r.eval_basis(&[x, y], &mut v3, None);
            assert_eq!(v, v3);
        }
        let mut mu = vec![0.0; order + 1];
        r.eval_trace_basis(&[0.25], &mut mu);
        assert!((mu[0] - std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-15);
        assert!((mu[1] - 1.5f64.sqrt() * 0.25).abs() < 1e-15);
    }

    #[test]
    fn derivative_matrices_match_finite_difference_quadrature() {
        let h = 1e-6;
        for order in 1..=5 {
            let r = ReferenceTriangle::new(order).unwrap();
            let n = r.n_volume();
            // A different (higher) rule than the one new() uses.
            let rule = triangle_rule(2 * order + 3);
            let mut fd = [Array2::<f64>::zeros((n, n)), Array2::<f64>::zeros((n, n))];
            let (mut v, mut vp, mut vm) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
            for q in 0..rule.n_points() {
                let p = rule.point(q);
                r.eval_basis(p, &mut v, None);
                for (s, mat) in fd.iter_mut().enumerate() {
                    let mut xp = [p[0], p[1]];
                    let mut xm = [p[0], p[1]];
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

    /// Direct evaluation of E^_f and G^_{f,o} with a higher Gauss-Legendre rule and explicit
    /// parametrisations (not the generic helpers).
    #[test]
    fn face_matrices_match_direct_high_order_quadrature() {
        // Explicit face endpoints: face 0 from v1 to v2, face 1 from v2 to v0, face 2 from v0 to v1.
        let ends =
            [[[1.0, -1.0], [-1.0, 1.0]], [[-1.0, 1.0], [-1.0, -1.0]], [[-1.0, -1.0], [1.0, -1.0]]];
        for order in [0, 1, 2, 5, 9] {
            let r = ReferenceTriangle::new(order).unwrap();
            let n = r.n_volume();
            let nf = r.n_face();
            let rule = segment_rule(2 * order + 10);
            let (mut v, mut dx, mut dy) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
            let mut mu = vec![0.0; nf];
            for (f, [a, b]) in ends.iter().enumerate() {
                let mut e = Array2::<f64>::zeros((n, n));
                let mut g = [Array2::<f64>::zeros((n, nf)), Array2::<f64>::zeros((n, nf))];
                for q in 0..rule.n_points() {
                    let s = rule.point(q)[0];
                    let w = rule.weights[q];
                    let x = 0.5 * (1.0 - s) * a[0] + 0.5 * (1.0 + s) * b[0];
                    let y = 0.5 * (1.0 - s) * a[1] + 0.5 * (1.0 + s) * b[1];
                    dubiner_triangle(order, x, y, &mut v, &mut dx, &mut dy);
                    for i in 0..n {
                        for j in 0..n {
                            e[[i, j]] += w * v[i] * v[j];
                        }
                    }
                    for (o, go) in g.iter_mut().enumerate() {
                        let sc = if o == 0 { s } else { -s };
                        legendre_orthonormal(order, sc, &mut mu);
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
    fn face_trace_reversed_orientation_flips_odd_modes() {
        for order in [1, 4, 8] {
            let r = ReferenceTriangle::new(order).unwrap();
            for f in 0..3 {
                let g0 = r.face_trace(f, 0);
                let g1 = r.face_trace(f, 1);
                let mut err: f64 = 0.0;
                for i in 0..r.n_volume() {
                    for m in 0..r.n_face() {
                        let sign = if m & 1 == 0 { 1.0 } else { -1.0 };
                        err = err.max((g1[[i, m]] - sign * g0[[i, m]]).abs());
                    }
                }
                assert!(err < 1e-13, "order {order} face {f}: {err:e}");
                // Non-trivial: some odd mode is non-zero, so the two orientations differ.
                assert!(max_abs_diff(g0, g1) > 1e-3);
            }
        }
    }

    #[test]
    fn trace_projection_reproduces_face_restriction() {
        // phi_i restricted to a face is a polynomial of degree <= k in s, so its projection onto
        // the trace space reproduces it: sum_m G[i][m] mu_m(to_canonical(o, s)) = phi_i(x_f(s)).
        for order in [0, 1, 3, 7] {
            let r = ReferenceTriangle::new(order).unwrap();
            let n = r.n_volume();
            let nf = r.n_face();
            let mut v = vec![0.0; n];
            let mut mu = vec![0.0; nf];
            for f in 0..3 {
                for o in 0..CellType::Triangle.n_orientations() {
                    let g = r.face_trace(f, o);
                    for &s in &[-1.0, -0.77, -0.1, 0.35, 0.9, 1.0] {
                        let mut xi = [0.0; 2];
                        r.face_point(f, &[s], &mut xi);
                        r.eval_basis(&xi, &mut v, None);
                        let mut sc = [0.0];
                        r.to_canonical(o, &[s], &mut sc);
                        r.eval_trace_basis(&sc, &mut mu);
                        for i in 0..n {
                            let proj: f64 = (0..nf).map(|m| g[[i, m]] * mu[m]).sum();
                            assert!(
                                (proj - v[i]).abs() < 1e-12 * v[i].abs().max(1.0),
                                "order {order} f {f} o {o} s {s} i {i}: {proj} vs {}",
                                v[i]
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn integration_by_parts_identity() {
        // D^_s + D^_s^T = sum_f n_{f,s} |f|/2 E^_f: the boundary term of int d_s(phi_i phi_j).
        // Face 0 (v1-v2, hypotenuse): n = (1,1)/sqrt(2), |f| = 2 sqrt(2);
        // face 1 (v2-v0, x = -1): n = (-1, 0), |f| = 2; face 2 (v0-v1, y = -1): n = (0,-1), |f| = 2.
        let h = std::f64::consts::FRAC_1_SQRT_2;
        let normals = [[h, h], [-1.0, 0.0], [0.0, -1.0]];
        let lengths = [2.0 * 2f64.sqrt(), 2.0, 2.0];
        for order in 0..=10 {
            let r = ReferenceTriangle::new(order).unwrap();
            for s in 0..2 {
                let d = r.derivative(s);
                let lhs = d + &d.t();
                let mut rhs = Array2::<f64>::zeros(lhs.dim());
                for (f, (normal, length)) in normals.iter().zip(&lengths).enumerate() {
                    rhs.scaled_add(normal[s] * length / 2.0, r.face_mass(f));
                }
                let err = max_abs_diff(&lhs, &rhs);
                assert!(err < 1e-12, "order {order} s {s}: {err:e}");
                if order >= 1 {
                    assert!(d.iter().any(|x| x.abs() > 0.1), "D_{s} should not vanish");
                }
            }
        }
    }
}
