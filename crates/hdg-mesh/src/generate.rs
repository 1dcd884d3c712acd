//! Mesh generators and transformations: structured triangulations of rectangles, structured
//! tetrahedral meshes of boxes, and random interior-vertex perturbations.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use crate::{CellType, Mesh, MeshError};

/// How each square of a structured grid is cut into two triangles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Diagonal {
    /// Every square cut along its diagonal from (x0, y0) to (x1, y1) (lower left to upper right).
    Right,
    /// Every square cut along its diagonal from (x0, y1) to (x1, y0) (upper left to lower right).
    Left,
    /// Chequerboard of the two: square (i, j) is cut as [`Diagonal::Right`] when `i + j` is even,
    /// as [`Diagonal::Left`] otherwise.
    Alternating,
}

/// Boundary tag of the bottom side (y = y0) of a [`rectangle`].
pub const TAG_BOTTOM: u32 = 1;
/// Boundary tag of the right side (x = x1) of a [`rectangle`].
pub const TAG_RIGHT: u32 = 2;
/// Boundary tag of the top side (y = y1) of a [`rectangle`].
pub const TAG_TOP: u32 = 3;
/// Boundary tag of the left side (x = x0) of a [`rectangle`].
pub const TAG_LEFT: u32 = 4;

/// A structured triangle mesh of `nx` x `ny` equal squares (rectangles) on `[x0, x1] x [y0, y1]`,
/// each cut into 2 positively oriented triangles according to `diagonal`.
///
/// Vertex `j * (nx + 1) + i` sits at grid point `(i, j)`; the two triangles of square `(i, j)`
/// are cells `2 * (j * nx + i)` and `2 * (j * nx + i) + 1`. Boundary tags: [`TAG_BOTTOM`] = 1
/// (y = y0), [`TAG_RIGHT`] = 2 (x = x1), [`TAG_TOP`] = 3 (y = y1), [`TAG_LEFT`] = 4 (x = x0).
///
/// # Errors
/// [`MeshError::InvalidParameter`] when `nx` or `ny` is 0, the mesh size overflows, or a bound is
/// not finite or `x1 <= x0` or `y1 <= y0`.
pub fn rectangle(
    nx: usize,
    ny: usize,
    x: [f64; 2],
    y: [f64; 2],
    diagonal: Diagonal,
) -> Result<Mesh, MeshError> {
    if nx == 0 || ny == 0 {
        return Err(MeshError::InvalidParameter(format!(
            "rectangle needs nx, ny >= 1 (got nx = {nx}, ny = {ny})"
        )));
    }
    if !x.iter().chain(&y).all(|b| b.is_finite()) || x[1] <= x[0] || y[1] <= y[0] {
        return Err(MeshError::InvalidParameter(format!(
            "rectangle needs finite bounds with x0 < x1 and y0 < y1 (got x = {x:?}, y = {y:?})"
        )));
    }
    let n_coords = nx
        .checked_add(1)
        .zip(ny.checked_add(1))
        .and_then(|(a, b)| a.checked_mul(b))
        .and_then(|n| n.checked_mul(2))
        .ok_or_else(|| {
            MeshError::InvalidParameter(format!("rectangle {nx} x {ny} is too large"))
        })?;
    let n_cell_entries = nx.checked_mul(ny).and_then(|n| n.checked_mul(6)).ok_or_else(|| {
        MeshError::InvalidParameter(format!("rectangle {nx} x {ny} is too large"))
    })?;

    let coord = |lo: f64, hi: f64, i: usize, n: usize| {
        if i == n {
            hi
        } else {
            lo + (hi - lo) * (i as f64 / n as f64)
        }
    };
    // Rows of the grid in parallel (one thread's first touch of these pages cost more than
    // the rest of the generation).
    let mut vertices = vec![0.0; n_coords];
    vertices.par_chunks_mut(2 * (nx + 1)).enumerate().for_each(|(j, row)| {
        let yj = coord(y[0], y[1], j, ny);
        for (i, point) in row.chunks_mut(2).enumerate() {
            point.copy_from_slice(&[coord(x[0], x[1], i, nx), yj]);
        }
    });
    let mut cells = vec![0; n_cell_entries];
    cells.par_chunks_mut(6 * nx).enumerate().for_each(|(j, row)| {
        for (i, square) in row.chunks_mut(6).enumerate() {
            let v00 = j * (nx + 1) + i;
            let (v10, v01, v11) = (v00 + 1, v00 + nx + 1, v00 + nx + 2);
            let right = match diagonal {
                Diagonal::Right => true,
                Diagonal::Left => false,
                Diagonal::Alternating => (i + j) % 2 == 0,
            };
            if right {
                square.copy_from_slice(&[v00, v10, v11, v00, v11, v01]);
            } else {
                square.copy_from_slice(&[v00, v10, v01, v10, v11, v01]);
            }
        }
    });
    // Boundary face centroids are edge midpoints: exactly on their side, at least half a cell
    // away from the others.
    let (tol_x, tol_y) = (0.25 * (x[1] - x[0]) / nx as f64, 0.25 * (y[1] - y[0]) / ny as f64);
    Mesh::new(CellType::Triangle, vertices, cells, |p| {
        if (p[1] - y[0]).abs() < tol_y {
            TAG_BOTTOM
        } else if (p[0] - x[1]).abs() < tol_x {
            TAG_RIGHT
        } else if (p[1] - y[1]).abs() < tol_y {
            TAG_TOP
        } else {
            TAG_LEFT
        }
    })
}

