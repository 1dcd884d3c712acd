//! The global trace system's structure: which faces are unknowns, and the dense block format.
//!
//! **Dense block format (DBF, after the GPU SpMV for HDG matrices of doi:10.2514/6.2011-687).**
//! One block row per free (non-Dirichlet) face. A face couples, through the element trace
//! matrices of the (at most two) cells that contain it, to itself and to the other faces of
//! those cells: `slots = 1 + 2 (faces_per_cell - 1)` dense n_f x n_f blocks per row (5 for
//! triangles, 7 for tetrahedra). The slot order is fixed:
//!
//! - slot 0: the face itself (the sum of both cells' diagonal blocks);
//! - slots 1..faces_per_cell: the other faces of the first cell, in increasing local face order;
//! - the remaining slots: the other faces of the second cell, in the same order (padding on a
//!   boundary face).
//!
//! A slot whose column face is a Dirichlet face or padding has neighbour [`NONE`]: the SpMV skips
//! it, and assembly moves a Dirichlet column into the right-hand side. The arrays here are built
//! once on the host; assembly is then a lock-free gather per block row (each row reads the
//! element trace matrices it needs), with no atomics and no sort at solve time.
use std::ops::Range;

use hdg_mesh::{Mesh, NO_CELL};
use rayon::prelude::*;

use crate::sparse_rows::{prefix_sums, split_at_offsets};

/// Sentinel index: no face, no cell, no neighbour.
pub const NONE: u32 = u32::MAX;

/// Unknown numbering and DBF structure of the trace system.
#[derive(Clone, Debug)]
pub struct TraceTopology {
    /// Faces in the mesh.
    pub n_faces: usize,
    /// Faces per cell.
    pub faces_per_cell: usize,
    /// Block slots per row (5 for triangles, 7 for tetrahedra).
    pub slots: usize,
    /// Free (unknown) index of each global face, [`NONE`] for Dirichlet faces.
    pub free_index: Vec<u32>,
    /// Global face of each free row.
    pub free_faces: Vec<u32>,
    /// Cells of each row's face (`[row][side]`, [`NONE`] for a missing second cell).
    pub row_cells: Vec<[u32; 2]>,
    /// Local index of the row's face in each of `row_cells`.
    pub row_local_face: Vec<[u8; 2]>,
    /// Free index of the column face of each slot (`[row * slots + a]`), [`NONE`] if Dirichlet
    /// or padding.
    pub neighbours: Vec<u32>,
    /// Global face of each slot's column ([`NONE`] for padding).
    pub slot_faces: Vec<u32>,
    /// Cell contributing to each slot >= 1 ([`NONE`] for padding); slot 0 uses `row_cells`.
    pub slot_cell: Vec<u32>,
    /// Local face (row, column) of the contribution to each slot >= 1.
    pub slot_local: Vec<[u8; 2]>,
}

/// Faces per parallel task when the free faces are numbered.
const FACES_PER_TASK: usize = 1 << 16;

/// `n` copies of `value`, written by all threads.
pub(crate) fn filled<T: Copy + Send + Sync>(value: T, n: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(n);
    out.par_extend(rayon::iter::repeat_n(value, n));
    out
}

impl TraceTopology {
    /// Builds the structure with every boundary face Dirichlet.
    pub fn new(mesh: &Mesh) -> Self {
        let dirichlet: Vec<bool> =
            (0..mesh.n_faces()).into_par_iter().map(|f| mesh.is_boundary_face(f)).collect();
        Self::with_dirichlet(mesh, &dirichlet)
    }

