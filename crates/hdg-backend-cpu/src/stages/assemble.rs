//! Assembly: the element trace matrices and loads gathered into the DBF matrix and the
//! right-hand side ([`crate::operator::dbf`] has the layout), then the Neumann and Robin
//! faces' terms (`hdg_core::boundary`).
use hdg_core::{Discretization, HostCondensed, Real, Result, TraceTopology, NONE};
use rayon::prelude::*;

use crate::operator::dbf::DbfMatrix;

/// Assembles the DBF matrix and the right-hand side from element trace matrices and loads.
///
/// Every block row gathers from the (at most two) cells of its face, so rows are independent:
/// parallel, no atomics, deterministic. Slots whose column face is a Dirichlet face move
/// `K_ID Lambda_D` into the right-hand side.
pub fn assemble_dbf<T: Real>(
    topology: &TraceTopology,
    n_f: usize,
    trace_matrices: &[T],
    trace_loads: &[T],
    dirichlet_values: &[T],
) -> (DbfMatrix<T>, Vec<T>) {
    let slots = topology.slots;
    let nl = topology.faces_per_cell * n_f;
    let bsz = n_f * n_f;
    let n_rows = topology.n_rows();
    let mut blocks = vec![T::zero(); n_rows * slots * bsz];
    let mut rhs = vec![T::zero(); n_rows * n_f];
    // Row m of block (i, j) of cell `cell`'s K_e: n_f contiguous values.
    let element_row = |cell: usize, i: usize, j: usize, m: usize| {
        &trace_matrices[cell * nl * nl + (i * n_f + m) * nl + j * n_f..][..n_f]
    };
    blocks
        .par_chunks_mut(slots * bsz)
        .zip(rhs.par_chunks_mut(n_f))
        .enumerate()
        .with_min_len(64)
        .for_each(|(row, (row_blocks, row_rhs))| {
            // The zeroed allocation is not touched yet: writing before the first `+=` takes one
            // page fault per page instead of a read fault on the shared zero page followed by a
            // copy-on-write fault (with a TLB shootdown on every other core).
            row_blocks.fill(T::zero());
            row_rhs.fill(T::zero());
            for side in 0..2 {
                let cell = topology.row_cells[row][side];
                if cell == NONE {
                    continue;
                }
                let (cell, i) = (cell as usize, topology.row_local_face[row][side] as usize);
                let loads = &trace_loads[cell * nl + i * n_f..][..n_f];
                for (m, (r, &load)) in row_rhs.iter_mut().zip(loads).enumerate() {
                    *r += load;
                    let block_row = &mut row_blocks[m * n_f..(m + 1) * n_f];
                    for (b, &k) in block_row.iter_mut().zip(element_row(cell, i, i, m)) {
                        *b += k;
                    }
                }
            }
            for a in 1..slots {
                let s = row * slots + a;
                if topology.slot_cell[s] == NONE {
                    continue;
                }
                let cell = topology.slot_cell[s] as usize;
                let [i, j] = topology.slot_local[s].map(|v| v as usize);
                if topology.neighbours[s] == NONE {
                    let face = topology.slot_faces[s] as usize;
                    let lambda_d = &dirichlet_values[face * n_f..(face + 1) * n_f];
                    for (m, r) in row_rhs.iter_mut().enumerate() {
                        for (&k, &lambda) in element_row(cell, i, j, m).iter().zip(lambda_d) {
                            *r -= k * lambda;
                        }
                    }
                } else {
                    let block = &mut row_blocks[a * bsz..(a + 1) * bsz];
                    for (m, block_row) in block.chunks_exact_mut(n_f).enumerate() {
                        block_row.copy_from_slice(element_row(cell, i, j, m));
                    }
                }
            }
        });
    let columns = topology
        .neighbours
        .iter()
        .enumerate()
        .map(|(s, &c)| if c == NONE { (s / slots) as u32 } else { c })
        .collect();
    (DbfMatrix::from_parts(n_f, slots, blocks, columns), rhs)
}

/// The stage: the gather, then the boundary faces' terms.
pub(crate) fn assemble<T: Real>(
    disc: &Discretization<'_, T>,
    condensed: &HostCondensed<T>,
) -> Result<(DbfMatrix<T>, Vec<T>)> {
    let (mut matrix, mut rhs) = assemble_dbf(
        &disc.topology,
        disc.tables.n_f,
        &condensed.trace_matrices,
        &condensed.trace_loads,
        &disc.dirichlet_values,
    );
    let n_f = disc.tables.n_f;
    disc.boundary_terms
        .add_to(n_f, &mut rhs, |row, value| matrix.add_to_diagonal_block(row, value));
    Ok((matrix, rhs))
}