/// [`rectangle`] on the unit square `[0, 1]^2` with `n` x `n` squares.
///
/// # Errors
/// [`MeshError::InvalidParameter`] when `n` is 0 or too large.
pub fn unit_square(n: usize, diagonal: Diagonal) -> Result<Mesh, MeshError> {
    rectangle(n, n, [0.0, 1.0], [0.0, 1.0], diagonal)
}

/// Boundary tag of the side x = x0 of a [`box_mesh`].
pub const TAG_X0: u32 = 1;
/// Boundary tag of the side x = x1 of a [`box_mesh`].
pub const TAG_X1: u32 = 2;
/// Boundary tag of the side y = y0 of a [`box_mesh`].
pub const TAG_Y0: u32 = 3;
/// Boundary tag of the side y = y1 of a [`box_mesh`].
pub const TAG_Y1: u32 = 4;
/// Boundary tag of the side z = z0 of a [`box_mesh`].
pub const TAG_Z0: u32 = 5;
/// Boundary tag of the side z = z1 of a [`box_mesh`].
pub const TAG_Z1: u32 = 6;

/// The six tetrahedra of the Kuhn (Freudenthal) split of the unit cube, as corner indices
/// `a + 2 b + 4 c` of the corner `(a, b, c)`.
///
/// Tetrahedron `p` follows the monotone path from corner `(0,0,0)` to `(1,1,1)` that steps
/// along the axes in the order of the `p`-th permutation of `(x, y, z)`. All six share the main
/// diagonal; the split of every cube face is the same for every cube (each square face is cut
/// along its diagonal through the corner nearest `(0,0,0)`), so translated copies of the cube
/// meet face to face: the mesh is conforming.
fn kuhn_tetrahedra() -> [[usize; 4]; 6] {
    const AXES: [[usize; 3]; 6] =
        [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]];
    let mut tets = [[0usize; 4]; 6];
    for (tet, axes) in tets.iter_mut().zip(&AXES) {
        let mut corner = 0;
        for (step, &axis) in axes.iter().enumerate() {
            corner += 1 << axis;
            tet[step + 1] = corner;
        }
    }
    tets
}

