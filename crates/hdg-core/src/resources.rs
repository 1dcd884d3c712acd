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
/// values of `value_bytes` bytes (8 for f64), saturating at `u64::MAX`. Both backends free K_e
/// and b_e once the trace matrix is assembled, so the peak is the larger of two phases: the
/// assembly (K_e, b_e, Z, u0, the matrix and the right-hand side) and the solve and recovery
/// (Z, u0, the fields, the matrix and the solver's vectors).
pub fn pipeline_bytes(cell_type: CellType, n_cells: u64, order: usize, value_bytes: u64) -> u64 {
    let s = Sizes::new(cell_type, n_cells, order, value_bytes);
    let assembly = s.cells.saturating_add(s.element_matrices).saturating_add(s.matrix);
    let solve = s.cells.saturating_add(s.fields).saturating_add(s.matrix);
    assembly.saturating_add(s.rhs).max(solve.saturating_add(s.vectors))
}

/// [`pipeline_bytes`] without the assembled trace matrix: what a matrix-free trace operator
/// holds, which reads K_e and b_e in every product and keeps them.
pub fn matrix_free_bytes(cell_type: CellType, n_cells: u64, order: usize, value_bytes: u64) -> u64 {
    let s = Sizes::new(cell_type, n_cells, order, value_bytes);
    s.cells.saturating_add(s.element_matrices).saturating_add(s.fields).saturating_add(s.vectors)
}

/// The parts of the estimate: per cell what every stage keeps (the mesh, the geometry, tau, the
/// recovery's Z and u0), K_e and b_e, the fields; the trace matrix, the solver's trace vectors
/// and the right-hand side.
struct Sizes {
    cells: u64,
    element_matrices: u64,
    fields: u64,
    matrix: u64,
    vectors: u64,
    rhs: u64,
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
        let kept_values = n * nl + n + faces_per_cell;
        let geometry = 1 + d * d + faces_per_cell * (1 + d);
        let per_cell_bytes = kept_values * value_bytes
            + geometry * value_bytes
            + (d + 1) * d * 8 // cell vertex coordinates
            + (d + 1) * 8 + faces_per_cell * 9; // mesh: vertex and face indices, orientations
                                                // Faces: each interior face is shared by two cells.
        let faces = n_cells.saturating_mul(faces_per_cell).div_ceil(2);
        let per_cell = |values: u64| n_cells.saturating_mul(values * value_bytes);
        let per_face = |values: u64| faces.saturating_mul(values * value_bytes);
        Sizes {
            cells: n_cells.saturating_mul(per_cell_bytes),
            element_matrices: per_cell(nl * nl + nl),
            fields: per_cell(n + d * n + n_post),
            matrix: per_face(slots * n_f * n_f),
            vectors: per_face(12 * n_f),
            rhs: per_face(n_f),
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
        // Triangles, k = 1: n = 3, n_f = 2, nl = 6, n' = 6. Kept per cell: Z 18 + u0 3 + tau 3
        // values, geometry 14 values, 48 + 24 + 27 bytes of mesh; K_e and b_e 36 + 6 values;
        // fields 3 + 6 + 6. Per face (3 per 2 cells): the matrix 5 x 4 values, 12 vectors of 2,
        // the right-hand side 2.
        let kept = 24 * 8 + 14 * 8 + 48 + 24 + 27;
        let (element, fields) = (42 * 8, 15 * 8);
        let (matrix, vectors, rhs) = (20 * 8, 24 * 8, 2 * 8);
        let assembly = 2 * (kept + element) + 3 * (matrix + rhs);
        let solve = 2 * (kept + fields) + 3 * (matrix + vectors);
        assert_eq!((assembly, solve), (2006, 2102));
        assert_eq!(pipeline_bytes(CellType::Triangle, 2, 1, 8), assembly.max(solve));
        // At k = 3 the assembly's K_e outweighs the solve's vectors and fields.
        let (k3_assembly, k3_solve) = (
            2 * ((133 * 8 + 14 * 8 + 99) + 156 * 8) + 3 * ((80 + 4) * 8),
            2 * ((133 * 8 + 14 * 8 + 99) + 45 * 8) + 3 * ((80 + 48) * 8),
        );
        assert!(k3_assembly > k3_solve);
        assert_eq!(pipeline_bytes(CellType::Triangle, 2, 3, 8), k3_assembly);
        // Matrix-free: K_e, b_e and the fields with the vectors, no DBF block row.
        assert_eq!(
            matrix_free_bytes(CellType::Triangle, 2, 1, 8),
            2 * (kept + element + fields) + 3 * vectors
        );
        assert_eq!(pipeline_bytes(CellType::Tetrahedron, u64::MAX / 2, 8, 8), u64::MAX);
        let big = pipeline_bytes(CellType::Triangle, 2 * 100_000u64.pow(2), 3, 8);
        assert!(big > 1u64 << 40, "square:100000 at k = 3 needs terabytes: {big}");
    }
}
