//! The conforming simplicial mesh: vertices, cells, faces with their canonical orientation,
//! cell-face incidence and boundary tags.

use rayon::prelude::*;

use crate::{CellType, MeshError};

/// Marker for "no cell": the second cell of a boundary face.
pub const NO_CELL: usize = usize::MAX;

/// A conforming simplicial mesh with its faces.
///
/// Faces have a canonical orientation: their vertices sorted by global number. Faces are numbered
/// in order of first appearance when scanning the cells in order and, within a cell, its local
/// faces in order. Every cell is positively oriented (positive signed measure): cells given
/// the other way round are flipped when the mesh is built ([`Mesh::flipped_cells`]).
///
/// Local conventions (which local vertices make up local face `f`, in which order) are those of
/// [`CellType::face_vertices`].
#[derive(Clone, Debug)]
pub struct Mesh {
    cell_type: CellType,
    /// `n_vertices * dim` coordinates, vertex-major.
    vertices: Vec<f64>,
    /// `n_cells * vertices_per_cell` global vertex numbers.
    cells: Vec<usize>,
    /// `n_cells * faces_per_cell` global face numbers.
    cell_faces: Vec<usize>,
    /// `n_cells * faces_per_cell` orientation codes.
    cell_face_orientations: Vec<u8>,
    /// `n_faces * vertices_per_face` global vertex numbers, each face sorted ascending.
    face_vertices: Vec<usize>,
    /// The (one or two) cells of each face, lower-numbered first; [`NO_CELL`] second on the boundary.
    face_cells: Vec<[usize; 2]>,
    /// Local face index of each face in each of its cells (0 for [`NO_CELL`]).
    face_local: Vec<[u8; 2]>,
    /// Boundary tag of each face (>= 1 on the boundary, 0 for interior faces).
    boundary_tags: Vec<u32>,
    /// Number of boundary faces.
    n_boundary_faces: usize,
    /// Longest edge.
    h_max: f64,
    /// How many cells were given negatively oriented and were flipped.
    flipped_cells: usize,
}

/// Signed measure of a simplex given its vertex coordinates (`dim + 1` points of `dim` coordinates,
/// vertex-major) — area for triangles, volume for tetrahedra.
pub(crate) fn simplex_measure(cell_type: CellType, coords: &[f64]) -> f64 {
    match cell_type {
        CellType::Triangle => {
            let (ax, ay) = (coords[2] - coords[0], coords[3] - coords[1]);
            let (bx, by) = (coords[4] - coords[0], coords[5] - coords[1]);
            0.5 * (ax * by - ay * bx)
        }
        CellType::Tetrahedron => {
            let d = |i: usize, k: usize| coords[3 * i + k] - coords[k];
            let (a, b, c) = (
                [d(1, 0), d(1, 1), d(1, 2)],
                [d(2, 0), d(2, 1), d(2, 2)],
                [d(3, 0), d(3, 1), d(3, 2)],
            );
            let det = a[0] * (b[1] * c[2] - b[2] * c[1]) - a[1] * (b[0] * c[2] - b[2] * c[0])
                + a[2] * (b[0] * c[1] - b[1] * c[0]);
            det / 6.0
        }
    }
}

/// Unsigned measure of a face (length of an edge, area of a triangle) from its vertex coordinates.
fn face_measure_of(cell_type: CellType, coords: &[f64]) -> f64 {
    match cell_type {
        CellType::Triangle => {
            let (ax, ay) = (coords[2] - coords[0], coords[3] - coords[1]);
            ax.hypot(ay)
        }
        CellType::Tetrahedron => {
            let a = [coords[3] - coords[0], coords[4] - coords[1], coords[5] - coords[2]];
            let b = [coords[6] - coords[0], coords[7] - coords[1], coords[8] - coords[2]];
            let c =
                [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]];
            0.5 * (c[0] * c[0] + c[1] * c[1] + c[2] * c[2]).sqrt()
        }
    }
}