/// A structured tetrahedral mesh of `nx` x `ny` x `nz` equal boxes on
/// `[x0, x1] x [y0, y1] x [z0, z1]`, each cut into the 6 tetrahedra of the Kuhn (Freudenthal)
/// split, positively oriented; the faces of neighbouring boxes match.
///
/// Vertex `(k * (ny + 1) + j) * (nx + 1) + i` sits at grid point `(i, j, k)`; the tetrahedra of
/// box `(i, j, k)` are cells `6 * ((k * ny + j) * nx + i) + p`, `p < 6`. Boundary tags:
/// [`TAG_X0`] = 1 (x = x0), [`TAG_X1`] = 2, [`TAG_Y0`] = 3, [`TAG_Y1`] = 4, [`TAG_Z0`] = 5,
/// [`TAG_Z1`] = 6 (z = z1).
///
/// # Errors
/// [`MeshError::InvalidParameter`] when a count is 0, the mesh size overflows, or a bound is not
/// finite or not increasing.
pub fn box_mesh(n: [usize; 3], x: [f64; 2], y: [f64; 2], z: [f64; 2]) -> Result<Mesh, MeshError> {
    let [nx, ny, nz] = n;
    if nx == 0 || ny == 0 || nz == 0 {
        return Err(MeshError::InvalidParameter(format!(
            "box mesh needs nx, ny, nz >= 1 (got {nx} x {ny} x {nz})"
        )));
    }
    let bounds = [x, y, z];
    if !bounds.iter().flatten().all(|b| b.is_finite()) || bounds.iter().any(|b| b[1] <= b[0]) {
        return Err(MeshError::InvalidParameter(format!(
            "box mesh needs finite bounds with lower < upper (got x = {x:?}, y = {y:?}, z = {z:?})"
        )));
    }
    let too_large =
        || MeshError::InvalidParameter(format!("box mesh {nx} x {ny} x {nz} is too large"));
    let n_vertices = nx
        .checked_add(1)
        .and_then(|a| a.checked_mul(ny.checked_add(1)?))
        .and_then(|v| v.checked_mul(nz.checked_add(1)?))
        .filter(|v| v.checked_mul(3).is_some())
        .ok_or_else(too_large)?;
    let n_boxes = nx.checked_mul(ny).and_then(|v| v.checked_mul(nz)).ok_or_else(too_large)?;
    n_boxes.checked_mul(24).ok_or_else(too_large)?;

    let coord = |lo: f64, hi: f64, i: usize, n: usize| {
        if i == n {
            hi
        } else {
            lo + (hi - lo) * (i as f64 / n as f64)
        }
    };
    // Rows of the grid in parallel, as in `rectangle`.
    let mut vertices = vec![0.0; 3 * n_vertices];
    vertices.par_chunks_mut(3 * (nx + 1)).enumerate().for_each(|(row, points)| {
        let (j, k) = (row % (ny + 1), row / (ny + 1));
        let (yj, zk) = (coord(y[0], y[1], j, ny), coord(z[0], z[1], k, nz));
        for (i, point) in points.chunks_mut(3).enumerate() {
            point.copy_from_slice(&[coord(x[0], x[1], i, nx), yj, zk]);
        }
    });
    // Corner c = a + 2 b + 4 c' of box (i, j, k) is grid vertex (i + a, j + b, k + c').
    let vertex = |i: usize, j: usize, k: usize| (k * (ny + 1) + j) * (nx + 1) + i;
    let offsets: [usize; 8] = std::array::from_fn(|c| vertex(c & 1, (c >> 1) & 1, c >> 2));
    // Orientation of each Kuhn tetrahedron: the sign of its reference determinant, the same in
    // every box (the boxes are translates and positive scalings of the unit cube). Swapping the
    // last two vertices of a negative one makes every cell positively oriented.
    let tets = kuhn_tetrahedra().map(|mut t| {
        let p = |c: usize| [(c & 1) as f64, ((c >> 1) & 1) as f64, (c >> 2) as f64];
        let (p0, p1, p2, p3) = (p(t[0]), p(t[1]), p(t[2]), p(t[3]));
        let a: [[f64; 3]; 3] = std::array::from_fn(|r| {
            let q = [p1, p2, p3][r];
            std::array::from_fn(|s| q[s] - p0[s])
        });
        let det = a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1])
            - a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0])
            + a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0]);
        if det < 0.0 {
            t.swap(2, 3);
        }
        t
    });
    let mut cells = vec![0; 24 * n_boxes];
    cells.par_chunks_mut(24 * nx).enumerate().for_each(|(row, boxes)| {
        let (j, k) = (row % ny, row / ny);
        for (i, cells) in boxes.chunks_mut(24).enumerate() {
            let base = vertex(i, j, k);
            for (t, cell) in tets.iter().zip(cells.chunks_mut(4)) {
                for (slot, &c) in cell.iter_mut().zip(t) {
                    *slot = base + offsets[c];
                }
            }
        }
    });
    // Boundary face centroids lie exactly on their side and at least a third of a box away
    // from the other sides.
    let tol: [f64; 3] = std::array::from_fn(|d| 0.25 * (bounds[d][1] - bounds[d][0]) / n[d] as f64);
    Mesh::new(CellType::Tetrahedron, vertices, cells, |p| {
        for d in 0..3 {
            if (p[d] - bounds[d][0]).abs() < tol[d] {
                return TAG_X0 + 2 * d as u32;
            }
            if (p[d] - bounds[d][1]).abs() < tol[d] {
                return TAG_X1 + 2 * d as u32;
            }
        }
        TAG_X0
    })
}

