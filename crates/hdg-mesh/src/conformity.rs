//! Conformity: a mesh whose cells do not meet face to face is refused.
//!
//! In a conforming mesh every face inside the domain belongs to exactly two cells. A hanging
//! node (a vertex inside another cell's edge or face) or a duplicated vertex (which opens an
//! internal crack) leaves faces with one cell inside the domain: face matching alone would
//! take them for boundary faces and impose boundary data on them, a wrong answer without a
//! word. Such faces always overlap another "boundary" face, so this check looks for the one
//! signature they share and a true boundary never shows: a boundary vertex lying on the
//! closure of a boundary face it does not belong to (inside it: a hanging node; on one of its
//! vertices: a duplicated vertex).
//!
//! The boundary faces go into a uniform grid of cells as large as the largest boundary face,
//! so each vertex is tested against the few faces near it: linear in the number of boundary
//! faces.

use std::collections::HashMap;
use std::fmt;

use crate::{CellType, Mesh, MeshError};

/// How many offending vertices an error lists (the total is always given).
pub const MAX_REPORTED: usize = 10;

/// Relative distance (to the face's diameter) within which a vertex counts as lying on a face.
const ON_FACE_TOLERANCE: f64 = 1e-9;

/// One boundary vertex lying on a boundary face it does not belong to.
#[derive(Clone, Debug, PartialEq)]
pub struct NonConformity {
    /// The vertex.
    pub vertex: usize,
    /// Its coordinates.
    pub point: Vec<f64>,
    /// The vertices of the face it lies on.
    pub face_vertices: Vec<usize>,
    /// The cell of that face.
    pub cell: usize,
    /// The face's vertex at the same position, if any (a duplicated vertex); `None` when the
    /// vertex lies inside the face (a hanging node).
    pub duplicate_of: Option<usize>,
}

impl fmt::Display for NonConformity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "vertex {} at {:?} ", self.vertex, self.point)?;
        match self.duplicate_of {
            Some(w) => write!(
                f,
                "duplicates vertex {w} of cell {} (face {:?}): an internal crack",
                self.cell, self.face_vertices
            ),
            None => write!(
                f,
                "lies inside face {:?} of cell {}: a hanging node",
                self.face_vertices, self.cell
            ),
        }
    }
}

/// Refuses a mesh with hanging nodes or duplicated vertices (module docs).
pub(crate) fn check(mesh: &Mesh) -> Result<(), MeshError> {
    let dim = mesh.dim();
    let vpf = mesh.cell_type().vertices_per_face();
    let boundary: Vec<usize> = (0..mesh.n_faces()).filter(|&f| mesh.is_boundary_face(f)).collect();
    if boundary.is_empty() {
        return Ok(());
    }
    // Grid spacing: the largest boundary face's bounding-box extent, so a face spans at most
    // two grid cells per direction.
    let bbox = |f: usize| {
        let mut lo = [f64::INFINITY; 3];
        let mut hi = [f64::NEG_INFINITY; 3];
        for &v in mesh.face_vertices(f) {
            for (k, &x) in mesh.vertex(v).iter().enumerate() {
                lo[k] = lo[k].min(x);
                hi[k] = hi[k].max(x);
            }
        }
        (lo, hi)
    };
    let mut spacing: f64 = 0.0;
    for &f in &boundary {
        let (lo, hi) = bbox(f);
        for k in 0..dim {
            spacing = spacing.max(hi[k] - lo[k]);
        }
    }
    let spacing = spacing.max(f64::MIN_POSITIVE);
    let cell_of = |x: &[f64]| -> [i64; 3] {
        let mut c = [0i64; 3];
        for k in 0..dim {
            c[k] = (x[k] / spacing).floor() as i64;
        }
        c
    };
    let mut grid: HashMap<[i64; 3], Vec<usize>> = HashMap::new();
    for &f in &boundary {
        let (lo, hi) = bbox(f);
        let pad = ON_FACE_TOLERANCE * spacing;
        let (a, b) = (cell_of(&lo.map(|x| x - pad)), cell_of(&hi.map(|x| x + pad)));
        for i in a[0]..=b[0] {
            for j in a[1]..=b[1] {
                for l in a[2]..=b[2] {
                    grid.entry([i, j, l]).or_default().push(f);
                }
            }
        }
    }

    let mut on_boundary = vec![false; mesh.n_vertices()];
    for &f in &boundary {
        for &v in mesh.face_vertices(f) {
            on_boundary[v] = true;
        }
    }
    let mut found = Vec::new();
    let mut total = 0usize;
    for v in (0..mesh.n_vertices()).filter(|&v| on_boundary[v]) {
        let x = mesh.vertex(v);
        let Some(near) = grid.get(&cell_of(x)) else { continue };
        // The first face the vertex lies on is enough to name the problem.
        for &f in near {
            let fv = mesh.face_vertices(f);
            if fv.contains(&v) {
                continue;
            }
            if let Some(duplicate_of) = lies_on(mesh, x, &fv[..vpf]) {
                total += 1;
                if found.len() < MAX_REPORTED {
                    found.push(NonConformity {
                        vertex: v,
                        point: x.to_vec(),
                        face_vertices: fv.to_vec(),
                        cell: mesh.face_cells(f)[0],
                        duplicate_of,
                    });
                }
                break;
            }
        }
    }
    if total == 0 {
        Ok(())
    } else {
        Err(MeshError::NonConforming { total, shown: found })
    }
}