/// Checks that `perm` is a permutation of `0..n`.
fn check_permutation(perm: &[usize], n: usize, what: &str) -> Result<(), MeshError> {
    if perm.len() != n {
        return Err(MeshError::InvalidParameter(format!(
            "{what} permutation has length {}, expected {n}",
            perm.len()
        )));
    }
    let mut seen = vec![false; n];
    for (i, &p) in perm.iter().enumerate() {
        if p >= n || seen[p] {
            return Err(MeshError::InvalidParameter(format!(
                "{what} permutation is not a permutation of 0..{n} (entry {i} = {p})"
            )));
        }
        seen[p] = true;
    }
    Ok(())
}

impl Mesh {
    /// Builds the faces of a simplicial mesh and validates it.
    ///
    /// `vertices` holds `dim` coordinates per vertex (vertex-major), `cells` holds
    /// `vertices_per_cell` global vertex numbers per cell. A negatively oriented cell (a
    /// clockwise triangle, a mirrored tetrahedron) is flipped by swapping its last two
    /// vertices, as mesh files often need; [`Mesh::flipped_cells`] says how many were (a
    /// caller that wants only positively oriented input refuses a mesh where it is not 0).
    /// `boundary_tag` is called with the centroid of every boundary face and returns its tag; tags
    /// must be at least 1 (0 is clamped to 1).
    ///
    /// # Errors
    /// - [`MeshError::BadArrayLength`]: `vertices` or `cells` not a multiple of its stride;
    /// - [`MeshError::Empty`]: no cells;
    /// - [`MeshError::NonFiniteCoordinate`]: a NaN or infinite coordinate;
    /// - [`MeshError::VertexOutOfRange`], [`MeshError::RepeatedVertex`]: bad cell connectivity;
    /// - [`MeshError::NonPositiveMeasure`]: a cell whose measure has magnitude at most
    ///   `1e-14 * h^dim`, `h` its longest edge (degenerate);
    /// - [`MeshError::NonManifoldFace`]: a face shared by three or more cells;
    /// - [`MeshError::NonConforming`]: cells that do not meet face to face (a hanging node, or
    ///   a duplicated vertex opening an internal crack; [`crate::conformity`]), every offending
    ///   vertex up to a limit.
    ///
    /// Cells are checked in order: the first cell with bad connectivity is reported; cells
    /// with bad measure are all counted and the first few named.
    pub fn new(
        cell_type: CellType,
        vertices: Vec<f64>,
        cells: Vec<usize>,
        boundary_tag: impl Fn(&[f64]) -> u32,
    ) -> Result<Mesh, MeshError> {
        Self::with_boundary_tags(cell_type, vertices, cells, |_, centroid| boundary_tag(centroid))
    }

    /// [`Mesh::new`] with boundary tags chosen from each boundary face's vertices (sorted
    /// ascending) as well as its centroid: how a mesh file's tagged boundary elements are
    /// matched to faces. Tags must be at least 1 (0 is clamped to 1).
    ///
    /// # Errors
    /// Those of [`Mesh::new`].
    pub fn with_boundary_tags(
        cell_type: CellType,
        vertices: Vec<f64>,
        cells: Vec<usize>,
        boundary_tag: impl Fn(&[usize], &[f64]) -> u32,
    ) -> Result<Mesh, MeshError> {
        let mut mesh = Self::build(cell_type, vertices, cells)?;
        let dim = mesh.dim();
        let mut centroid = vec![0.0; dim];
        // The boundary faces found in parallel, then tagged in order (the tag may be any Fn).
        let boundary: Vec<usize> = (0..mesh.n_faces())
            .into_par_iter()
            .filter(|&f| mesh.face_cells[f][1] == NO_CELL)
            .collect();
        for f in boundary {
            centroid.iter_mut().for_each(|x| *x = 0.0);
            let fv = mesh.face_vertices(f);
            for &v in fv {
                for (k, x) in centroid.iter_mut().enumerate() {
                    *x += mesh.vertices[v * dim + k];
                }
            }
            let inv = 1.0 / fv.len() as f64;
            centroid.iter_mut().for_each(|x| *x *= inv);
            mesh.boundary_tags[f] = boundary_tag(fv, &centroid).max(1);
        }
        Ok(mesh)
    }

