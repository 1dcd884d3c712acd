//! The auxiliary space of the trace system: continuous piecewise linear functions (P1) on the
//! vertices of the same mesh, and their embedding E into the trace space. The multigrid
//! preconditioner of `hdg-linalg` corrects the trace solution through it.
//!
//! **The transfer E.** Every trace basis lives in its face's canonical parametrisation (the
//! face's vertices sorted by global number) and is orthonormal there (H^ = I). The trace of a P1
//! function on a face F is linear, so it lies in P_k(F) (k >= 1) and its L2 projection is the
//! function itself: trace coefficient m is
//!
//! ```text
//! (E x)_{F,m} = sum_i x_{v_i} E^[m][i],     E^[m][i] = int_{F^} lambda_i(s) mu_m(s) ds,
//! ```
//!
//! with `v_i` the face's i-th vertex and `lambda_i` its barycentric coordinate. The projection
//! is H_F^-1 times the mixed mass, and both carry the same factor |F| / |F^|, so E^ is one
//! constant matrix for every face of the mesh: no geometry, no orientation. The trace bases
//! are hierarchical (Legendre on edges, Dubiner on triangles: the first d functions span P1),
//! so only E^'s first d rows are nonzero: E touches d of the n_f coefficients of a face, and
//! E^ is stored as that d x d block ([`VertexSpace::new`] checks that the rest vanishes).
//!
//! **Coarse unknowns.** The vertices that lie on no Dirichlet face: P1 functions that vanish on
//! the Dirichlet boundary, as the free trace unknowns do. A Dirichlet vertex contributes nothing
//! to E (its value is zero).
//!
//! **The coarse operator** A_1 = E^T A E is the Galerkin product, assembled by the multigrid
//! (`hdg_linalg::multigrid`) from the trace matrix's blocks projected face by face
//! ([`crate::MultigridOperator::project_blocks`] with basis E^): block (row, slot) gives
//! E^T A_{row,slot} E^, a d x d matrix that couples the row face's vertices to the slot face's; it
//! reads only the leading d x d corner of the block. Being a Galerkin product, A_1 inherits the
//! trace system's coefficients (per-cell kappa and c, tau) and its symmetry and definiteness.
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;

use rayon::prelude::*;

use crate::csr::HostCsr;
use crate::discretization::Discretization;
use crate::error::{CoreError, Result};
use crate::real::Real;
use crate::reference::{face_parameter_barycentric, ReferenceElement};
use crate::sparse_rows::{for_each_group, invert, prefix_sums};
use crate::topology::{filled, TraceTopology, NONE};
use hdg_mesh::Mesh;

/// The P1 vertex space of a mesh and its embedding into the trace space.
#[derive(Clone, Debug)]
pub struct VertexSpace {
    /// Trace unknowns per face (n_f).
    pub n_f: usize,
    /// Vertices per face (d: 2 for edges, 3 for triangles).
    pub vertices_per_face: usize,
    /// The coarse unknowns of mesh vertex v are `vertex_unknowns[v]..vertex_unknowns[v + 1]`:
    /// none on the Dirichlet boundary, one per coefficient region around the vertex elsewhere
    /// (one for a smooth coefficient).
    pub vertex_unknowns: Vec<usize>,
    /// Number of coarse unknowns.
    pub n_free_vertices: usize,
    /// Coarse unknown of each vertex of each free face row (`[row * d + i]`, the face's
    /// vertices in canonical order), [`NONE`] for a Dirichlet vertex.
    pub row_vertices: Vec<u32>,
    /// E^'s nonzero block, the reference transfer onto the first d trace modes:
    /// `face_transfer[m * d + i]` = int lambda_i mu_m, m < d.
    pub face_transfer: Vec<f64>,
    /// For each coarse unknown, the (free row, local vertex) pairs of the faces that use it:
    /// `vertex_rows[vertex_row_start[v]..vertex_row_start[v + 1]]`, as `row * d + i`, rows in
    /// increasing order.
    pub vertex_row_start: Vec<usize>,
    /// See [`VertexSpace::vertex_row_start`].
    pub vertex_rows: Vec<u32>,
}

/// Cells whose kappa differ by more than this factor are in different coefficient regions
/// around a vertex (see [`VertexSpace::from_parts`]).
pub const DEFAULT_SPLIT_RATIO: f64 = 10.0;

