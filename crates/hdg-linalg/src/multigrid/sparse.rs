//! The sparse products of the multigrid setup on the host, parallel over rows: C = A B by
//! Gustavson's row-by-row method (and any matrix built row by row the same way: the vertex
//! level's Galerkin operator), and the transpose.
//!
//! Why not sprs: its product runs its symbolic phase on one thread, and at a million vertex
//! unknowns the smoothed-aggregation setup spent 1.5 s of its 1.9 s there (2 cores).
use hdg_core::HostCsr;
use rayon::prelude::*;

/// Rows per parallel task.
const ROWS_PER_TASK: usize = 4096;

/// The rows of one task: its row lengths, columns and values.
pub(crate) struct RowBlock {
    lengths: Vec<usize>,
    indices: Vec<usize>,
    values: Vec<f64>,
}

/// Concatenates row blocks (in order) into a CSR matrix of `n_cols` columns.
pub(crate) fn concatenate(blocks: Vec<RowBlock>, n_cols: usize) -> HostCsr {
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

/// C = A B, columns sorted within each row (a.n_cols must equal b.n). Each row of C is
/// accumulated in a dense array of b.n_cols entries per task, its nonzero columns collected,
/// sorted, and read out: the sums run in the order of A's and B's entries, so the result does
/// not depend on the threads.
pub(crate) fn multiply(a: &HostCsr, b: &HostCsr) -> HostCsr {
    debug_assert_eq!(a.n_cols, b.n);
    assemble_rows(a.n, b.n_cols, |i, accumulator| {
        for p in a.indptr[i]..a.indptr[i + 1] {
            let (k, a_ik) = (a.indices[p], a.values[p]);
            for q in b.indptr[k]..b.indptr[k + 1] {
                accumulator.add(b.indices[q], a_ik * b.values[q]);
            }
        }
    })
}

/// A CSR matrix of `n` rows and `n_cols` columns whose row i is what `row(i, accumulator)`
/// adds to the accumulator (entries of one column summed in the order they are added),
/// rows in parallel.
pub(crate) fn assemble_rows(
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
pub(crate) struct Accumulator {
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
    pub(crate) fn add(&mut self, j: usize, value: f64) {
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

/// A^T, columns sorted within each row (a counting sort by column: entries of one column keep
/// the order of their rows).
pub(crate) fn transpose(a: &HostCsr) -> HostCsr {
    let mut counts = vec![0usize; a.n_cols + 1];
    for &j in &a.indices {
        counts[j + 1] += 1;
    }
    for j in 0..a.n_cols {
        counts[j + 1] += counts[j];
    }
    let indptr = counts.clone();
    let mut next = counts;
    let nnz = a.indices.len();
    let mut indices = vec![0usize; nnz];
    let mut values = vec![0.0; nnz];
    for i in 0..a.n {
        for p in a.indptr[i]..a.indptr[i + 1] {
            let j = a.indices[p];
            indices[next[j]] = i;
            values[next[j]] = a.values[p];
            next[j] += 1;
        }
    }
    HostCsr { n: a.n_cols, n_cols: a.n, indptr, indices, values }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dense(a: &HostCsr) -> Vec<Vec<f64>> {
        let mut out = vec![vec![0.0; a.n_cols]; a.n];
        for i in 0..a.n {
            for p in a.indptr[i]..a.indptr[i + 1] {
                out[i][a.indices[p]] += a.values[p];
            }
        }
        out
    }

    /// A pseudo-random sparse matrix with about `per_row` entries a row.
    fn random(n: usize, n_cols: usize, per_row: usize, seed: u64) -> HostCsr {
        let mut state = seed;
        let mut next = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) as usize
        };
        let mut a = HostCsr { n, n_cols, indptr: vec![0], ..HostCsr::default() };
        for _ in 0..n {
            let mut cols: Vec<usize> = (0..per_row).map(|_| next() % n_cols).collect();
            cols.sort_unstable();
            cols.dedup();
            for c in cols {
                a.indices.push(c);
                a.values.push((next() % 1000) as f64 / 100.0 - 5.0);
            }
            a.indptr.push(a.indices.len());
        }
        a
    }

    #[test]
    fn products_and_transposes_match_the_dense_ones() {
        // Enough rows for several tasks.
        let (a, b) = (random(9000, 700, 4, 1), random(700, 5000, 3, 2));
        let c = multiply(&a, &b);
        let (da, db, dc) = (dense(&a), dense(&b), dense(&c));
        for i in (0..a.n).step_by(97) {
            for j in 0..b.n_cols {
                let want: f64 = (0..a.n_cols).map(|k| da[i][k] * db[k][j]).sum();
                assert!((dc[i][j] - want).abs() < 1e-12, "({i}, {j})");
            }
        }
        for i in 0..c.n {
            let cols = &c.indices[c.indptr[i]..c.indptr[i + 1]];
            assert!(cols.windows(2).all(|w| w[0] < w[1]));
        }
        let t = transpose(&a);
        let dt = dense(&t);
        for i in 0..a.n {
            for j in 0..a.n_cols {
                assert_eq!(da[i][j], dt[j][i]);
            }
        }
        assert!((0..t.n)
            .all(|i| t.indices[t.indptr[i]..t.indptr[i + 1]].windows(2).all(|w| w[0] < w[1])));
    }
}