    /// Validates and builds faces; boundary tags are left at 1 on boundary faces.
    fn build(
        cell_type: CellType,
        vertices: Vec<f64>,
        mut cells: Vec<usize>,
    ) -> Result<Mesh, MeshError> {
        let dim = cell_type.dim();
        let vpc = cell_type.vertices_per_cell();
        // (`is_multiple_of` needs Rust 1.87; the workspace declares 1.85.)
        let (vertex_rem, cell_rem) = (vertices.len() % dim, cells.len() % vpc);
        if vertex_rem != 0 {
            return Err(MeshError::BadArrayLength {
                what: "vertices",
                len: vertices.len(),
                multiple: dim,
            });
        }
        if cell_rem != 0 {
            return Err(MeshError::BadArrayLength {
                what: "cells",
                len: cells.len(),
                multiple: vpc,
            });
        }
        let n_v = vertices.len() / dim;
        let n_c = cells.len() / vpc;
        if n_c == 0 {
            return Err(MeshError::Empty);
        }
        if let Some(i) = vertices.par_iter().position_first(|x| !x.is_finite()) {
            return Err(MeshError::NonFiniteCoordinate { vertex: i / dim });
        }

        let (h_max, flipped_cells) = crate::build::check_cells(cell_type, &vertices, &mut cells)?;
        let crate::build::Faces {
            cell_faces,
            cell_face_orientations,
            face_vertices,
            face_cells,
            face_local,
        } = crate::build::match_faces(cell_type, n_v, &cells)?;
        let boundary_tags: Vec<u32> =
            face_cells.par_iter().map(|fc| u32::from(fc[1] == NO_CELL)).collect();
        let n_boundary_faces = boundary_tags.par_iter().filter(|&&t| t != 0).count();

        let mesh = Mesh {
            cell_type,
            vertices,
            cells,
            cell_faces,
            cell_face_orientations,
            face_vertices,
            face_cells,
            face_local,
            boundary_tags,
            n_boundary_faces,
            h_max,
            flipped_cells,
        };
        crate::conformity::check(&mesh)?;
        Ok(mesh)
    }

    /// The shape of the cells.
    pub fn cell_type(&self) -> CellType {
        self.cell_type
    }

    /// Spatial dimension.
    pub fn dim(&self) -> usize {
        self.cell_type.dim()
    }

    /// Number of vertices.
    pub fn n_vertices(&self) -> usize {
        self.vertices.len() / self.dim()
    }

    /// Number of cells.
    pub fn n_cells(&self) -> usize {
        self.cells.len() / self.cell_type.vertices_per_cell()
    }

    /// Number of faces (interior and boundary).
    pub fn n_faces(&self) -> usize {
        self.face_cells.len()
    }

    /// Number of boundary faces (faces with a single cell).
    pub fn n_boundary_faces(&self) -> usize {
        self.n_boundary_faces
    }

    /// Coordinates of vertex `v` (`dim` entries).
    pub fn vertex(&self, v: usize) -> &[f64] {
        let d = self.dim();
        &self.vertices[v * d..(v + 1) * d]
    }

    /// All vertex coordinates, `n_vertices * dim` entries, vertex-major.
    pub fn vertices(&self) -> &[f64] {
        &self.vertices
    }

    /// Global vertex numbers of cell `c`, in local order.
    pub fn cell_vertices(&self, c: usize) -> &[usize] {
        let n = self.cell_type.vertices_per_cell();
        &self.cells[c * n..(c + 1) * n]
    }

    /// Global face number of each local face of cell `c`.
    pub fn cell_faces(&self, c: usize) -> &[usize] {
        let n = self.cell_type.faces_per_cell();
        &self.cell_faces[c * n..(c + 1) * n]
    }

    /// Orientation code ([`CellType::orientation`]) of each local face of cell `c`: the code of the
    /// local face's global vertices taken in local order ([`CellType::face_vertices`]).
    pub fn cell_face_orientations(&self, c: usize) -> &[u8] {
        let n = self.cell_type.faces_per_cell();
        &self.cell_face_orientations[c * n..(c + 1) * n]
    }

