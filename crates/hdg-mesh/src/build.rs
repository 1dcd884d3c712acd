//! The two passes of [`crate::Mesh`]'s construction that touch every cell, in parallel (Rayon)
//! and with the serial definition's results bit for bit: the cell checks (connectivity,
//! orientation, degeneracy) and the face matching (which cell-face slots are one face, the
//! faces numbered in order of first appearance).
//!
//! Face matching sorts one 128-bit word per slot, the slot's sorted vertex numbers (32 bits
//! each) above the slot number: equal faces become neighbours, in increasing order of their
//! slots, so the first slot of each run is the face's first appearance. A parallel sort of
//! plain words is the fastest deterministic way to group millions of keys; a hash map would
//! be neither ordered nor parallel.

use rayon::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::mesh::simplex_measure;
use crate::{CellType, MeshError, NO_CELL};

/// Relative tolerance for degenerate cells: a cell is rejected when its measure is at most
/// `DEGENERACY_TOLERANCE * h^dim`, `h` its longest edge.
const DEGENERACY_TOLERANCE: f64 = 1e-14;

/// What the cell checks found over a range of cells; ranges merge in any order.
#[derive(Default)]
struct CellChecks {
    h_max: f64,
    flipped: usize,
    /// The lowest-numbered cell with bad connectivity, and its error.
    connectivity: Option<(usize, MeshError)>,
    /// How many cells are degenerate, and the lowest-numbered few (cell, measure, vertices).
    n_degenerate: usize,
    degenerate: Vec<(usize, f64, Vec<usize>)>,
}