impl VertexSpace {
    /// The vertex space of a discretization (its mesh, Dirichlet faces, trace basis and
    /// kappa), with coefficient regions split at kappa ratios above `split_ratio`.
    pub fn new<T: Real>(disc: &Discretization<'_, T>, split_ratio: f64) -> Result<Self> {
        let kappa: Vec<f64> = disc.kappa.iter().map(|k| k.as_f64()).collect();
        Self::from_parts(disc.mesh, &disc.topology, disc.element.as_ref(), &kappa, split_ratio)
    }

    /// The vertex space of `mesh` with the free faces of `topology`, the trace basis of
    /// `element` and kappa per cell.
    ///
    /// **Coefficient regions.** Around each vertex the cells are grouped: two cells that share
    /// a face through the vertex are in one group when their kappa differ by at most
    /// `split_ratio` (and groups are closed under that). Each group is one coarse unknown, and
    /// a face takes the unknown of the group of its cell with the larger kappa. Where kappa
    /// stays within `split_ratio` over the whole mesh there is no grouping: plain P1, one
    /// unknown per vertex (the same space on a mesh whose cells around each vertex are joined
    /// through faces, and the setup's largest cost saved). Where regions of high kappa touch
    /// only at a vertex (a checkerboard's cross points) the trace space holds functions that
    /// are constant on each high region, at low energy, which continuous P1 cannot represent;
    /// one unknown per region can.
    pub fn from_parts(
        mesh: &Mesh,
        topology: &TraceTopology,
        element: &dyn ReferenceElement,
        kappa: &[f64],
        split_ratio: f64,
    ) -> Result<Self> {
        Self::from_free_faces(mesh, &topology.free_faces, element, kappa, split_ratio)
    }

    /// [`VertexSpace::from_parts`] from the free faces alone (`free_faces`, increasing: the
    /// rows of [`TraceTopology::free_faces`]), without the trace system's block structure.
    pub fn from_free_faces(
        mesh: &Mesh,
        free_faces: &[u32],
        element: &dyn ReferenceElement,
        kappa: &[f64],
        split_ratio: f64,
    ) -> Result<Self> {
        same_cell_type(mesh, element)?;
        if kappa.len() != mesh.n_cells() || split_ratio.is_nan() || split_ratio < 1.0 {
            return Err(CoreError::InvalidParameter {
                name: "vertex space",
                reason: format!(
                    "{} kappa values for {} cells, split ratio {split_ratio} (must be >= 1)",
                    kappa.len(),
                    mesh.n_cells()
                ),
            });
        }
        let d = mesh.dim();
        let n_f = element.n_face();
        let face_transfer = reference_transfer(element, d)?;
        let dirichlet_vertex: Vec<AtomicBool> =
            (0..mesh.n_vertices()).into_par_iter().map(|_| AtomicBool::new(false)).collect();
        let mut free = vec![false; mesh.n_faces()];
        free_faces.iter().for_each(|&f| free[f as usize] = true);
        (0..mesh.n_faces()).into_par_iter().filter(|&f| !free[f]).for_each(|f| {
            for &v in mesh.face_vertices(f) {
                dirichlet_vertex[v].store(true, Relaxed);
            }
        });
        let dirichlet_vertex: Vec<bool> =
            dirichlet_vertex.into_par_iter().map(AtomicBool::into_inner).collect();
        let (vertex_unknowns, row_vertices) = if is_plain(kappa_range(kappa), split_ratio) {
            plain_numbering(mesh, free_faces, &dirichlet_vertex)
        } else {
            split_numbering(mesh, free_faces, kappa, split_ratio, &dirichlet_vertex)
        };
        let parts = (n_f, d, face_transfer);
        Ok(Self::with_incidence(parts, vertex_unknowns, row_vertices, |_| true))
    }

    /// The space of these parts (`n_f`, d, E^), its vertices' unknowns and its rows' vertices,
    /// with the unknown -> (row, local vertex) incidence of the rows that `listed` keeps (rows
    /// in increasing order within each unknown).
    fn with_incidence(
        (n_f, d, face_transfer): (usize, usize, Vec<f64>),
        vertex_unknowns: Vec<usize>,
        row_vertices: Vec<u32>,
        listed: impl Fn(usize) -> bool + Sync,
    ) -> VertexSpace {
        let n = vertex_unknowns[vertex_unknowns.len() - 1];
        let (vertex_row_start, vertex_rows) = invert(row_vertices.len(), n, |e| {
            Some(row_vertices[e]).filter(|&v| v != NONE && listed(e / d)).map(|v| v as usize)
        });
        VertexSpace {
            n_f,
            vertices_per_face: d,
            vertex_unknowns,
            n_free_vertices: n,
            row_vertices,
            face_transfer,
            vertex_row_start,
            vertex_rows,
        }
    }

