//! Partitions of a mesh's cells into parts, one per MPI rank: contiguous blocks of cell
//! numbers, or METIS on the dual graph (feature `metis`).
//!
//! Every face has exactly one owning part, that of its lower-numbered cell
//! ([`Partition::face_owner`]): the rank that assembles and solves for its trace unknowns.

use crate::{Mesh, MeshError, NO_CELL};

/// Which part (MPI rank) owns each cell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    /// The part of each cell, each `< n_parts`.
    parts: Vec<u32>,
    /// Number of parts; some may own no cells.
    n_parts: usize,
}

impl Partition {
    /// A partition with `parts[c]` the part of cell `c`, out of `n_parts` parts. Parts that
    /// own no cells are allowed (a rank may have none).
    ///
    /// # Errors
    /// [`MeshError::InvalidParameter`] when `n_parts` is 0 or an entry is not below `n_parts`
    /// (the first such cell is named).
    pub fn new(parts: Vec<u32>, n_parts: usize) -> Result<Partition, MeshError> {
        if n_parts == 0 {
            return Err(MeshError::InvalidParameter(
                "a partition needs at least 1 part (got 0)".into(),
            ));
        }
        if let Some(c) = parts.iter().position(|&p| p as usize >= n_parts) {
            return Err(MeshError::InvalidParameter(format!(
                "cell {c} is given part {}, but the partition has only {n_parts} parts",
                parts[c]
            )));
        }
        Ok(Partition { parts, n_parts })
    }

    /// Every cell in part 0, the only part.
    pub fn single(n_cells: usize) -> Partition {
        Partition { parts: vec![0; n_cells], n_parts: 1 }
    }

    /// Contiguous ranges of cell numbers: part `p` gets the `p`-th range, the ranges differing
    /// in size by at most one cell (the first `n_cells % n_parts` ranges are the longer ones).
    /// Parts are empty when `n_parts > n_cells`. Good only when the cell numbering is local
    /// (as a structured generator's is); [`Partition::metis`] otherwise.
    ///
    /// # Panics
    /// When `n_parts` is 0 or does not fit in a `u32`.
    pub fn blocks(n_cells: usize, n_parts: usize) -> Partition {
        assert!(n_parts >= 1, "a partition needs at least 1 part (got 0)");
        assert!(u32::try_from(n_parts).is_ok(), "{n_parts} parts do not fit in a u32");
        let (q, r) = (n_cells / n_parts, n_cells % n_parts);
        // The first r parts hold q + 1 cells, the others q.
        let long = r * (q + 1);
        let parts = (0..n_cells)
            .map(|c| if c < long { c / (q + 1) } else { r + (c - long) / q } as u32)
            .collect();
        Partition { parts, n_parts }
    }