/// Whether `x` lies on the closed face with vertices `face`: `None` if not, `Some(Some(w))`
/// if it coincides with the face's vertex `w`, `Some(None)` if it lies elsewhere on it.
fn lies_on(mesh: &Mesh, x: &[f64], face: &[usize]) -> Option<Option<usize>> {
    let p: Vec<&[f64]> = face.iter().map(|&v| mesh.vertex(v)).collect();
    let sub = |a: &[f64], b: &[f64]| -> [f64; 3] {
        let mut d = [0.0; 3];
        for k in 0..a.len() {
            d[k] = a[k] - b[k];
        }
        d
    };
    let dot = |a: [f64; 3], b: [f64; 3]| a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
    let diameter = (0..p.len())
        .flat_map(|i| (i + 1..p.len()).map(move |j| (i, j)))
        .map(|(i, j)| dot(sub(p[i], p[j]), sub(p[i], p[j])).sqrt())
        .fold(0.0, f64::max);
    let tol = ON_FACE_TOLERANCE * diameter;
    for (i, q) in p.iter().enumerate() {
        let d = sub(x, q);
        if dot(d, d).sqrt() <= tol {
            return Some(Some(face[i]));
        }
    }
    let r = sub(x, p[0]);
    match mesh.cell_type() {
        CellType::Triangle => {
            // The segment p0 p1: the projection parameter in [0, 1], the distance within tol.
            let e = sub(p[1], p[0]);
            let ee = dot(e, e);
            let t = dot(r, e) / ee;
            let d = [r[0] - t * e[0], r[1] - t * e[1], 0.0];
            (t > 0.0 && t < 1.0 && dot(d, d).sqrt() <= tol).then_some(None)
        }
        CellType::Tetrahedron => {
            // The triangle p0 p1 p2: distance to its plane within tol, barycentric
            // coordinates of the projection non-negative (up to tol).
            let (e1, e2) = (sub(p[1], p[0]), sub(p[2], p[0]));
            let n = [
                e1[1] * e2[2] - e1[2] * e2[1],
                e1[2] * e2[0] - e1[0] * e2[2],
                e1[0] * e2[1] - e1[1] * e2[0],
            ];
            let nn = dot(n, n).sqrt();
            if dot(r, n).abs() > tol * nn {
                return None;
            }
            let (a, b, c) = (dot(e1, e1), dot(e1, e2), dot(e2, e2));
            let (d1, d2) = (dot(r, e1), dot(r, e2));
            let det = a * c - b * b;
            let s = (c * d1 - b * d2) / det;
            let t = (a * d2 - b * d1) / det;
            let eps = ON_FACE_TOLERANCE;
            (s >= -eps && t >= -eps && s + t <= 1.0 + eps).then_some(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{unit_cube, unit_square};
    use crate::Diagonal;

    fn non_conforming(r: Result<Mesh, MeshError>) -> (usize, Vec<NonConformity>) {
        match r {
            Err(MeshError::NonConforming { total, shown }) => (total, shown),
            other => panic!("expected a non-conforming mesh, got {other:?}"),
        }
    }

    /// Copies `mesh`'s arrays, giving the cells for which `moved` holds their own copy of
    /// every vertex that `on_line` selects: the mesh falls apart along that line.
    fn split_along(
        mesh: &Mesh,
        on_line: impl Fn(&[f64]) -> bool,
        moved: impl Fn(&[f64]) -> bool,
    ) -> (Vec<f64>, Vec<usize>) {
        let dim = mesh.dim();
        let mut vertices = mesh.vertices().to_vec();
        let mut copy = vec![usize::MAX; mesh.n_vertices()];
        let mut cells = Vec::new();
        for c in 0..mesh.n_cells() {
            let cv = mesh.cell_vertices(c);
            let mut centroid = vec![0.0; dim];
            for &v in cv {
                for k in 0..dim {
                    centroid[k] += mesh.vertex(v)[k] / cv.len() as f64;
                }
            }
            for &v in cv {
                if moved(&centroid) && on_line(mesh.vertex(v)) {
                    if copy[v] == usize::MAX {
                        copy[v] = vertices.len() / dim;
                        vertices.extend_from_slice(mesh.vertex(v));
                    }
                    cells.push(copy[v]);
                } else {
                    cells.push(v);
                }
            }
        }
        (vertices, cells)
    }

    #[test]
    fn a_hanging_node_in_2d_is_refused_naming_the_vertex_and_cell() {
        // The unit square as two triangles; to its right a column of three triangles whose
        // vertex 4 = (1, 0.5) lies inside the square's right edge.
        let vertices = vec![
            0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.5, 2.0, 0.0, 2.0, 1.0, //
        ];
        let cells = vec![0, 1, 2, 0, 2, 3, 1, 5, 4, 5, 6, 4, 4, 6, 2];
        let (total, shown) = non_conforming(Mesh::new(CellType::Triangle, vertices, cells, |_| 1));
        assert_eq!(total, 1);
        assert_eq!(shown[0].vertex, 4);
        assert_eq!(shown[0].face_vertices, vec![1, 2]);
        assert_eq!(shown[0].cell, 0);
        assert_eq!(shown[0].duplicate_of, None);
        assert!(shown[0].to_string().contains("hanging node"));
    }

    #[test]
    fn a_crack_in_2d_is_refused_listing_at_most_the_limit() {
        let mesh = unit_square(16, Diagonal::Right).unwrap();
        // Cells right of x = 0.5 get their own copies of the 15 interior vertices on it.
        let (vertices, cells) = split_along(
            &mesh,
            |x| (x[0] - 0.5).abs() < 1e-12 && x[1] > 1e-12 && x[1] < 1.0 - 1e-12,
            |c| c[0] > 0.5,
        );
        let err = Mesh::new(CellType::Triangle, vertices, cells, |_| 1).unwrap_err();
        let message = err.to_string();
        let (total, shown) = non_conforming(Err(err));
        // Each of the 15 vertices and each of its 15 copies lies on the other side's faces.
        assert_eq!(total, 30);
        assert_eq!(shown.len(), MAX_REPORTED);
        assert!(shown.iter().all(|n| n.duplicate_of.is_some()), "{shown:?}");
        assert!(message.contains("internal crack") && message.contains("and 20 more"), "{message}");
    }

    #[test]
    fn a_crack_and_a_hanging_node_in_3d_are_refused() {
        let mesh = unit_cube(2).unwrap();
        let centre = |x: &[f64]| x.iter().all(|&c| (c - 0.5).abs() < 1e-12);
        let (vertices, cells) = split_along(&mesh, centre, |c| c[0] > 0.5);
        let (total, shown) =
            non_conforming(Mesh::new(CellType::Tetrahedron, vertices, cells, |_| 1));
        assert_eq!(total, 2, "{shown:?}");

        // A hanging node: the cube [0,1]^3 (Kuhn split) beside the box [1,2]x[0,1]^2 cut into
        // two half-height boxes, whose vertices at z = 0.5 on x = 1 lie inside the first
        // cube's faces.
        let left = unit_cube(1).unwrap();
        let mut vertices = left.vertices().to_vec();
        let mut cells = left.cells().to_vec();
        for (z0, z1) in [(0.0, 0.5), (0.5, 1.0)] {
            let right = crate::box_mesh([1, 1, 1], [1.0, 2.0], [0.0, 1.0], [z0, z1]).unwrap();
            let base = vertices.len() / 3;
            vertices.extend_from_slice(right.vertices());
            cells.extend(right.cells().iter().map(|&v| v + base));
        }
        // Merge coincident vertices so that only the hanging ones stay unmatched.
        let (vertices, cells) = merge_coincident(&vertices, &cells, 3);
        let (_, shown) = non_conforming(Mesh::new(CellType::Tetrahedron, vertices, cells, |_| 1));
        assert!(shown.iter().all(|n| n.duplicate_of.is_none() && n.point[2] == 0.5), "{shown:?}");
    }

    /// Gives coincident vertices one number.
    fn merge_coincident(vertices: &[f64], cells: &[usize], dim: usize) -> (Vec<f64>, Vec<usize>) {
        let mut out: Vec<f64> = Vec::new();
        let mut map = Vec::new();
        for x in vertices.chunks_exact(dim) {
            let found = out.chunks_exact(dim).position(|y| y.iter().zip(x).all(|(a, b)| a == b));
            map.push(found.unwrap_or_else(|| {
                out.extend_from_slice(x);
                out.len() / dim - 1
            }));
        }
        (out, cells.iter().map(|&v| map[v]).collect())
    }
}