    /// The same coarse unknowns seen from the rows `rows` of this space (in that order): one
    /// rank's rows of a distributed run, whose transfer E restricts to the whole space's
    /// unknowns and prolongs from them. Only the rows with `owned[i]` (row `rows[i]` is this
    /// rank's) are in the incidence ([`VertexSpace::vertex_rows`]): what the restriction and
    /// E^T A E gather from is the rank's own rows, the others' being their owners' to add;
    /// every row keeps its vertices (a column of an owned row may be another rank's face).
    pub fn restricted_to_rows(&self, rows: &[usize], owned: &[bool]) -> VertexSpace {
        let d = self.vertices_per_face;
        let row_vertices: Vec<u32> = rows
            .iter()
            .flat_map(|&r| self.row_vertices[r * d..(r + 1) * d].iter().copied())
            .collect();
        let parts = (self.n_f, d, self.face_transfer.clone());
        Self::with_incidence(parts, self.vertex_unknowns.clone(), row_vertices, |row| {
            owned.get(row) == Some(&true)
        })
    }

    /// What [`VertexSpace::from_free_faces`] of the whole `mesh` followed by
    /// [`VertexSpace::restricted_to_rows`] gives for the rows whose faces of `mesh` are `faces`
    /// (`owned`: the rows in the incidence), built without the whole space where that space is
    /// plain P1: kappa within the split ratio everywhere, which the caller has checked as
    /// [`VertexSpace::from_free_faces`] does. `dirichlet[f]`: face f of `mesh` is a Dirichlet
    /// face. The numbering is the whole space's (a vertex's unknown counts the used vertices
    /// below it); beyond one pass over the mesh's faces and vertices, the work is the rows'.
    pub fn plain_on_faces(
        mesh: &Mesh,
        dirichlet: &[bool],
        element: &dyn ReferenceElement,
        faces: &[usize],
        owned: &[bool],
    ) -> Result<VertexSpace> {
        same_cell_type(mesh, element)?;
        let n_faces = mesh.n_faces();
        if dirichlet.len() != n_faces
            || owned.len() != faces.len()
            || faces.iter().any(|&f| f >= n_faces)
        {
            return Err(CoreError::InvalidParameter {
                name: "vertex space",
                reason: format!(
                    "{} Dirichlet flags for {n_faces} faces, {} rows with {} ownership flags \
                     (faces below {n_faces})",
                    dirichlet.len(),
                    faces.len(),
                    owned.len()
                ),
            });
        }
        let d = mesh.dim();
        let face_transfer = reference_transfer(element, d)?;
        let flags = || -> Vec<AtomicBool> {
            (0..mesh.n_vertices()).into_par_iter().map(|_| AtomicBool::new(false)).collect()
        };
        // A vertex of a Dirichlet face is a Dirichlet vertex; one of a free face is used.
        let (dirichlet_vertex, used) = (flags(), flags());
        (0..n_faces).into_par_iter().for_each(|f| {
            let mark = if dirichlet[f] { &dirichlet_vertex } else { &used };
            mesh.face_vertices(f).iter().for_each(|&v| mark[v].store(true, Relaxed));
        });
        let dirichlet_vertex: Vec<bool> =
            dirichlet_vertex.into_par_iter().map(AtomicBool::into_inner).collect();
        let vertex_unknowns = prefix_sums(
            used.iter()
                .zip(&dirichlet_vertex)
                .map(|(u, &fixed)| (u.load(Relaxed) && !fixed) as usize),
        );
        let row_vertices: Vec<u32> = faces
            .par_iter()
            .flat_map_iter(|&f| {
                let unknown =
                    |v: usize| if dirichlet_vertex[v] { NONE } else { vertex_unknowns[v] as u32 };
                mesh.face_vertices(f).iter().map(move |&v| unknown(v))
            })
            .collect();
        Ok(Self::with_incidence(
            (element.n_face(), d, face_transfer),
            vertex_unknowns,
            row_vertices,
            |row| owned[row],
        ))
    }

    /// Free face rows.
    pub fn n_rows(&self) -> usize {
        self.row_vertices.len() / self.vertices_per_face
    }