/// [`box_mesh`] on the unit cube `[0, 1]^3` with `n` x `n` x `n` boxes (`6 n^3` tetrahedra).
///
/// # Errors
/// [`MeshError::InvalidParameter`] when `n` is 0 or too large.
pub fn unit_cube(n: usize) -> Result<Mesh, MeshError> {
    box_mesh([n, n, n], [0.0, 1.0], [0.0, 1.0], [0.0, 1.0])
}

/// Randomly moves every vertex that is not on the boundary, deterministically for a `seed`
/// (ChaCha8Rng).
///
/// Each coordinate of vertex `v` moves by a uniform random amount in `[-a h_v, a h_v]`, with
/// `a = amplitude` and `h_v` the shortest edge at `v`. Vertices are moved one after the other; a
/// move that would make an adjacent cell's measure fall below 0.2 of its original measure is
/// halved repeatedly (and dropped in the end), so every cell stays valid. Boundary vertices (on a
/// boundary face) and vertices of no cell stay where they are. The result has the same topology,
/// face numbering and boundary tags as `mesh`.
///
/// # Errors
/// [`MeshError::InvalidParameter`] when `amplitude` is not in `[0, 0.4]`.
pub fn perturb(mesh: &Mesh, amplitude: f64, seed: u64) -> Result<Mesh, MeshError> {
    if !(0.0..=0.4).contains(&amplitude) {
        return Err(MeshError::InvalidParameter(format!(
            "perturbation amplitude must be in [0, 0.4] (got {amplitude})"
        )));
    }
    let dim = mesh.dim();
    let n_v = mesh.n_vertices();
    let n_c = mesh.n_cells();
    let vpc = mesh.cell_type().vertices_per_cell();

    let mut on_boundary = vec![false; n_v];
    for f in 0..mesh.n_faces() {
        if mesh.is_boundary_face(f) {
            for &v in mesh.face_vertices(f) {
                on_boundary[v] = true;
            }
        }
    }
    // Vertex -> cells (CSR) and the shortest edge at each vertex.
    let mut offsets = vec![0usize; n_v + 1];
    let mut h_min = vec![f64::INFINITY; n_v];
    for c in 0..n_c {
        let cv = mesh.cell_vertices(c);
        for (i, &v) in cv.iter().enumerate() {
            offsets[v + 1] += 1;
            for &w in &cv[i + 1..] {
                let d = (0..dim)
                    .map(|k| (mesh.vertex(v)[k] - mesh.vertex(w)[k]).powi(2))
                    .sum::<f64>()
                    .sqrt();
                h_min[v] = h_min[v].min(d);
                h_min[w] = h_min[w].min(d);
            }
        }
    }
    for v in 0..n_v {
        offsets[v + 1] += offsets[v];
    }
    let mut vertex_cells = vec![0usize; offsets[n_v]];
    {
        let mut next = offsets.clone();
        for c in 0..n_c {
            for &v in mesh.cell_vertices(c) {
                vertex_cells[next[v]] = c;
                next[v] += 1;
            }
        }
    }
    let original: Vec<f64> = (0..n_c).map(|c| mesh.cell_measure(c)).collect();

    let mut vertices = mesh.vertices().to_vec();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut delta = [0.0f64; 3];
    let mut coords = [0.0f64; 12];
    for v in 0..n_v {
        // Draw for every vertex so that the random stream does not depend on the boundary.
        for d in delta.iter_mut().take(dim) {
            *d = rng.gen_range(-1.0..=1.0);
        }
        if on_boundary[v] || !h_min[v].is_finite() || amplitude == 0.0 {
            continue;
        }
        let scale = amplitude * h_min[v];
        let mut base = [0.0f64; 3];
        base[..dim].copy_from_slice(&vertices[v * dim..(v + 1) * dim]);
        let mut factor = scale;
        let mut accepted = false;
        for _ in 0..30 {
            for k in 0..dim {
                vertices[v * dim + k] = base[k] + factor * delta[k];
            }
            let ok = vertex_cells[offsets[v]..offsets[v + 1]].iter().all(|&c| {
                for (i, &w) in mesh.cell_vertices(c).iter().enumerate() {
                    coords[i * dim..(i + 1) * dim]
                        .copy_from_slice(&vertices[w * dim..(w + 1) * dim]);
                }
                let m = crate::mesh::simplex_measure(mesh.cell_type(), &coords[..vpc * dim]);
                m >= 0.2 * original[c]
            });
            if ok {
                accepted = true;
                break;
            }
            factor *= 0.5;
        }
        if !accepted {
            vertices[v * dim..(v + 1) * dim].copy_from_slice(&base[..dim]);
        }
    }
    Ok(mesh.with_vertices(vertices))
}
