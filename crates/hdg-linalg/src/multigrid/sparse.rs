//! The sparse products of the multigrid setup on the host, parallel over rows: C = A B by
//! Gustavson's row-by-row method ([`hdg_core::sparse_rows`]), and the transpose.
use hdg_core::sparse_rows::{assemble_rows, Accumulator};
use hdg_core::HostCsr;

/// C = A B, columns sorted within each row (a.n_cols must equal b.n). Each row of C is
/// accumulated in a dense array of b.n_cols entries per task, its nonzero columns collected,
/// sorted, and read out: the sums run in the order of A's and B's entries, so the result does
/// not depend on the threads.
pub(crate) fn multiply(a: &HostCsr, b: &HostCsr) -> HostCsr {
    debug_assert_eq!(a.n_cols, b.n);
    assemble_rows(a.n, b.n_cols, |i, accumulator| add_row_product(a, b, i, accumulator))
}

/// Adds row i of A B to `accumulator`, in the order of A's and B's entries.
pub(crate) fn add_row_product(a: &HostCsr, b: &HostCsr, i: usize, accumulator: &mut Accumulator) {
    for p in a.indptr[i]..a.indptr[i + 1] {
        let (k, a_ik) = (a.indices[p], a.values[p]);
        for q in b.indptr[k]..b.indptr[k + 1] {
            accumulator.add(b.indices[q], a_ik * b.values[q]);
        }
    }
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