    /// E as a host matrix: trace unknowns (`row * n_f + m`) x coarse vertices, d entries in
    /// each of a face's first d rows, none in the others (Dirichlet vertices left out). For
    /// checks: the backends apply E face by face ([`crate::MultigridOps::prolong_add`]).
    pub fn prolongation(&self) -> HostCsr {
        let (d, n_f) = (self.vertices_per_face, self.n_f);
        let n = self.n_rows() * n_f;
        let mut csr =
            HostCsr { n, n_cols: self.n_free_vertices, indptr: vec![0], ..HostCsr::default() };
        for row in 0..self.n_rows() {
            let verts = &self.row_vertices[row * d..(row + 1) * d];
            let mut order: Vec<usize> = (0..d).filter(|&i| verts[i] != NONE).collect();
            order.sort_by_key(|&i| verts[i]);
            for m in 0..n_f {
                for &i in order.iter().filter(|_| m < d) {
                    csr.indices.push(verts[i] as usize);
                    csr.values.push(self.face_transfer[m * d + i]);
                }
                csr.indptr.push(csr.indices.len());
            }
        }
        csr
    }
}

/// The least and the greatest of `kappa` (infinity and 0 for none): with
/// [`is_plain`], whether a vertex space needs coefficient regions.
pub fn kappa_range(kappa: &[f64]) -> (f64, f64) {
    kappa
        .par_iter()
        .fold(|| (f64::INFINITY, 0.0f64), |(lo, hi), &k| (lo.min(k), hi.max(k)))
        .reduce(|| (f64::INFINITY, 0.0f64), |a, b| (a.0.min(b.0), a.1.max(b.1)))
}

/// Whether kappa ranging over `(min, max)` ([`kappa_range`]) stays within `split_ratio`:
/// then the vertex space is plain P1, without coefficient regions
/// ([`VertexSpace::from_parts`]).
pub fn is_plain((min, max): (f64, f64), split_ratio: f64) -> bool {
    max <= split_ratio * min
}

/// The vertex space's mesh and reference element must be of one cell type.
fn same_cell_type(mesh: &Mesh, element: &dyn ReferenceElement) -> Result<()> {
    match element.cell_type() == mesh.cell_type() {
        true => Ok(()),
        false => Err(CoreError::CellTypeMismatch(format!(
            "vertex space: mesh of {:?}, reference element of {:?}",
            mesh.cell_type(),
            element.cell_type()
        ))),
    }
}

/// Plain P1 (kappa within the split ratio everywhere): one coarse unknown per vertex of a free
/// face off the Dirichlet boundary, in vertex order. Returns the unknowns' starts per vertex
/// and the unknown of each free face row's vertices ([`VertexSpace`]'s fields).
fn plain_numbering(
    mesh: &Mesh,
    free_faces: &[u32],
    dirichlet_vertex: &[bool],
) -> (Vec<usize>, Vec<u32>) {
    let d = mesh.dim();
    let used: Vec<AtomicBool> =
        (0..mesh.n_vertices()).into_par_iter().map(|_| AtomicBool::new(false)).collect();
    free_faces.par_iter().for_each(|&face| {
        for &v in mesh.face_vertices(face as usize) {
            if !dirichlet_vertex[v] {
                used[v].store(true, Relaxed);
            }
        }
    });
    let vertex_unknowns = prefix_sums(used.iter().map(|u| u.load(Relaxed) as usize));
    let mut row_vertices = filled(NONE, free_faces.len() * d);
    row_vertices.par_chunks_mut(d).zip(free_faces).for_each(|(row, &face)| {
        for (unknown, &v) in row.iter_mut().zip(mesh.face_vertices(face as usize)) {
            if !dirichlet_vertex[v] {
                *unknown = vertex_unknowns[v] as u32;
            }
        }
    });
    (vertex_unknowns, row_vertices)
}