impl CellChecks {
    fn merge(mut self, other: CellChecks) -> CellChecks {
        self.h_max = self.h_max.max(other.h_max);
        self.flipped += other.flipped;
        self.connectivity = match (self.connectivity, other.connectivity) {
            (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
            (a, b) => a.or(b),
        };
        self.n_degenerate += other.n_degenerate;
        self.degenerate.extend(other.degenerate);
        self.degenerate.sort_by_key(|d| d.0);
        self.degenerate.truncate(crate::conformity::MAX_REPORTED);
        self
    }
}

/// Checks every cell, flips the negatively oriented ones (swapping their last two vertices)
/// and returns the longest edge and the number flipped.
///
/// # Errors
/// The lowest-numbered cell's bad connectivity ([`MeshError::VertexOutOfRange`],
/// [`MeshError::RepeatedVertex`]); otherwise [`MeshError::NonPositiveMeasure`] naming the
/// first degenerate cells and counting all.
pub(crate) fn check_cells(
    cell_type: CellType,
    vertices: &[f64],
    cells: &mut [usize],
) -> Result<(f64, usize), MeshError> {
    let (dim, vpc) = (cell_type.dim(), cell_type.vertices_per_cell());
    let n_v = vertices.len() / dim;
    let check = |mut acc: CellChecks, (c, cv): (usize, &mut [usize])| {
        for (i, &v) in cv.iter().enumerate() {
            let error = if v >= n_v {
                MeshError::VertexOutOfRange { cell: c, vertex: v, n_vertices: n_v }
            } else if cv[..i].contains(&v) {
                MeshError::RepeatedVertex { cell: c, vertex: v }
            } else {
                continue;
            };
            // A fold takes its cells in order: the first is its lowest.
            acc.connectivity.get_or_insert((c, error));
            return acc;
        }
        let mut coords = [0.0f64; 12];
        for (i, &v) in cv.iter().enumerate() {
            coords[i * dim..(i + 1) * dim].copy_from_slice(&vertices[v * dim..(v + 1) * dim]);
        }
        let mut h2: f64 = 0.0;
        for i in 0..vpc {
            for j in i + 1..vpc {
                let d2: f64 =
                    (0..dim).map(|k| (coords[i * dim + k] - coords[j * dim + k]).powi(2)).sum();
                h2 = h2.max(d2);
            }
        }
        let h = h2.sqrt();
        acc.h_max = acc.h_max.max(h);
        let mut measure = simplex_measure(cell_type, &coords[..vpc * dim]);
        let tolerance = DEGENERACY_TOLERANCE * h.powi(dim as i32);
        if measure < -tolerance {
            // Swapping two vertices reverses the orientation.
            cv.swap(vpc - 2, vpc - 1);
            acc.flipped += 1;
            measure = -measure;
        }
        if measure.is_nan() || measure <= tolerance {
            acc.n_degenerate += 1;
            if acc.degenerate.len() < crate::conformity::MAX_REPORTED {
                acc.degenerate.push((c, measure, cv.to_vec()));
            }
        }
        acc
    };
    let checks = cells
        .par_chunks_mut(vpc)
        .enumerate()
        .fold(CellChecks::default, check)
        .reduce(CellChecks::default, CellChecks::merge);
    if let Some((_, error)) = checks.connectivity {
        return Err(error);
    }
    if checks.n_degenerate > 0 {
        let mut named = checks.degenerate.into_iter();
        let (cell, measure, vertices) = named.next().expect("a degenerate cell");
        return Err(MeshError::NonPositiveMeasure {
            cell,
            measure,
            vertices,
            total: checks.n_degenerate,
            more_cells: named.map(|d| d.0).collect(),
        });
    }
    Ok((checks.h_max, checks.flipped))
}

/// The faces of a mesh whose cells passed [`check_cells`].
pub(crate) struct Faces {
    /// `n_cells * faces_per_cell` global face numbers.
    pub cell_faces: Vec<usize>,
    /// `n_cells * faces_per_cell` orientation codes.
    pub cell_face_orientations: Vec<u8>,
    /// `n_faces * vertices_per_face` vertex numbers, each face's sorted ascending.
    pub face_vertices: Vec<usize>,
    /// The one or two cells of each face, the first appearance first, [`NO_CELL`] second on
    /// the boundary.
    pub face_cells: Vec<[usize; 2]>,
    /// Each face's local index in each of its cells (0 for [`NO_CELL`]).
    pub face_local: Vec<[u8; 2]>,
}

/// A slot's face vertices, sorted, in the high 96 bits; the slot in the low 32.
fn slot_word(key: [usize; 3], slot: usize) -> u128 {
    (key[0] as u128) << 96 | (key[1] as u128) << 64 | (key[2] as u128) << 32 | slot as u128
}

/// A face's missing second slot (a boundary face), and the mark of a run of three or more.
const NONE: u64 = u32::MAX as u64;
const NON_MANIFOLD: u64 = NONE - 1;

fn word_key(word: u128) -> u128 {
    word >> 32
}

fn word_slot(word: u128) -> usize {
    (word & 0xffff_ffff) as usize
}

/// Matches the cells' faces: two slots (cell, local face) with the same vertices are one face;
/// faces are numbered in order of first appearance (cells in order, a cell's local faces in
/// order).
///
/// # Errors
/// [`MeshError::NonManifoldFace`] for the face of lowest vertex numbers shared by three or
/// more cells; [`MeshError::InvalidParameter`] for a mesh with 2^32 vertices or cell faces
/// or more.
pub(crate) fn match_faces(
    cell_type: CellType,
    n_vertices: usize,
    cells: &[usize],
) -> Result<Faces, MeshError> {
    let (vpc, fpc, vpf) =
        (cell_type.vertices_per_cell(), cell_type.faces_per_cell(), cell_type.vertices_per_face());
    let n_slots = cells.len() / vpc * fpc;
    if n_vertices > u32::MAX as usize || n_slots >= NON_MANIFOLD as usize {
        return Err(MeshError::InvalidParameter(format!(
            "a mesh of {n_vertices} vertices and {n_slots} cell faces: one process builds \
             meshes of fewer than 2^32 of each (partition larger ones)"
        )));
    }
    // The face vertices of slot s in the cell's local order, and sorted (padded with 0).
    let local = |s: usize| -> [usize; 3] {
        let (c, l) = (s / fpc, s % fpc);
        let mut k = [0usize; 3];
        for (i, &lv) in cell_type.face_vertices(l).iter().enumerate() {
            k[i] = cells[c * vpc + lv];
        }
        k
    };
    let key = |s: usize| -> [usize; 3] {
        let mut k = local(s);
        k[..vpf].sort_unstable();
        k
    };

    let mut words: Vec<u128> = (0..n_slots).into_par_iter().map(|s| slot_word(key(s), s)).collect();
    words.par_sort_unstable();
    // One face per run of equal keys: its first and second slot (NONE: a boundary face;
    // NON_MANIFOLD: a run of three or more), in increasing key order.
    let same = |i: usize, j: usize| j < n_slots && word_key(words[i]) == word_key(words[j]);
    let mut pairs: Vec<u64> = (0..n_slots)
        .into_par_iter()
        .filter(|&i| i == 0 || !same(i - 1, i))
        .map(|i| {
            let second = match (same(i, i + 1), same(i, i + 2)) {
                (true, true) => NON_MANIFOLD,
                (true, false) => word_slot(words[i + 1]) as u64,
                _ => NONE,
            };
            (word_slot(words[i]) as u64) << 32 | second
        })
        .collect();
    if let Some(p) = pairs.par_iter().position_first(|&p| p & 0xffff_ffff == NON_MANIFOLD) {
        let k = key((pairs[p] >> 32) as usize);
        let run = word_key(slot_word(k, 0));
        let start = words.partition_point(|&w| word_key(w) < run);
        let slots: Vec<usize> = words[start..]
            .iter()
            .take_while(|&&w| word_key(w) == run)
            .map(|&w| word_slot(w))
            .collect();
        return Err(MeshError::NonManifoldFace {
            vertices: k[..vpf].to_vec(),
            cells: slots.iter().map(|s| s / fpc).collect(),
        });
    }
    drop(words);
    // Face order: by first slot.
    pairs.par_sort_unstable();
    let first = |p: u64| (p >> 32) as usize;
    let second = |p: u64| match p & 0xffff_ffff {
        NONE => None,
        s => Some(s as usize),
    };

    let cell_faces: Vec<AtomicUsize> = (0..n_slots).into_par_iter().map(AtomicUsize::new).collect();
    pairs.par_iter().enumerate().for_each(|(f, &p)| {
        // Every slot is in exactly one pair: each entry is stored once.
        cell_faces[first(p)].store(f, Ordering::Relaxed);
        if let Some(s) = second(p) {
            cell_faces[s].store(f, Ordering::Relaxed);
        }
    });
    // (In place: the same layout.)
    let cell_faces = cell_faces.into_iter().map(AtomicUsize::into_inner).collect();
    let cell_face_orientations =
        (0..n_slots).into_par_iter().map(|s| cell_type.orientation(&local(s)[..vpf])).collect();
    let mut face_vertices = vec![0; pairs.len() * vpf];
    face_vertices.par_chunks_mut(vpf).zip(&pairs).for_each(|(v, &p)| {
        v.copy_from_slice(&key(first(p))[..vpf]);
    });
    let face_cells = pairs
        .par_iter()
        .map(|&p| [first(p) / fpc, second(p).map_or(NO_CELL, |s| s / fpc)])
        .collect();
    let face_local = pairs
        .par_iter()
        .map(|&p| [(first(p) % fpc) as u8, second(p).map_or(0, |s| (s % fpc) as u8)])
        .collect();
    Ok(Faces { cell_faces, cell_face_orientations, face_vertices, face_cells, face_local })
}