    /// METIS multilevel k-way partitioning of the dual graph (cells adjacent through interior
    /// faces, unit weights), minimising the edge cut: the number of faces between parts, whose
    /// trace unknowns ranks exchange. K-way rather than recursive bisection because it
    /// honours METIS's contiguity option (recursive bisection ignores it) and is METIS's
    /// recommendation beyond a few parts; parts are balanced within METIS's default 3%.
    ///
    /// Deterministic: METIS's random seed is set explicitly, so every rank that computes the
    /// partition of the same mesh gets the same one. Calls are serialised within a process
    /// (METIS's random generator is process-wide state), so threads get the same answer too.
    /// Parts are asked to be contiguous when the dual graph is connected (METIS refuses the
    /// option otherwise). `n_parts == 1` gives [`Partition::single`] without calling METIS.
    /// METIS may leave a part empty when `n_parts` is close to the number of cells.
    ///
    /// # Errors
    /// - [`MeshError::InvalidParameter`]: `n_parts` is 0 or larger than the number of cells, or
    ///   the mesh is too large for METIS's 32-bit indices;
    /// - [`MeshError::Partitioner`]: METIS itself failed.
    #[cfg(feature = "metis")]
    pub fn metis(mesh: &Mesh, n_parts: usize) -> Result<Partition, MeshError> {
        use metis::Idx;

        /// Any fixed value: what matters is that every rank uses the same.
        const SEED: Idx = 7;

        let n_cells = mesh.n_cells();
        if n_parts == 0 {
            return Err(MeshError::InvalidParameter(
                "a partition needs at least 1 part (got 0)".into(),
            ));
        }
        if n_parts > n_cells {
            return Err(MeshError::InvalidParameter(format!(
                "cannot partition {n_cells} cells into {n_parts} parts: more parts than cells"
            )));
        }
        if n_parts == 1 {
            return Ok(Partition::single(n_cells));
        }
        let fpc = mesh.cell_type().faces_per_cell();
        // The adjacency list has at most faces_per_cell entries per cell.
        let too_large = || {
            MeshError::InvalidParameter(format!(
                "a mesh of {n_cells} cells is too large for METIS's 32-bit indices"
            ))
        };
        if n_cells.checked_mul(fpc).is_none_or(|n| Idx::try_from(n).is_err()) {
            return Err(too_large());
        }
        let nparts = Idx::try_from(n_parts).map_err(|_| too_large())?;

        // The dual graph in CSR form, neighbours in local face order.
        let mut xadj: Vec<Idx> = Vec::with_capacity(n_cells + 1);
        let mut adjncy: Vec<Idx> = Vec::with_capacity(n_cells * fpc);
        xadj.push(0);
        for c in 0..n_cells {
            for &f in mesh.cell_faces(c) {
                let [a, b] = mesh.face_cells(f);
                if b != NO_CELL {
                    adjncy.push((if a == c { b } else { a }) as Idx);
                }
            }
            xadj.push(adjncy.len() as Idx);
        }
        let contiguous = is_connected(&xadj, &adjncy);

        let mut part: Vec<Idx> = vec![0; n_cells];
        // METIS keeps its random generator's state in a process-wide static and swaps the
        // process's SIGABRT and SIGTERM handlers during a call: concurrent calls from several
        // threads would interleave random streams (different partitions for the same seed)
        // and restore each other's handlers. One call at a time per process.
        let _one_at_a_time = METIS_LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        metis::Graph::new(1, nparts, &xadj, &adjncy)
            .map_err(|e| MeshError::Partitioner(format!("METIS refused the dual graph: {e}")))?
            .set_option(metis::option::Seed(SEED))
            .set_option(metis::option::Contig(contiguous))
            .part_kway(&mut part)
            .map_err(|e| {
                MeshError::Partitioner(format!(
                    "METIS k-way partitioning of {n_cells} cells into {n_parts} parts: {e}"
                ))
            })?;
        let parts = part.iter().map(|&p| p as u32).collect();
        Partition::new(parts, n_parts)
    }

    /// Number of parts (some may own no cells).
    pub fn n_parts(&self) -> usize {
        self.n_parts
    }

    /// The part of every cell.
    pub fn parts(&self) -> &[u32] {
        &self.parts
    }

    /// The part of cell `cell`.
    pub fn part_of(&self, cell: usize) -> usize {
        self.parts[cell] as usize
    }

    /// How many cells each part owns, `n_parts` entries.
    pub fn cells_per_part(&self) -> Vec<usize> {
        let mut counts = vec![0; self.n_parts];
        for &p in &self.parts {
            counts[p as usize] += 1;
        }
        counts
    }

    /// The number of interior faces whose two cells lie in different parts.
    ///
    /// # Panics
    /// When `mesh` has a different number of cells than the partition.
    pub fn edge_cut(&self, mesh: &Mesh) -> usize {
        self.check_cells(mesh);
        (0..mesh.n_faces())
            .filter(|&f| {
                let [a, b] = mesh.face_cells(f);
                b != NO_CELL && self.parts[a] != self.parts[b]
            })
            .count()
    }

    /// The part that owns face `face`: that of its first cell, `mesh.face_cells(face)[0]`
    /// (the lower-numbered one), so every face has exactly one owner.
    ///
    /// # Panics
    /// When `mesh` has a different number of cells than the partition, or `face` is out of
    /// range.
    pub fn face_owner(&self, mesh: &Mesh, face: usize) -> usize {
        self.check_cells(mesh);
        self.part_of(mesh.face_cells(face)[0])
    }

    /// Panics unless the partition is one of `mesh`'s cells.
    fn check_cells(&self, mesh: &Mesh) {
        assert_eq!(
            self.parts.len(),
            mesh.n_cells(),
            "a partition of {} cells used with a mesh of {} cells",
            self.parts.len(),
            mesh.n_cells()
        );
    }
}