/// P1 with split unknowns (see [`VertexSpace::from_parts`]): one coarse unknown per used
/// coefficient region around each vertex. Returns what [`plain_numbering`] does.
fn split_numbering(
    mesh: &Mesh,
    free_faces: &[u32],
    kappa: &[f64],
    split_ratio: f64,
    dirichlet_vertex: &[bool],
) -> (Vec<usize>, Vec<u32>) {
    let d = mesh.dim();
    let regions = VertexRegions::new(mesh, kappa, split_ratio);

    // Which (vertex, region) pairs a free face uses: the region of its cell of larger kappa.
    let row_regions: Vec<u32> = free_faces
        .par_iter()
        .flat_map_iter(|&face| {
            let cells = mesh.face_cells(face as usize);
            let cell = match cells[1] {
                c if c != hdg_mesh::NO_CELL && kappa[c] > kappa[cells[0]] => c,
                _ => cells[0],
            };
            let regions = &regions;
            mesh.face_vertices(face as usize).iter().map(move |&v| regions.slot(v, cell))
        })
        .collect();
    let entry_vertex = |entry: usize| mesh.face_vertices(free_faces[entry / d] as usize)[entry % d];
    let used: Vec<AtomicBool> =
        (0..regions.cells.len()).into_par_iter().map(|_| AtomicBool::new(false)).collect();
    row_regions.par_iter().enumerate().for_each(|(entry, &slot)| {
        if !dirichlet_vertex[entry_vertex(entry)] {
            used[slot as usize].store(true, Relaxed);
        }
    });
    let used: Vec<bool> = used.into_par_iter().map(AtomicBool::into_inner).collect();
    // Number the used pairs vertex by vertex, regions in order (deterministic): count each
    // vertex's used regions, then number them from the prefix sums.
    let used_regions = |v: usize, seen: &mut Vec<u32>| {
        let range = regions.start[v]..regions.start[v + 1];
        seen.clear();
        seen.resize(range.len(), NONE);
        let mut count = 0u32;
        for slot in range.filter(|&slot| used[slot]) {
            let region = regions.region[slot] as usize;
            if seen[region] == NONE {
                seen[region] = count;
                count += 1;
            }
        }
        count
    };
    let counts: Vec<u32> = (0..mesh.n_vertices())
        .into_par_iter()
        .map_init(Vec::new, |seen, v| used_regions(v, seen))
        .collect();
    let vertex_unknowns = prefix_sums(counts.iter().map(|&c| c as usize));
    let mut unknown_of_slot = filled(NONE, regions.cells.len());
    for_each_group(&mut unknown_of_slot, &regions.start, |v, slots, seen: &mut Vec<u32>| {
        used_regions(v, seen);
        for (slot, unknown) in slots.iter_mut().enumerate() {
            let local = seen[regions.region[regions.start[v] + slot] as usize];
            if local != NONE {
                *unknown = (vertex_unknowns[v] + local as usize) as u32;
            }
        }
    });
    let row_vertices: Vec<u32> = row_regions
        .par_iter()
        .enumerate()
        .map(|(entry, &slot)| {
            if dirichlet_vertex[entry_vertex(entry)] {
                NONE
            } else {
                unknown_of_slot[slot as usize]
            }
        })
        .collect();
    (vertex_unknowns, row_vertices)
}

/// The cells around every vertex and their coefficient region (see
/// [`VertexSpace::from_parts`]): cell `cells[slot]` is in region `region[slot]` of its
/// vertex, slots `start[v]..start[v + 1]` for vertex v, cells in increasing order, regions
/// numbered from 0 in order of first appearance.
struct VertexRegions {
    start: Vec<usize>,
    cells: Vec<u32>,
    region: Vec<u32>,
}

impl VertexRegions {
    fn new(mesh: &Mesh, kappa: &[f64], split_ratio: f64) -> Self {
        let vpc = mesh.cell_type().vertices_per_cell();
        let (start, cells) = invert(mesh.n_cells() * vpc, mesh.n_vertices(), |slot| {
            Some(mesh.cell_vertices(slot / vpc)[slot % vpc])
        });
        let cells: Vec<u32> = cells.into_par_iter().map(|slot| slot / vpc as u32).collect();
        let similar = |a: usize, b: usize| {
            let (lo, hi) =
                if kappa[a] < kappa[b] { (kappa[a], kappa[b]) } else { (kappa[b], kappa[a]) };
            hi <= split_ratio * lo
        };
        let mut region = vec![0u32; cells.len()];
        for_each_group(&mut region, &start, |v, region, parent: &mut Vec<u32>| {
            let around = &cells[start[v]..start[v + 1]];
            // Union-find over the cells around v, joined through the faces containing v.
            parent.clear();
            parent.extend(0..around.len() as u32);
            fn root(parent: &mut [u32], mut i: usize) -> usize {
                while parent[i] as usize != i {
                    parent[i] = parent[parent[i] as usize];
                    i = parent[i] as usize;
                }
                i
            }
            for (i, &c) in around.iter().enumerate() {
                let c = c as usize;
                let faces = mesh.cell_faces(c);
                // Local face f is opposite local vertex f: the faces through v are the others.
                for (&f, &opposite) in faces.iter().zip(mesh.cell_vertices(c)) {
                    if opposite == v {
                        continue;
                    }
                    let [a, b] = mesh.face_cells(f);
                    let other = if a == c { b } else { a };
                    // Each face through v is met from both its cells: joined once.
                    if other == hdg_mesh::NO_CELL || other < c || !similar(c, other) {
                        continue;
                    }
                    let j = around.binary_search(&(other as u32)).expect("the neighbour shares v");
                    let (ri, rj) = (root(parent, i), root(parent, j));
                    parent[ri.max(rj)] = ri.min(rj) as u32;
                }
            }
            // Regions numbered in order of first appearance: `region` holds each root's number.
            region.fill(NONE);
            let mut count = 0u32;
            for i in 0..around.len() {
                let r = root(parent, i);
                if region[r] == NONE {
                    region[r] = count;
                    count += 1;
                }
                region[i] = region[r];
            }
        });
        VertexRegions { start, cells, region }
    }

