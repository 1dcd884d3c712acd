//! The trace matrix in dense block format (DBF): assembly by per-row gather, and its SpMV.
//!
//! Layout (host, row-major throughout): `blocks[((row * slots) + a) * n_f^2 + i * n_f + j]` is
//! entry (i, j) of block `a` of block row `row`; `neighbours[row * slots + a]` is the block
//! column (a free face) or [`NONE`]. One row's blocks are contiguous, so a thread that owns a
//! range of rows streams its part of the matrix once, and the only indirection is one index
//! per n_f x n_f block. Padding and Dirichlet slots keep their place (fixed stride, simple
//! addressing) but are skipped by the SpMV, so they cost memory and no bandwidth.
use std::path::Path;

use hdg_core::{CoreError, Real, Result, TraceOperator, TraceTopology, NONE};
use rayon::prelude::*;

/// Rows per parallel task: enough work per task to hide scheduling, small enough to balance.
const ROWS_PER_TASK: usize = 512;

/// The assembled global trace matrix (Dirichlet unknowns eliminated) in DBF.
#[derive(Clone, Debug)]
pub struct DbfMatrix<T> {
    n_f: usize,
    slots: usize,
    blocks: Vec<T>,
    neighbours: Vec<u32>,
}

/// Assembles the DBF matrix and the right-hand side from element trace matrices and loads.
///
/// Every block row gathers from the (at most two) cells of its face, so rows are independent:
/// parallel, no atomics, deterministic. Slots whose column face is a Dirichlet face move
/// `K_ID Lambda_D` into the right-hand side.
pub fn assemble<T: Real>(
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
    let element_block = |cell: usize, i: usize, j: usize, m: usize, l: usize| {
        trace_matrices[cell * nl * nl + (i * n_f + m) * nl + j * n_f + l]
    };
    blocks
        .par_chunks_mut(slots * bsz)
        .zip(rhs.par_chunks_mut(n_f))
        .enumerate()
        .with_min_len(64)
        .for_each(|(row, (row_blocks, row_rhs))| {
            for side in 0..2 {
                let cell = topology.row_cells[row][side];
                if cell == NONE {
                    continue;
                }
                let (cell, i) = (cell as usize, topology.row_local_face[row][side] as usize);
                for m in 0..n_f {
                    row_rhs[m] += trace_loads[cell * nl + i * n_f + m];
                    for l in 0..n_f {
                        row_blocks[m * n_f + l] += element_block(cell, i, i, m, l);
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
                    for m in 0..n_f {
                        for l in 0..n_f {
                            row_rhs[m] -= element_block(cell, i, j, m, l) * lambda_d[l];
                        }
                    }
                } else {
                    let block = &mut row_blocks[a * bsz..(a + 1) * bsz];
                    for m in 0..n_f {
                        for l in 0..n_f {
                            block[m * n_f + l] = element_block(cell, i, j, m, l);
                        }
                    }
                }
            }
        });
    (
        DbfMatrix {
            n_f,
            slots,
            blocks,
            neighbours: topology.neighbours.clone(),
        },
        rhs,
    )
}

impl<T: Real> DbfMatrix<T> {
    /// Block rows.
    pub fn n_rows(&self) -> usize {
        self.neighbours.len() / self.slots
    }

    /// Block size n_f.
    pub fn block_size(&self) -> usize {
        self.n_f
    }

    /// Blocks per row.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Stored blocks that the SpMV reads (not padding, not Dirichlet).
    pub fn n_active_blocks(&self) -> usize {
        self.neighbours.iter().filter(|&&c| c != NONE).count()
    }

    /// Bytes held by the matrix (blocks and neighbour table, padding included).
    pub fn memory_bytes(&self) -> usize {
        self.blocks.len() * std::mem::size_of::<T>() + self.neighbours.len() * 4
    }

    /// Bytes one SpMV must move at least: active blocks, their indices, x once and y once.
    pub fn spmv_bytes(&self) -> usize {
        let t = std::mem::size_of::<T>();
        let rows = self.n_rows() * self.n_f;
        self.n_active_blocks() * self.n_f * self.n_f * t + self.neighbours.len() * 4 + 2 * rows * t
    }

    /// y = A x.
    pub fn spmv(&self, x: &[T], y: &mut [T]) {
        match self.n_f {
            1 => spmv_fixed::<T, 1>(self.slots, &self.blocks, &self.neighbours, x, y),
            2 => spmv_fixed::<T, 2>(self.slots, &self.blocks, &self.neighbours, x, y),
            3 => spmv_fixed::<T, 3>(self.slots, &self.blocks, &self.neighbours, x, y),
            4 => spmv_fixed::<T, 4>(self.slots, &self.blocks, &self.neighbours, x, y),
            5 => spmv_fixed::<T, 5>(self.slots, &self.blocks, &self.neighbours, x, y),
            6 => spmv_fixed::<T, 6>(self.slots, &self.blocks, &self.neighbours, x, y),
            7 => spmv_fixed::<T, 7>(self.slots, &self.blocks, &self.neighbours, x, y),
            8 => spmv_fixed::<T, 8>(self.slots, &self.blocks, &self.neighbours, x, y),
            9 => spmv_fixed::<T, 9>(self.slots, &self.blocks, &self.neighbours, x, y),
            10 => spmv_fixed::<T, 10>(self.slots, &self.blocks, &self.neighbours, x, y),
            11 => spmv_fixed::<T, 11>(self.slots, &self.blocks, &self.neighbours, x, y),
            _ => spmv_dynamic(self.n_f, self.slots, &self.blocks, &self.neighbours, x, y),
        }
    }

    /// The diagonal (from the diagonal blocks).
    pub fn diagonal(&self) -> Vec<T> {
        let (nf, bsz) = (self.n_f, self.n_f * self.n_f);
        (0..self.n_rows() * nf)
            .map(|i| {
                let (row, m) = (i / nf, i % nf);
                self.blocks[row * self.slots * bsz + m * nf + m]
            })
            .collect()
    }

    /// The same matrix in compressed sparse row form (every stored entry of every active block).
    pub fn to_csr(&self) -> sprs::CsMat<T> {
        let nf = self.n_f;
        let bsz = nf * nf;
        let n = self.n_rows() * nf;
        let mut indptr = Vec::with_capacity(n + 1);
        let mut indices = Vec::with_capacity(self.n_active_blocks() * bsz);
        let mut data = Vec::with_capacity(self.n_active_blocks() * bsz);
        indptr.push(0);
        for row in 0..self.n_rows() {
            let mut cols: Vec<(u32, usize)> = (0..self.slots)
                .filter(|&a| self.neighbours[row * self.slots + a] != NONE)
                .map(|a| (self.neighbours[row * self.slots + a], a))
                .collect();
            cols.sort_unstable();
            for m in 0..nf {
                for &(c, a) in &cols {
                    let block = &self.blocks[(row * self.slots + a) * bsz..];
                    for l in 0..nf {
                        indices.push(c as usize * nf + l);
                        data.push(block[m * nf + l]);
                    }
                }
                indptr.push(indices.len());
            }
        }
        sprs::CsMat::new((n, n), indptr, indices, data)
    }

    /// Writes the matrix as a Matrix Market coordinate file (values written in f64).
    pub fn write_matrix_market(&self, path: &Path) -> Result<()> {
        let csr = self.to_csr().map(|v| v.as_f64());
        sprs::io::write_matrix_market(path, &csr).map_err(CoreError::from)
    }
}

fn spmv_fixed<T: Real, const NF: usize>(
    slots: usize,
    blocks: &[T],
    neighbours: &[u32],
    x: &[T],
    y: &mut [T],
) {
    y.par_chunks_mut(NF * ROWS_PER_TASK)
        .enumerate()
        .for_each(|(task, y_task)| {
            let first_row = task * ROWS_PER_TASK;
            for (r, y_row) in y_task.chunks_exact_mut(NF).enumerate() {
                let row = first_row + r;
                let mut acc = [T::zero(); NF];
                for a in 0..slots {
                    let c = neighbours[row * slots + a];
                    if c == NONE {
                        continue;
                    }
                    // Fixed-length slices: NF is a constant, so the bounds checks below fold away.
                    let block = &blocks[(row * slots + a) * NF * NF..][..NF * NF];
                    let xc = &x[c as usize * NF..][..NF];
                    for i in 0..NF {
                        let mut s = T::zero();
                        for j in 0..NF {
                            s += block[i * NF + j] * xc[j];
                        }
                        acc[i] += s;
                    }
                }
                y_row.copy_from_slice(&acc);
            }
        });
}

fn spmv_dynamic<T: Real>(
    nf: usize,
    slots: usize,
    blocks: &[T],
    neighbours: &[u32],
    x: &[T],
    y: &mut [T],
) {
    y.par_chunks_mut(nf * ROWS_PER_TASK)
        .enumerate()
        .for_each(|(task, y_task)| {
            let first_row = task * ROWS_PER_TASK;
            for (r, y_row) in y_task.chunks_exact_mut(nf).enumerate() {
                let row = first_row + r;
                y_row.iter_mut().for_each(|v| *v = T::zero());
                for a in 0..slots {
                    let c = neighbours[row * slots + a];
                    if c == NONE {
                        continue;
                    }
                    let block = &blocks[(row * slots + a) * nf * nf..][..nf * nf];
                    let xc = &x[c as usize * nf..][..nf];
                    for (i, yi) in y_row.iter_mut().enumerate() {
                        *yi += block[i * nf..(i + 1) * nf]
                            .iter()
                            .zip(xc)
                            .map(|(&b, &v)| b * v)
                            .sum::<T>();
                    }
                }
            }
        });
}

impl<T: Real> TraceOperator<T> for DbfMatrix<T> {
    type Vector = Vec<T>;
    fn dim(&self) -> usize {
        self.n_rows() * self.n_f
    }
    fn apply(&self, x: &Vec<T>, y: &mut Vec<T>) -> Result<()> {
        self.spmv(x, y);
        Ok(())
    }
    fn diagonal(&self) -> Result<Vec<T>> {
        Ok(DbfMatrix::diagonal(self))
    }
}