    /// Global vertex numbers of face `f`, sorted ascending (the canonical orientation).
    pub fn face_vertices(&self, f: usize) -> &[usize] {
        let n = self.cell_type.vertices_per_face();
        &self.face_vertices[f * n..(f + 1) * n]
    }

    /// The cells of face `f`: the lower-numbered one first, then the other or [`NO_CELL`] on the
    /// boundary.
    pub fn face_cells(&self, f: usize) -> [usize; 2] {
        self.face_cells[f]
    }

    /// Local face index of face `f` in each of [`Mesh::face_cells`] (0 where the cell is
    /// [`NO_CELL`]).
    pub fn face_local_index(&self, f: usize) -> [u8; 2] {
        self.face_local[f]
    }

    /// Whether face `f` lies on the boundary (has a single cell).
    pub fn is_boundary_face(&self, f: usize) -> bool {
        self.face_cells[f][1] == NO_CELL
    }

    /// Boundary tag of face `f`: at least 1 on boundary faces, 0 for interior faces.
    pub fn boundary_tag(&self, f: usize) -> u32 {
        self.boundary_tags[f]
    }

    /// Signed measure of cell `c` (area in 2D, volume in 3D); positive for every valid mesh.
    pub fn cell_measure(&self, c: usize) -> f64 {
        let dim = self.dim();
        let mut coords = [0.0f64; 12];
        for (i, &v) in self.cell_vertices(c).iter().enumerate() {
            coords[i * dim..(i + 1) * dim].copy_from_slice(self.vertex(v));
        }
        simplex_measure(self.cell_type, &coords[..self.cell_type.vertices_per_cell() * dim])
    }

    /// Measure of face `f` (length of an edge in 2D, area of a triangle in 3D).
    pub fn face_measure(&self, f: usize) -> f64 {
        let dim = self.dim();
        let mut coords = [0.0f64; 9];
        for (i, &v) in self.face_vertices(f).iter().enumerate() {
            coords[i * dim..(i + 1) * dim].copy_from_slice(self.vertex(v));
        }
        face_measure_of(self.cell_type, &coords[..self.cell_type.vertices_per_face() * dim])
    }

    /// The number of boundary faces of each tag, by ascending tag (what a summary prints so
    /// that a missing or misplaced boundary part shows).
    pub fn boundary_tag_counts(&self) -> Vec<(u32, usize)> {
        let mut counts = std::collections::BTreeMap::new();
        for &t in self.boundary_tags.iter().filter(|&&t| t != 0) {
            *counts.entry(t).or_insert(0usize) += 1;
        }
        counts.into_iter().collect()
    }

    /// Every cell's global vertex numbers, `vertices_per_cell` per cell, cell-major.
    pub fn cells(&self) -> &[usize] {
        &self.cells
    }

    /// Length of the longest edge of the mesh.
    pub fn h_max(&self) -> f64 {
        self.h_max
    }

    /// How many cells were given negatively oriented (a clockwise triangle, a mirrored
    /// tetrahedron) and were flipped when the mesh was built ([`Mesh::new`]); a renumbered
    /// mesh keeps its original's count.
    pub fn flipped_cells(&self) -> usize {
        self.flipped_cells
    }

    /// Sets the tag of boundary face `f` (at least 1): how a mesh part tags its faces from the
    /// whole mesh's, face by face, without matching vertex lists.
    pub(crate) fn set_boundary_tag(&mut self, f: usize, tag: u32) {
        debug_assert!(self.is_boundary_face(f) && tag >= 1);
        self.boundary_tags[f] = tag;
    }

    /// Copies the boundary tags of `old` into `self`, where local face `l` of new cell `c` is local
    /// face `l` of old cell `cell_map(c)`.
    fn copy_tags_from(&mut self, old: &Mesh, cell_map: impl Fn(usize) -> usize) {
        for f in 0..self.n_faces() {
            if self.is_boundary_face(f) {
                let c = self.face_cells[f][0];
                let l = self.face_local[f][0] as usize;
                let old_f = old.cell_faces(cell_map(c))[l];
                self.boundary_tags[f] = old.boundary_tags[old_f];
            }
        }
    }