    /// The slot of `cell` among the cells around `vertex`.
    fn slot(&self, vertex: usize, cell: usize) -> u32 {
        let range = self.start[vertex]..self.start[vertex + 1];
        let offset = self.cells[range.clone()]
            .binary_search(&(cell as u32))
            .expect("a face's cell contains the face's vertices");
        (range.start + offset) as u32
    }
}

/// Largest |E^[m][i]| allowed for m >= d: the trace basis must be hierarchical.
const HIERARCHY_TOLERANCE: f64 = 1e-12;

/// E^[m][i] = int over the face parameter domain of lambda_i(s) mu_m(s) ds for m < d (d x d,
/// row-major), by a rule exact for degree k + 1. Errors if a row m >= d does not vanish.
fn reference_transfer(element: &dyn ReferenceElement, d: usize) -> Result<Vec<f64>> {
    let n_f = element.n_face();
    let rule = element.face_quadrature(element.order() + 1);
    let mut mu = vec![0.0; n_f];
    let mut lambda = vec![0.0; d];
    let mut transfer = vec![0.0; n_f * d];
    for q in 0..rule.n_points() {
        let s = rule.point(q);
        face_parameter_barycentric(s, &mut lambda);
        element.eval_trace_basis(s, &mut mu);
        for m in 0..n_f {
            for i in 0..d {
                transfer[m * d + i] += rule.weights[q] * lambda[i] * mu[m];
            }
        }
    }
    if let Some(bad) = transfer[d * d..].iter().find(|v| v.abs() > HIERARCHY_TOLERANCE) {
        return Err(CoreError::InvalidParameter {
            name: "trace basis",
            reason: format!(
                "the vertex space needs a hierarchical trace basis (P1 in the first {d} \
                 functions); a higher mode has P1 component {bad:e}"
            ),
        });
    }
    transfer.truncate(d * d);
    Ok(transfer)
}

