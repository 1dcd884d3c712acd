//! Geometric factors of affine simplices: the only per-element data the element matrices need.
//!
//! The reference simplex has vertices (-1,...,-1) and (-1,..,1 at s,..,-1); the affine map is
//! x = v_0 + sum_s (v_{s+1} - v_0) (xi_s + 1) / 2, so J = [(v_{s+1} - v_0) / 2]_s (columns).
//! For every cell we keep, in one contiguous record (`GeometryLayout`):
//!
//! | field | size | meaning |
//! | --- | --- | --- |
//! | `det` | 1 | det J = |K| / |K^| (> 0: cells are positively oriented) |
//! | `inverse_jacobian` | d*d | (J^{-1})_{sr} at `[s*d + r]`: d/dx_r = sum_s (J^{-1})_{sr} d/dxi_s |
//! | `face_jacobian` | faces | |F| / |F^param|: the scaling of every reference face matrix |
//! | `normal` | faces*d | outward unit normal of each local face, `[f*d + r]` |
use hdg_mesh::Mesh;
use rayon::prelude::*;

use crate::real::Real;
use crate::CellType;

/// Offsets of the fields of one cell's geometry record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GeometryLayout {
    /// Spatial dimension.
    pub dim: usize,
    /// Faces per cell.
    pub n_faces: usize,
}

impl GeometryLayout {
    /// Layout for a cell type.
    pub fn new(cell_type: CellType) -> Self {
        GeometryLayout { dim: cell_type.dim(), n_faces: cell_type.faces_per_cell() }
    }
    /// Values per cell.
    pub const fn stride(&self) -> usize {
        1 + self.dim * self.dim + self.n_faces + self.n_faces * self.dim
    }
    /// Offset of det J.
    pub const fn det(&self) -> usize {
        0
    }
    /// Offset of J^{-1}.
    pub const fn inverse_jacobian(&self) -> usize {
        1
    }
    /// Offset of the face Jacobians.
    pub const fn face_jacobian(&self) -> usize {
        1 + self.dim * self.dim
    }
    /// Offset of the normals.
    pub const fn normal(&self) -> usize {
        1 + self.dim * self.dim + self.n_faces
    }
}

/// Computes one cell's geometry record from its vertex coordinates (`vertices[v*d + r]`).
///
/// `face_parameter_measure` is the measure of the reference face parameter domain (2 for the
/// segment [-1,1] and for the triangle (-1,-1),(1,-1),(-1,1)).
pub fn cell_geometry<T: Real>(
    cell_type: CellType,
    vertices: &[f64],
    face_parameter_measure: f64,
    out: &mut [T],
) {
    let layout = GeometryLayout::new(cell_type);
    let d = layout.dim;
    let mut jac = [[0.0f64; 3]; 3];
    for s in 0..d {
        for r in 0..d {
            jac[r][s] = 0.5 * (vertices[(s + 1) * d + r] - vertices[r]);
        }
    }
    let (det, inv) = invert(d, &jac);
    out[layout.det()] = T::from_f64_lossy(det);
    for s in 0..d {
        for r in 0..d {
            out[layout.inverse_jacobian() + s * d + r] = T::from_f64_lossy(inv[s][r]);
        }
    }
    // Physical barycentric gradients: grad lambda_{s+1} = (row s of J^{-1}) / 2, and lambda_0
    // = 1 - sum of the others. Face f is opposite vertex f: its outward normal is
    // -grad lambda_f / |grad lambda_f|, and |F_f| = d |K| |grad lambda_f| (|K| = h_f |F_f| / d).
    let mut grad = [[0.0f64; 3]; 4];
    for s in 0..d {
        for r in 0..d {
            grad[s + 1][r] = 0.5 * inv[s][r];
            grad[0][r] -= 0.5 * inv[s][r];
        }
    }
    let reference_measure = match cell_type {
        CellType::Triangle => 2.0,
        CellType::Tetrahedron => 4.0 / 3.0,
    };
    let volume = det * reference_measure;
    for (f, g) in grad.iter().enumerate().take(layout.n_faces) {
        let norm = (0..d).map(|r| g[r] * g[r]).sum::<f64>().sqrt();
        let area = d as f64 * volume * norm;
        out[layout.face_jacobian() + f] = T::from_f64_lossy(area / face_parameter_measure);
        for r in 0..d {
            out[layout.normal() + f * d + r] = T::from_f64_lossy(-g[r] / norm);
        }
    }
}

/// Every cell's vertex coordinates (`[c * vpc * d + i * d + r]`) and geometry record
/// (element-contiguous, [`GeometryLayout`] stride), computed in parallel: what the backends that
/// work cell by cell on the host start from.
pub fn mesh_geometry<T: Real>(mesh: &Mesh, face_parameter_measure: f64) -> (Vec<f64>, Vec<T>) {
    let cell_type = mesh.cell_type();
    let layout = GeometryLayout::new(cell_type);
    let (d, vpc) = (mesh.dim(), cell_type.vertices_per_cell());
    let mut cell_vertices = vec![0.0; mesh.n_cells() * vpc * d];
    cell_vertices.par_chunks_mut(vpc * d).enumerate().for_each(|(c, out)| {
        for (i, &v) in mesh.cell_vertices(c).iter().enumerate() {
            out[i * d..(i + 1) * d].copy_from_slice(mesh.vertex(v));
        }
    });
    let mut geometry = vec![T::zero(); mesh.n_cells() * layout.stride()];
    geometry
        .par_chunks_mut(layout.stride())
        .zip(cell_vertices.par_chunks(vpc * d))
        .for_each(|(g, v)| cell_geometry(cell_type, v, face_parameter_measure, g));
    (cell_vertices, geometry)
}

