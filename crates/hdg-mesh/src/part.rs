//! One rank's part of a partitioned mesh as a self-contained [`Mesh`], with the maps from its
//! local cells, vertices and faces to the whole mesh's.
//!
//! A part holds the cells its rank owns and, after them, the ghost cells: the other cells of
//! the faces it owns ([`Partition::face_owner`]), so that every owned face has both its cells
//! in the part. Its vertices are numbered in increasing global order, so every face has the
//! same canonical orientation (vertices sorted by number) and every cell the same face
//! orientation codes as in the whole mesh: the element and face matrices of a part are those
//! of the whole mesh.

use rayon::prelude::*;

use crate::{Mesh, MeshError, Partition, NO_CELL};

/// The boundary tag of a part's face that is interior to the whole mesh but has only one cell
/// in the part: the interface with another part (never a boundary condition's tag).
pub const INTERFACE_TAG: u32 = u32::MAX;

/// One rank's part of a partitioned mesh: its cells as a [`Mesh`], and maps to the global
/// numbering.
///
/// Local cells keep their vertices in the same local order as globally, and local vertices
/// are numbered in increasing global order, so faces and orientation codes agree with the
/// whole mesh's. Local faces are numbered by the local mesh's own rule (first appearance);
/// [`MeshPart::global_faces`] maps them. Boundary tags: a face on the whole mesh's boundary
/// keeps its tag; a face interior to the whole mesh with only one cell in the part gets
/// [`INTERFACE_TAG`].
///
/// The local mesh's [`Mesh::face_cells`] lists the lower-numbered *local* cell first, which
/// for a face between an owned and a ghost cell may be the reverse of the global order (owned
/// cells come first locally): the global face's cells are those of
/// `global_faces[f]` in the whole mesh.
#[derive(Clone, Debug)]
pub struct MeshPart {
    /// The part (MPI rank) this is.
    pub rank: usize,
    /// The part's cells as a mesh, or None when the part owns no cells (a rank may have none).
    pub mesh: Option<Mesh>,
    /// Cells owned by this rank: local cells 0..owned_cells. The rest are ghost cells.
    pub owned_cells: usize,
    /// Local cell -> global cell: the owned cells in increasing global order, then the ghost
    /// cells in increasing global order.
    pub global_cells: Vec<usize>,
    /// Local vertex -> global vertex, strictly increasing: the vertices of the part's cells.
    pub global_vertices: Vec<usize>,
    /// Local face -> global face.
    pub global_faces: Vec<usize>,
    /// Local face -> the part that owns it ([`Partition::face_owner`]).
    pub face_owner: Vec<u32>,
}

impl MeshPart {
    /// Extracts part `rank` of `mesh` under `partition`.
    ///
    /// Costs one pass over the partition's cells (to find the owned ones) and otherwise time
    /// in proportion to the part's size (times a logarithm for sorting), in parallel (Rayon):
    /// every rank can afford it on a mesh of millions of cells.
    ///
    /// # Errors
    /// [`MeshError::InvalidParameter`] when the partition is not one of `mesh`'s cells or
    /// `rank` is not one of its parts.
    pub fn new(mesh: &Mesh, partition: &Partition, rank: usize) -> Result<MeshPart, MeshError> {
        let parts = partition.parts();
        if parts.len() != mesh.n_cells() {
            return Err(MeshError::InvalidParameter(format!(
                "a partition of {} cells used with a mesh of {} cells",
                parts.len(),
                mesh.n_cells()
            )));
        }
        if rank >= partition.n_parts() {
            return Err(MeshError::InvalidParameter(format!(
                "rank {rank} is not a part of a partition into {} parts",
                partition.n_parts()
            )));
        }
        let mine = rank as u32;

        let mut global_cells: Vec<usize> =
            (0..parts.len()).into_par_iter().filter(|&c| parts[c] == mine).collect();
        let owned_cells = global_cells.len();
        if owned_cells == 0 {
            // No owned cells: no owned faces, so no ghost cells either.
            return Ok(MeshPart {
                rank,
                mesh: None,
                owned_cells: 0,
                global_cells,
                global_vertices: Vec::new(),
                global_faces: Vec::new(),
                face_owner: Vec::new(),
            });
        }
        // Ghost cells: the second cell of each interior face whose first cell is owned, when
        // that cell belongs to another part.
        let mut ghosts: Vec<usize> = global_cells
            .par_iter()
            .flat_map_iter(|&c| {
                mesh.cell_faces(c).iter().filter_map(move |&f| {
                    let [a, b] = mesh.face_cells(f);
                    (a == c && b != NO_CELL && parts[b] != mine).then_some(b)
                })
            })
            .collect();
        ghosts.par_sort_unstable();
        ghosts.dedup();
        global_cells.extend_from_slice(&ghosts);
        drop(ghosts);

        let mut global_vertices: Vec<usize> =
            global_cells.par_iter().flat_map_iter(|&c| mesh.cell_vertices(c)).copied().collect();
        global_vertices.par_sort_unstable();
        global_vertices.dedup();
        let local_vertex = |v: &usize| -> usize {
            global_vertices.binary_search(v).expect("a vertex of one of the part's cells")
        };
        let vertices =
            global_vertices.par_iter().flat_map_iter(|&v| mesh.vertex(v)).copied().collect();
        let cells = global_cells
            .par_iter()
            .flat_map_iter(|&c| mesh.cell_vertices(c))
            .map(local_vertex)
            .collect();

        // The cells come from a valid mesh with the same local vertex order, so none is
        // flipped or degenerate; tags are set below from the global faces.
        let mut local = Mesh::with_boundary_tags(mesh.cell_type(), vertices, cells, |_, _| 1)?;
        debug_assert_eq!(local.flipped_cells(), 0);

        // A local face is local face `l` of its first local cell, and that cell's global
        // counterpart has the global face in the same slot.
        let n_faces = local.n_faces();
        let (global_faces, face_owner): (Vec<usize>, Vec<u32>) = (0..n_faces)
            .into_par_iter()
            .map(|f| {
                let c = local.face_cells(f)[0];
                let l = local.face_local_index(f)[0] as usize;
                let g = mesh.cell_faces(global_cells[c])[l];
                (g, parts[mesh.face_cells(g)[0]])
            })
            .unzip();
        for f in 0..n_faces {
            if local.is_boundary_face(f) {
                let g = global_faces[f];
                let tag =
                    if mesh.is_boundary_face(g) { mesh.boundary_tag(g) } else { INTERFACE_TAG };
                local.set_boundary_tag(f, tag);
            }
        }

        Ok(MeshPart {
            rank,
            mesh: Some(local),
            owned_cells,
            global_cells,
            global_vertices,
            global_faces,
            face_owner,
        })
    }

    /// Number of local faces this rank owns (`face_owner == rank`).
    pub fn owned_faces(&self) -> usize {
        self.face_owner.iter().filter(|&&p| p as usize == self.rank).count()
    }

    /// Number of ghost cells: local cells `owned_cells..`, owned by other ranks.
    pub fn ghost_cells(&self) -> usize {
        self.global_cells.len() - self.owned_cells
    }
}