/// The vertex level's operator A_1 = E^T A E, assembled on the host from the trace matrix's
/// blocks projected face by face. What [`crate::MultigridOperator::vertex_operator`] does unless a
/// backend does it on its device (the same sums in the same order).
/// A_1 from `projected`, the blocks of the trace matrix projected onto E^
/// ([`crate::MultigridOperator::project_blocks`] with basis [`VertexSpace::face_transfer`]):
/// `projected[((row * slots) + a) * d * d + i * d + j]` couples vertex i of face `row` to
/// vertex j of the face in slot a. Each coarse row gathers from the faces that use its unknown
/// (rows in parallel, no atomics, the same sums in the same order on every run).
pub fn vertex_operator(
    space: &VertexSpace,
    topology: &TraceTopology,
    projected: &[f64],
) -> Result<HostCsr> {
    let d = space.vertices_per_face;
    let slots = topology.slots;
    let dd = d * d;
    if topology.n_rows() != space.n_rows() || projected.len() != space.n_rows() * slots * dd {
        return Err(CoreError::InvalidParameter {
            name: "projected blocks",
            reason: format!(
                "{} values for {} rows of {slots} slots of {d} x {d} (topology: {} rows)",
                projected.len(),
                space.n_rows(),
                topology.n_rows()
            ),
        });
    }
    let n = space.n_free_vertices;
    Ok(crate::sparse_rows::assemble_rows(n, n, |v, accumulator| {
        let uses = &space.vertex_rows[space.vertex_row_start[v]..space.vertex_row_start[v + 1]];
        for &entry in uses {
            let (row, i) = (entry as usize / d, entry as usize % d);
            for a in 0..slots {
                let column_row = topology.neighbours[row * slots + a];
                if column_row == NONE {
                    continue;
                }
                let block = &projected[(row * slots + a) * dd..][..dd];
                let columns = &space.row_vertices[column_row as usize * d..][..d];
                for (j, &w) in columns.iter().enumerate() {
                    if w != NONE {
                        accumulator.add(w as usize, block[i * d + j]);
                    }
                }
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::reference_element;
    use hdg_mesh::{generate, CellType, Diagonal};

    fn space(mesh: &Mesh, order: usize) -> VertexSpace {
        let element = reference_element(mesh.cell_type(), order).unwrap();
        let kappa = vec![1.0; mesh.n_cells()];
        VertexSpace::from_parts(mesh, &TraceTopology::new(mesh), element.as_ref(), &kappa, 10.0)
            .unwrap()
    }

    /// Legendre, orthonormal on [-1, 1]: mu_0 = 1/sqrt(2), mu_1 = sqrt(3/2) s; the edge's
    /// barycentric coordinates are (1 - s)/2 and (1 + s)/2.
    #[test]
    fn edge_transfer_is_the_projection_of_the_hat_functions() {
        let mesh = generate::unit_square(3, Diagonal::Right).unwrap();
        for order in [1, 4] {
            let s = space(&mesh, order);
            let (a, b) = (0.5f64.sqrt(), (1.5f64).sqrt() / 3.0);
            let expected = [a, a, -b, b];
            for (got, want) in s.face_transfer.iter().zip(expected) {
                assert!((got - want).abs() < 1e-14, "{:?}", s.face_transfer);
            }
        }
    }

    /// The plain space built on some rows alone is the whole space's restricted to them: the
    /// same numbering, the rows' vertices, the incidence of the owned rows only.
    #[test]
    fn the_plain_space_on_some_faces_is_the_whole_one_restricted() {
        let square = generate::unit_square(5, Diagonal::Alternating).unwrap();
        let cube = generate::unit_cube(2).unwrap();
        for mesh in [square, cube] {
            let element = reference_element(mesh.cell_type(), 2).unwrap();
            // Dirichlet on the faces whose centroid has x = 0 or y = 0, Neumann elsewhere.
            let dirichlet: Vec<bool> = (0..mesh.n_faces())
                .map(|f| {
                    let fv = mesh.face_vertices(f);
                    mesh.is_boundary_face(f)
                        && (0..2).any(|k| fv.iter().all(|&v| mesh.vertex(v)[k].abs() < 1e-12))
                })
                .collect();
            let free: Vec<u32> =
                (0..mesh.n_faces() as u32).filter(|&f| !dirichlet[f as usize]).collect();
            let kappa = vec![1.0; mesh.n_cells()];
            let whole =
                VertexSpace::from_free_faces(&mesh, &free, element.as_ref(), &kappa, 10.0).unwrap();
            // Every third free face, backwards, every other one owned.
            let rows: Vec<usize> = (0..free.len()).rev().step_by(3).collect();
            let owned: Vec<bool> = (0..rows.len()).map(|i| i % 2 == 0).collect();
            let faces: Vec<usize> = rows.iter().map(|&r| free[r] as usize).collect();
            let expected = whole.restricted_to_rows(&rows, &owned);
            let built =
                VertexSpace::plain_on_faces(&mesh, &dirichlet, element.as_ref(), &faces, &owned)
                    .unwrap();
            assert_eq!(built.n_free_vertices, expected.n_free_vertices);
            assert_eq!(built.vertex_unknowns, expected.vertex_unknowns);
            assert_eq!(built.row_vertices, expected.row_vertices);
            assert_eq!(built.vertex_row_start, expected.vertex_row_start);
            assert_eq!(built.vertex_rows, expected.vertex_rows);
            assert_eq!(built.face_transfer, expected.face_transfer);
            assert_eq!(built.n_f, expected.n_f);
            // Only owned rows in the incidence, and some owned rows there.
            assert!(!built.vertex_rows.is_empty());
            let d = built.vertices_per_face;
            assert!(built.vertex_rows.iter().all(|&e| owned[e as usize / d]));
        }
    }

    #[test]
    fn coarse_unknowns_are_the_interior_vertices() {
        let mesh = generate::unit_square(4, Diagonal::Alternating).unwrap();
        let s = space(&mesh, 2);
        assert_eq!(s.n_free_vertices, 9);
        for v in 0..mesh.n_vertices() {
            let x = mesh.vertex(v);
            let boundary = x.iter().any(|&c| c.abs() < 1e-12 || (c - 1.0).abs() < 1e-12);
            let unknowns = s.vertex_unknowns[v + 1] - s.vertex_unknowns[v];
            assert_eq!(unknowns, if boundary { 0 } else { 1 }, "vertex {v} at {x:?}");
        }
        let cube = generate::unit_cube(3).unwrap();
        assert_eq!(space(&cube, 1).n_free_vertices, 8);
        assert_eq!(space(&cube, 1).face_transfer.len(), 9);
    }

    /// The numbering without regions is the one with them wherever the two spaces agree (kappa
    /// within the split ratio on meshes whose cells around a vertex are joined through faces).
    #[test]
    fn plain_numbering_is_the_split_numbering_of_one_region() {
        for mesh in [
            generate::perturb(&generate::unit_square(7, Diagonal::Alternating).unwrap(), 0.3, 5)
                .unwrap(),
            generate::unit_cube(3).unwrap(),
        ] {
            let topology = TraceTopology::new(&mesh);
            let dirichlet: Vec<bool> = (0..mesh.n_vertices())
                .map(|v| mesh.vertex(v).iter().any(|&c| c.abs() < 1e-12 || (c - 1.0).abs() < 1e-12))
                .collect();
            // Varying kappa, all within the ratio: the split numbering finds one region a vertex.
            let kappa: Vec<f64> = (0..mesh.n_cells()).map(|c| 1.0 + (c % 7) as f64).collect();
            let plain = plain_numbering(&mesh, &topology.free_faces, &dirichlet);
            let split = split_numbering(&mesh, &topology.free_faces, &kappa, 10.0, &dirichlet);
            assert_eq!(plain, split);
            let interior = dirichlet.iter().filter(|&&b| !b).count();
            assert_eq!(plain.0[mesh.n_vertices()], interior);
        }
    }

    /// E applied to the vertex values of a linear function gives, on every free face, the
    /// coefficients of that function's trace: checked by evaluating the trace expansion at
    /// quadrature points against the function itself (on faces whose vertices are all free).
    #[test]
    fn prolongation_reproduces_linear_functions() {
        for (mesh, order) in [
            (
                generate::perturb(&generate::unit_square(5, Diagonal::Left).unwrap(), 0.3, 2)
                    .unwrap(),
                3,
            ),
            (generate::unit_cube(3).unwrap(), 2),
        ] {
            let d = mesh.dim();
            let element = reference_element(mesh.cell_type(), order).unwrap();
            let topology = TraceTopology::new(&mesh);
            let kappa = vec![2.0; mesh.n_cells()];
            let s =
                VertexSpace::from_parts(&mesh, &topology, element.as_ref(), &kappa, 10.0).unwrap();
            let g =
                |x: &[f64]| 0.3 + 1.7 * x[0] - 0.4 * x[1] + if d == 3 { 2.0 * x[2] } else { 0.0 };
            let mut coarse = vec![0.0; s.n_free_vertices];
            for v in 0..mesh.n_vertices() {
                for unknown in s.vertex_unknowns[v]..s.vertex_unknowns[v + 1] {
                    coarse[unknown] = g(mesh.vertex(v));
                }
            }
            let e = s.prolongation();
            let n_f = s.n_f;
            let rule = element.face_quadrature(order + 2);
            let mut mu = vec![0.0; n_f];
            let mut lambda = vec![0.0; d];
            let mut checked = 0;
            for row in 0..s.n_rows() {
                let face = topology.free_faces[row] as usize;
                let verts = mesh.face_vertices(face);
                if verts.iter().any(|&v| s.vertex_unknowns[v] == s.vertex_unknowns[v + 1]) {
                    continue;
                }
                let coefficient = |m: usize| -> f64 {
                    let r = row * n_f + m;
                    (e.indptr[r]..e.indptr[r + 1]).map(|p| e.values[p] * coarse[e.indices[p]]).sum()
                };
                for q in 0..rule.n_points() {
                    let sq = rule.point(q);
                    face_parameter_barycentric(sq, &mut lambda);
                    element.eval_trace_basis(sq, &mut mu);
                    let mut x = vec![0.0; d];
                    for (i, &v) in verts.iter().enumerate() {
                        for r in 0..d {
                            x[r] += lambda[i] * mesh.vertex(v)[r];
                        }
                    }
                    let value: f64 = (0..n_f).map(|m| coefficient(m) * mu[m]).sum();
                    assert!((value - g(&x)).abs() < 1e-12, "face {face}: {value} vs {}", g(&x));
                }
                checked += 1;
            }
            assert!(checked > 0);
            assert_eq!(mesh.cell_type() == CellType::Triangle, d == 2);
        }
    }
}
