//! The vertex level's operator A_1 = E^T A E, assembled from the trace matrix's blocks
//! projected face by face (`hdg_core::auxiliary`).
use hdg_core::{CoreError, HostCsr, Result, TraceTopology, VertexSpace, NONE};

use super::sparse::assemble_rows;

/// A_1 = E^T A E from `projected`, the blocks of the trace matrix projected onto E^
/// ([`hdg_core::TraceOperator::project_blocks`] with basis [`VertexSpace::face_transfer`]):
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
    Ok(assemble_rows(n, n, |v, accumulator| {
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