    /// A new mesh whose cell `i` is old cell `perm[i]` (same local vertex order, so the same
    /// orientation); faces are rebuilt (renumbered by first appearance) and boundary tags are kept.
    ///
    /// # Errors
    /// [`MeshError::InvalidParameter`] if `perm` is not a permutation of `0..n_cells`.
    pub fn renumber_cells(&self, perm: &[usize]) -> Result<Mesh, MeshError> {
        check_permutation(perm, self.n_cells(), "cell")?;
        let vpc = self.cell_type.vertices_per_cell();
        let mut cells = Vec::with_capacity(self.cells.len());
        for &p in perm {
            cells.extend_from_slice(&self.cells[p * vpc..(p + 1) * vpc]);
        }
        let mut mesh = Self::build(self.cell_type, self.vertices.clone(), cells)?;
        mesh.copy_tags_from(self, |c| perm[c]);
        mesh.flipped_cells = self.flipped_cells;
        Ok(mesh)
    }

    /// A new mesh in which old vertex `v` becomes vertex `perm[v]` (so new vertex `perm[v]` has
    /// the coordinates of old vertex `v`). Cells keep their numbers and local vertex order; faces
    /// are rebuilt (face vertices re-sorted, orientation codes recomputed) and boundary tags are
    /// kept.
    ///
    /// # Errors
    /// [`MeshError::InvalidParameter`] if `perm` is not a permutation of `0..n_vertices`.
    pub fn renumber_vertices(&self, perm: &[usize]) -> Result<Mesh, MeshError> {
        let n_v = self.n_vertices();
        check_permutation(perm, n_v, "vertex")?;
        let dim = self.dim();
        let mut vertices = vec![0.0; self.vertices.len()];
        for (v, &p) in perm.iter().enumerate() {
            vertices[p * dim..(p + 1) * dim].copy_from_slice(self.vertex(v));
        }
        let cells = self.cells.iter().map(|&v| perm[v]).collect();
        let mut mesh = Self::build(self.cell_type, vertices, cells)?;
        mesh.copy_tags_from(self, |c| c);
        mesh.flipped_cells = self.flipped_cells;
        Ok(mesh)
    }

    /// A copy of this mesh with new vertex coordinates (same topology, faces and tags). The caller
    /// guarantees that every cell stays valid.
    pub(crate) fn with_vertices(&self, vertices: Vec<f64>) -> Mesh {
        debug_assert_eq!(vertices.len(), self.vertices.len());
        let mut mesh = Mesh { vertices, ..self.clone_topology() };
        let dim = mesh.dim();
        let vpc = mesh.cell_type.vertices_per_cell();
        let mut h2: f64 = 0.0;
        for cv in mesh.cells.chunks_exact(vpc) {
            for i in 0..vpc {
                for j in i + 1..vpc {
                    let d2: f64 = (0..dim)
                        .map(|k| {
                            (mesh.vertices[cv[i] * dim + k] - mesh.vertices[cv[j] * dim + k])
                                .powi(2)
                        })
                        .sum();
                    h2 = h2.max(d2);
                }
            }
        }
        mesh.h_max = h2.sqrt();
        mesh
    }

    /// Clone of everything but the vertex coordinates (left empty).
    fn clone_topology(&self) -> Mesh {
        Mesh {
            cell_type: self.cell_type,
            vertices: Vec::new(),
            cells: self.cells.clone(),
            cell_faces: self.cell_faces.clone(),
            cell_face_orientations: self.cell_face_orientations.clone(),
            face_vertices: self.face_vertices.clone(),
            face_cells: self.face_cells.clone(),
            face_local: self.face_local.clone(),
            boundary_tags: self.boundary_tags.clone(),
            n_boundary_faces: self.n_boundary_faces,
            h_max: self.h_max,
            flipped_cells: self.flipped_cells,
        }
    }
}
