//! Memory estimates made before allocating: a problem too large for the machine is refused
//! with the estimate and the limit, instead of aborting in the allocator (or, for sizes whose
//! byte counts overflow, panicking with "capacity overflow").
//!
//! The estimate counts what the CPU pipeline holds at its peak, per cell: the mesh (vertex and
//! face indices, orientations), the geometry record and the cell's vertex coordinates, tau, the
//! condensation's outputs (K_e nl^2, b_e nl, Z n nl, u0 n) and the fields (u n, q d n, u* n');
//! per face: the DBF block row (slots x n_f^2) and a dozen trace vectors of the solver. It is
//! a lower bound of the peak resident memory (measured peaks: BENCHMARKS.md, section 'Memory'), so
//! a refusal never turns away a problem that would fit. A device backend holds the same
//! arrays in device memory and checks the same estimate against the device's free memory.
use crate::error::{CoreError, Result};
use crate::CellType;

/// Bytes the pipeline holds at least for `n_cells` cells of `cell_type` at order `order` with
/// values of `value_bytes` bytes (8 for f64), saturating at `u64::MAX`.
pub fn pipeline_bytes(cell_type: CellType, n_cells: u64, order: usize, value_bytes: u64) -> u64 {
    let sizes = Sizes::new(cell_type, n_cells, order, value_bytes);
    sizes.cells.saturating_add(sizes.matrix).saturating_add(sizes.vectors)
}

/// [`pipeline_bytes`] without the assembled trace matrix: what a matrix-free trace operator
/// holds.
pub fn matrix_free_bytes(cell_type: CellType, n_cells: u64, order: usize, value_bytes: u64) -> u64 {
    let sizes = Sizes::new(cell_type, n_cells, order, value_bytes);
    sizes.cells.saturating_add(sizes.vectors)
}

/// The three parts of the estimate: per cell, the trace matrix, the trace vectors.
struct Sizes {
    cells: u64,
    matrix: u64,
    vectors: u64,
}

impl Sizes {
    fn new(cell_type: CellType, n_cells: u64, order: usize, value_bytes: u64) -> Sizes {
        let d = cell_type.dim() as u64;
        let k = order as u64;
        let binomial = |m: u64, dd: u64| (1..=dd).fold(1u64, |p, i| p * (m + i) / i);
        let (n, n_f, n_post) = (binomial(k, d), binomial(k, d - 1), binomial(k + 1, d));
        let faces_per_cell = d + 1;
        let nl = faces_per_cell * n_f;
        let slots = if d == 2 { 5 } else { 7 };
        let per_cell_values = nl * nl + nl + n * nl + n + n + d * n + n_post + faces_per_cell;
        let geometry = 1 + d * d + faces_per_cell * (1 + d);
        let per_cell_bytes = per_cell_values * value_bytes
            + geometry * value_bytes
            + (d + 1) * d * 8 // cell vertex coordinates
            + (d + 1) * 8 + faces_per_cell * 9; // mesh: vertex and face indices, orientations
                                                // Faces: each interior face is shared by two cells.
        let faces = n_cells.saturating_mul(faces_per_cell).div_ceil(2);
        Sizes {
            cells: n_cells.saturating_mul(per_cell_bytes),
            matrix: faces.saturating_mul(slots * n_f * n_f * value_bytes),
            vectors: faces.saturating_mul(12 * n_f * value_bytes),
        }
    }
}

/// Bytes of the mesh alone (vertex and face tables, coordinates) for `n_cells` cells: what a
/// device backend keeps on the host.
pub fn mesh_bytes(cell_type: CellType, n_cells: u64) -> u64 {
    let d = cell_type.dim() as u64;
    let per_cell = (d + 1) * 8 + (d + 1) * 9 + 16;
    let per_face = 2 * 8 + d * 8 + 4 + 8;
    n_cells
        .saturating_mul(per_cell)
        .saturating_add(n_cells.saturating_mul(d + 1).div_ceil(2).saturating_mul(per_face))
}

/// The memory the operating system says is available for new allocations (`MemAvailable` of
/// /proc/meminfo), where it says.
pub fn available_host_bytes() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// Refuses `what` when `estimate` bytes exceed what the host has available (no check where the
/// host does not say).
///
/// # Errors
/// [`CoreError::OutOfHostMemory`] with the estimate and the available memory.
pub fn check_host_memory(what: &str, estimate: u64) -> Result<()> {
    match available_host_bytes() {
        Some(available) if estimate > available => Err(CoreError::OutOfHostMemory {
            what: what.to_string(),
            estimated_bytes: estimate,
            available_bytes: available,
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The estimate against hand counts, and saturation instead of overflow.
    #[test]
    fn estimates_count_what_the_pipeline_holds() {
        // Triangles, k = 1: n = 3, n_f = 2, nl = 6, n' = 6; values per cell 36 + 6 + 18 + 3 +
        // 3 + 6 + 6 + 3 = 81, geometry 14, so 81 * 8 + 14 * 8 + 48 + 24 + 27 bytes a cell;
        // 3 faces per 2 cells of (5 * 4 + 24) * 8 bytes.
        let per_cell = 81 * 8 + 14 * 8 + 48 + 24 + 27;
        let per_face = (5 * 4 + 24) * 8;
        assert_eq!(pipeline_bytes(CellType::Triangle, 2, 1, 8), 2 * per_cell + 3 * per_face);
        // Matrix-free: no DBF block row (5 slots of 2 x 2 values) per face.
        let per_face_vectors = 24 * 8;
        assert_eq!(
            matrix_free_bytes(CellType::Triangle, 2, 1, 8),
            2 * per_cell + 3 * per_face_vectors
        );
        assert_eq!(pipeline_bytes(CellType::Tetrahedron, u64::MAX / 2, 8, 8), u64::MAX);
        let big = pipeline_bytes(CellType::Triangle, 2 * 100_000u64.pow(2), 3, 8);
        assert!(big > 1u64 << 40, "square:100000 at k = 3 needs terabytes: {big}");
    }
}