    /// Builds the structure for a given set of Dirichlet faces.
    pub fn with_dirichlet(mesh: &Mesh, dirichlet: &[bool]) -> Self {
        let fpc = mesh.cell_type().faces_per_cell();
        let slots = 1 + 2 * (fpc - 1);
        let n_faces = mesh.n_faces();
        // Free faces numbered in face order, chunks of faces in parallel: each chunk's count,
        // then its free faces written from its offset.
        let chunks: Vec<Range<usize>> = (0..n_faces)
            .step_by(FACES_PER_TASK)
            .map(|first| first..(first + FACES_PER_TASK).min(n_faces))
            .collect();
        let counts: Vec<usize> = chunks
            .par_iter()
            .map(|faces| faces.clone().filter(|&f| !dirichlet[f]).count())
            .collect();
        let bounds = prefix_sums(counts.into_iter());
        let mut free_index = filled(NONE, n_faces);
        let mut free_faces = filled(0u32, bounds[chunks.len()]);
        free_index
            .par_chunks_mut(FACES_PER_TASK)
            .zip(split_at_offsets(&mut free_faces, &bounds))
            .zip(&chunks)
            .enumerate()
            .for_each(|(task, ((index, faces), range))| {
                let mut next = 0;
                for (slot, f) in index.iter_mut().zip(range.clone()) {
                    if !dirichlet[f] {
                        *slot = (bounds[task] + next) as u32;
                        faces[next] = f as u32;
                        next += 1;
                    }
                }
            });
        let n_rows = free_faces.len();
        // Filled in parallel: the first touch of these pages (hundreds of MB at 1e7 unknowns)
        // is most of the cost of building them.
        let mut row_cells = filled([NONE; 2], n_rows);
        let mut row_local_face = filled([0u8; 2], n_rows);
        let mut neighbours = filled(NONE, n_rows * slots);
        let mut slot_faces = filled(NONE, n_rows * slots);
        let mut slot_cell = filled(NONE, n_rows * slots);
        let mut slot_local = filled([0u8; 2], n_rows * slots);
        // Every row writes only its own entries: rows in parallel (this runs in the setup of
        // every solve, O(faces)).
        row_cells
            .par_iter_mut()
            .zip(row_local_face.par_iter_mut())
            .zip(neighbours.par_chunks_mut(slots))
            .zip(slot_faces.par_chunks_mut(slots))
            .zip(slot_cell.par_chunks_mut(slots))
            .zip(slot_local.par_chunks_mut(slots))
            .enumerate()
            .with_min_len(1 << 10)
            .for_each(
                |(
                    row,
                    (((((row_cell, row_local), neighbours), slot_faces), slot_cell), slot_local),
                )| {
                    let face = free_faces[row] as usize;
                    neighbours[0] = row as u32;
                    slot_faces[0] = face as u32;
                    let cells = mesh.face_cells(face);
                    let local = mesh.face_local_index(face);
                    for side in 0..2 {
                        if cells[side] == NO_CELL {
                            continue;
                        }
                        let cell = cells[side];
                        row_cell[side] = cell as u32;
                        row_local[side] = local[side];
                        let mut slot = 1 + side * (fpc - 1);
                        for (j, &other) in mesh.cell_faces(cell).iter().enumerate() {
                            if j == local[side] as usize {
                                continue;
                            }
                            neighbours[slot] = free_index[other];
                            slot_faces[slot] = other as u32;
                            slot_cell[slot] = cell as u32;
                            slot_local[slot] = [local[side], j as u8];
                            slot += 1;
                        }
                    }
                },
            );
        TraceTopology {
            n_faces,
            faces_per_cell: fpc,
            slots,
            free_index,
            free_faces,
            row_cells,
            row_local_face,
            neighbours,
            slot_faces,
            slot_cell,
            slot_local,
        }
    }

    /// The structure of no faces (a rank of a distributed run without cells), for cells of
    /// `faces_per_cell` faces.
    pub fn empty(faces_per_cell: usize) -> Self {
        TraceTopology {
            n_faces: 0,
            faces_per_cell,
            slots: 1 + 2 * (faces_per_cell - 1),
            free_index: Vec::new(),
            free_faces: Vec::new(),
            row_cells: Vec::new(),
            row_local_face: Vec::new(),
            neighbours: Vec::new(),
            slot_faces: Vec::new(),
            slot_cell: Vec::new(),
            slot_local: Vec::new(),
        }
    }

    /// Number of block rows (free faces).
    pub fn n_rows(&self) -> usize {
        self.free_faces.len()
    }

    /// Whether global face `f` carries Dirichlet data.
    pub fn is_dirichlet(&self, f: usize) -> bool {
        self.free_index[f] == NONE
    }

    /// Number of stored (non-padding, non-Dirichlet) blocks.
    pub fn n_stored_blocks(&self) -> usize {
        self.neighbours.par_iter().filter(|&&n| n != NONE).count()
    }
}
