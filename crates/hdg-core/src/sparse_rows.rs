//! Sparse matrices built row by row on the host, rows in parallel: the vertex level's Galerkin
//! operator ([`crate::auxiliary::vertex_operator`]) and the multigrid's sparse products
//! (`hdg-linalg`) both assemble this way.
//!
//! Why not sprs: its product runs its symbolic phase on one thread, and at a million vertex
//! unknowns the smoothed-aggregation setup spent 1.5 s of its 1.9 s there (2 cores).
use rayon::prelude::*;

use crate::backend::HostCsr;

/// Rows per parallel task.
const ROWS_PER_TASK: usize = 4096;

/// The rows of one task: its row lengths, columns and values.
struct RowBlock {
    lengths: Vec<usize>,
    indices: Vec<usize>,
    values: Vec<f64>,
}

/// Concatenates row blocks (in order) into a CSR matrix of `n_cols` columns.
fn concatenate(blocks: Vec<RowBlock>, n_cols: usize) -> HostCsr {
    let n: usize = blocks.iter().map(|b| b.lengths.len()).sum();
    let nnz: usize = blocks.iter().map(|b| b.indices.len()).sum();
    let mut indptr = Vec::with_capacity(n + 1);
    indptr.push(0);
    let mut indices = Vec::with_capacity(nnz);
    let mut values = Vec::with_capacity(nnz);
    for block in blocks {
        for len in block.lengths {
            indptr.push(indptr.last().copied().unwrap_or(0) + len);
        }
        indices.extend_from_slice(&block.indices);
        values.extend_from_slice(&block.values);
    }
    HostCsr { n, n_cols, indptr, indices, values }
}

/// A CSR matrix of `n` rows and `n_cols` columns whose row i is what `row(i, accumulator)`
/// adds to the accumulator (entries of one column summed in the order they are added),
/// rows in parallel.
pub fn assemble_rows(
    n: usize,
    n_cols: usize,
    row: impl Fn(usize, &mut Accumulator) + Sync,
) -> HostCsr {
    let blocks: Vec<RowBlock> = (0..n.div_ceil(ROWS_PER_TASK))
        .into_par_iter()
        .map(|task| {
            ACCUMULATOR.with_borrow_mut(|accumulator| {
                accumulator.reset(n_cols);
                let rows = task * ROWS_PER_TASK..((task + 1) * ROWS_PER_TASK).min(n);
                let mut block = RowBlock {
                    lengths: Vec::with_capacity(rows.len()),
                    indices: Vec::new(),
                    values: Vec::new(),
                };
                for i in rows {
                    row(i, accumulator);
                    let len = accumulator.drain_sorted(&mut block.indices, &mut block.values);
                    block.lengths.push(len);
                }
                block
            })
        })
        .collect();
    concatenate(blocks, n_cols)
}

/// A dense accumulator of one sparse row: values by column, which columns are in use, and
/// their list. Kept per thread (a fresh one per task would clear n_cols entries every time).
#[derive(Default)]
pub struct Accumulator {
    values: Vec<f64>,
    seen: Vec<bool>,
    columns: Vec<usize>,
}

impl Accumulator {
    /// Ready for rows of `n_cols` columns (grows, never shrinks; `seen` is all false between
    /// rows).
    fn reset(&mut self, n_cols: usize) {
        if self.seen.len() < n_cols {
            self.values.resize(n_cols, 0.0);
            self.seen.resize(n_cols, false);
        }
        self.columns.clear();
    }

    /// Adds `value` to column j of the row.
    pub fn add(&mut self, j: usize, value: f64) {
        if !self.seen[j] {
            self.seen[j] = true;
            self.values[j] = 0.0;
            self.columns.push(j);
        }
        self.values[j] += value;
    }

    /// Appends the row's entries in column order and clears it; returns their number.
    fn drain_sorted(&mut self, indices: &mut Vec<usize>, values: &mut Vec<f64>) -> usize {
        self.columns.sort_unstable();
        for &j in &self.columns {
            indices.push(j);
            values.push(self.values[j]);
            self.seen[j] = false;
        }
        let len = self.columns.len();
        self.columns.clear();
        len
    }
}

thread_local! {
    static ACCUMULATOR: std::cell::RefCell<Accumulator> = std::cell::RefCell::new(Accumulator::default());
}