/// Determinant and inverse of a 2x2 or 3x3 matrix.
fn invert(d: usize, a: &[[f64; 3]; 3]) -> (f64, [[f64; 3]; 3]) {
    let mut inv = [[0.0; 3]; 3];
    if d == 2 {
        let det = a[0][0] * a[1][1] - a[0][1] * a[1][0];
        inv[0][0] = a[1][1] / det;
        inv[0][1] = -a[0][1] / det;
        inv[1][0] = -a[1][0] / det;
        inv[1][1] = a[0][0] / det;
        (det, inv)
    } else {
        let det = a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1])
            - a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0])
            + a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0]);
        for i in 0..3 {
            for j in 0..3 {
                // Cofactor transpose: inv[i][j] = C[j][i] / det.
                let (r0, r1) = ((j + 1) % 3, (j + 2) % 3);
                let (c0, c1) = ((i + 1) % 3, (i + 2) % 3);
                inv[i][j] = (a[r0][c0] * a[r1][c1] - a[r0][c1] * a[r1][c0]) / det;
            }
        }
        (det, inv)
    }
}

/// B_st = sum_r (J^-1)_{sr} (J^-1)_{tr}: the metric of the reference gradients.
pub fn metric<T: Real>(d: usize, inverse_jacobian: &[T]) -> [T; 9] {
    let mut b = [T::zero(); 9];
    for s in 0..d {
        for t in 0..d {
            b[s * d + t] =
                (0..d).map(|r| inverse_jacobian[s * d + r] * inverse_jacobian[t * d + r]).sum();
        }
    }
    b
}

/// Physical coordinates of a reference point: x = v_0 + sum_s (v_{s+1} - v_0)(xi_s + 1)/2.
pub fn map_point(d: usize, vertices: &[f64], xi: &[f64], x: &mut [f64]) {
    // With the dimension a constant the loops unroll: the same operations, the same bits.
    match d {
        2 => map_point_in(2, vertices, xi, x),
        3 => map_point_in(3, vertices, xi, x),
        _ => map_point_in(d, vertices, xi, x),
    }
}

#[inline(always)]
fn map_point_in(d: usize, vertices: &[f64], xi: &[f64], x: &mut [f64]) {
    let (vertices, xi, x) = (&vertices[..(d + 1) * d], &xi[..d], &mut x[..d]);
    for r in 0..d {
        x[r] = vertices[r];
        for s in 0..d {
            x[r] += 0.5 * (vertices[(s + 1) * d + r] - vertices[r]) * (xi[s] + 1.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triangle_geometry_matches_hand_computation() {
        // Right triangle with legs 2 (x) and 1 (y): area 1.
        let v = [0.0, 0.0, 2.0, 0.0, 0.0, 1.0];
        let mut out = vec![0.0f64; GeometryLayout::new(CellType::Triangle).stride()];
        cell_geometry(CellType::Triangle, &v, 2.0, &mut out);
        let l = GeometryLayout::new(CellType::Triangle);
        assert!((out[l.det()] - 0.5).abs() < 1e-15); // |K| / 2
                                                     // J = [[1, 0], [0, 0.5]] -> J^{-1} = [[1, 0], [0, 2]].
        assert_eq!(&out[1..5], &[1.0, 0.0, 0.0, 2.0]);
        let len = [5f64.sqrt(), 1.0, 2.0]; // faces opposite vertices 0, 1, 2
        let normals = [[1.0 / 5f64.sqrt(), 2.0 / 5f64.sqrt()], [-1.0, 0.0], [0.0, -1.0]];
        for f in 0..3 {
            assert!((out[l.face_jacobian() + f] - len[f] / 2.0).abs() < 1e-14);
            for r in 0..2 {
                assert!((out[l.normal() + 2 * f + r] - normals[f][r]).abs() < 1e-14);
            }
        }
    }

    #[test]
    fn tetrahedron_geometry_closes() {
        // Sum of |F| n over the faces of a closed surface is zero; volumes and areas by hand.
        let v = [0.1, 0.0, 0.0, 1.0, 0.2, 0.0, 0.0, 1.0, 0.3, 0.2, 0.1, 1.5];
        let l = GeometryLayout::new(CellType::Tetrahedron);
        let mut out = vec![0.0f64; l.stride()];
        cell_geometry(CellType::Tetrahedron, &v, 2.0, &mut out);
        for r in 0..3 {
            let s: f64 =
                (0..4).map(|f| out[l.face_jacobian() + f] * out[l.normal() + 3 * f + r]).sum();
            assert!(s.abs() < 1e-14, "closure {r}: {s}");
        }
        // Face 3 is (v0, v1, v2): area = |(v1 - v0) x (v2 - v0)| / 2.
        let a: [f64; 3] = [0.9, 0.2, 0.0];
        let b: [f64; 3] = [-0.1, 1.0, 0.3];
        let c = [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]];
        let area = 0.5 * f64::sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2]);
        assert!((out[l.face_jacobian() + 3] * 2.0 - area).abs() < 1e-14);
    }
}
