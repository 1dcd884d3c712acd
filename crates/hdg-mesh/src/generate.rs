//! Mesh generators and transformations: structured triangulations of rectangles and random
//! interior-vertex perturbations.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

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
    let n_coords =
        (nx + 1).checked_mul(ny + 1).and_then(|n| n.checked_mul(2)).ok_or_else(|| {
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
    let mut vertices = Vec::with_capacity(n_coords);
    for j in 0..=ny {
        let yj = coord(y[0], y[1], j, ny);
        for i in 0..=nx {
            vertices.push(coord(x[0], x[1], i, nx));
            vertices.push(yj);
        }
    }
    let mut cells = Vec::with_capacity(n_cell_entries);
    for j in 0..ny {
        for i in 0..nx {
            let v00 = j * (nx + 1) + i;
            let (v10, v01, v11) = (v00 + 1, v00 + nx + 1, v00 + nx + 2);
            let right = match diagonal {
                Diagonal::Right => true,
                Diagonal::Left => false,
                Diagonal::Alternating => (i + j) % 2 == 0,
            };
            if right {
                cells.extend_from_slice(&[v00, v10, v11, v00, v11, v01]);
            } else {
                cells.extend_from_slice(&[v00, v10, v01, v10, v11, v01]);
            }
        }
    }
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