/// Held during every METIS call ([`Partition::metis`] says why).
#[cfg(feature = "metis")]
static METIS_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Whether the graph in CSR form is connected (breadth-first search from vertex 0).
#[cfg(feature = "metis")]
fn is_connected(xadj: &[metis::Idx], adjncy: &[metis::Idx]) -> bool {
    let n = xadj.len() - 1;
    let mut seen = vec![false; n];
    let mut queue = Vec::with_capacity(n);
    if n > 0 {
        seen[0] = true;
        queue.push(0usize);
    }
    let mut head = 0;
    while head < queue.len() {
        let v = queue[head];
        head += 1;
        for &w in &adjncy[xadj[v] as usize..xadj[v + 1] as usize] {
            let w = w as usize;
            if !seen[w] {
                seen[w] = true;
                queue.push(w);
            }
        }
    }
    queue.len() == n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{unit_square, Diagonal};

    #[test]
    fn new_checks_parts() {
        assert!(Partition::new(vec![0, 1, 2], 3).is_ok());
        // Empty parts are allowed, and so is a partition of no cells.
        assert_eq!(Partition::new(vec![0, 0, 2], 4).unwrap().cells_per_part(), vec![2, 0, 1, 0]);
        assert!(Partition::new(vec![], 1).is_ok());
        let e = Partition::new(vec![0, 3, 1], 3).unwrap_err();
        assert!(
            matches!(&e, MeshError::InvalidParameter(m) if m.contains("cell 1") && m.contains("part 3")),
            "{e}"
        );
        let e = Partition::new(vec![], 0).unwrap_err();
        assert!(matches!(e, MeshError::InvalidParameter(_)));
    }

    #[test]
    fn single_and_accessors() {
        let p = Partition::single(5);
        assert_eq!(p.n_parts(), 1);
        assert_eq!(p.parts(), &[0; 5]);
        assert_eq!(p.cells_per_part(), vec![5]);
        let p = Partition::new(vec![2, 0, 1, 2], 3).unwrap();
        assert_eq!((p.part_of(0), p.part_of(1), p.part_of(3)), (2, 0, 2));
    }

    #[test]
    fn blocks_are_contiguous_and_balanced() {
        for n_cells in 0..40 {
            for n_parts in 1..12 {
                let p = Partition::blocks(n_cells, n_parts);
                assert_eq!(p.n_parts(), n_parts);
                assert_eq!(p.parts().len(), n_cells);
                // Contiguous: non-decreasing, in steps of at most one part.
                assert!(p.parts().windows(2).all(|w| w[1] == w[0] || w[1] == w[0] + 1));
                let counts = p.cells_per_part();
                let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
                assert!(hi - lo <= 1, "{n_cells} cells, {n_parts} parts: {counts:?}");
                // The longer ranges come first.
                assert!(counts.windows(2).all(|w| w[0] >= w[1]), "{counts:?}");
                assert_eq!(counts.iter().sum::<usize>(), n_cells);
            }
        }
        assert_eq!(Partition::blocks(7, 3).parts(), &[0, 0, 0, 1, 1, 2, 2]);
    }

    #[test]
    #[should_panic(expected = "at least 1 part")]
    fn blocks_of_no_parts_panics() {
        Partition::blocks(3, 0);
    }

    #[test]
    fn edge_cut_and_face_owner_on_two_triangles() {
        // The unit square as two triangles sharing one face.
        let mesh = unit_square(1, Diagonal::Right).unwrap();
        assert_eq!(mesh.n_cells(), 2);
        let split = Partition::new(vec![1, 0], 2).unwrap();
        assert_eq!(split.edge_cut(&mesh), 1);
        assert_eq!(Partition::single(2).edge_cut(&mesh), 0);
        for f in 0..mesh.n_faces() {
            // Cell 0 (part 1) is the first cell of every face it has, cell 1 of the others.
            let expected = if mesh.face_cells(f)[0] == 0 { 1 } else { 0 };
            assert_eq!(split.face_owner(&mesh, f), expected);
        }
        let shared = (0..mesh.n_faces()).find(|&f| !mesh.is_boundary_face(f)).unwrap();
        assert_eq!(split.face_owner(&mesh, shared), 1);
    }

    #[test]
    #[should_panic(expected = "a partition of 3 cells used with a mesh of 2 cells")]
    fn edge_cut_of_another_mesh_panics() {
        let mesh = unit_square(1, Diagonal::Right).unwrap();
        Partition::single(3).edge_cut(&mesh);
    }
}
