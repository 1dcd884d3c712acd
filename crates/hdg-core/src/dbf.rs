//! The dense block format (DBF) of the trace matrix, as every backend reads it on the host.
//!
//! Block row `row` is free face `row`; its slots hold `n_f x n_f` blocks: slot 0 the diagonal
//! block, slots 1.. the couplings to the other faces of the face's cells
//! ([`crate::TraceTopology`] fixes their order). Backends store the blocks in layouts of their
//! own (row-major on the CPU, one plane per entry on a GPU, element matrices for a matrix-free
//! operator); each describes its storage through [`DbfEntries`], and the exports that must
//! agree to the bit across backends (the CSR form, the Gershgorin bounds) are written here
//! once.

use crate::csr::HostCsr;

/// The sizes of a DBF matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DbfShape {
    /// Block rows (free faces).
    pub n_rows: usize,
    /// Block size n_f.
    pub n_f: usize,
    /// Slots per block row.
    pub slots: usize,
}

/// Read access to a DBF matrix held on the host in any layout.
pub trait DbfEntries {
    /// Its sizes.
    fn shape(&self) -> DbfShape;
    /// The block column of slot `a` of block row `row`, or `None` for an inactive slot
    /// (padding, or a Dirichlet face). Slot 0 is always active: its column is `row`.
    fn column(&self, row: usize, a: usize) -> Option<u32>;
    /// Entry (i, j) of the block in slot `a` of block row `row` (an active slot).
    fn entry(&self, row: usize, a: usize, i: usize, j: usize) -> f64;
}

/// The column of slot `a` in the stored-column convention of the DBF layouts: an inactive
/// slot stores its own row as its column (a zero block there costs the SpMV no branch), which
/// no active slot other than slot 0 can.
pub fn stored_column(row: usize, a: usize, column: u32) -> Option<u32> {
    (a == 0 || column as usize != row).then_some(column)
}

/// The matrix in CSR form: every entry of every active block, each row's blocks in increasing
/// column order.
pub fn to_csr(matrix: &impl DbfEntries) -> HostCsr {
    let DbfShape { n_rows, n_f: nf, slots } = matrix.shape();
    let n = n_rows * nf;
    let mut csr = HostCsr { n, n_cols: n, indptr: Vec::with_capacity(n + 1), ..HostCsr::default() };
    csr.indptr.push(0);
    let mut columns: Vec<(u32, usize)> = Vec::with_capacity(slots);
    for row in 0..n_rows {
        columns.clear();
        columns.extend((0..slots).filter_map(|a| matrix.column(row, a).map(|c| (c, a))));
        columns.sort_unstable();
        for m in 0..nf {
            for &(c, a) in &columns {
                for l in 0..nf {
                    csr.indices.push(c as usize * nf + l);
                    csr.values.push(matrix.entry(row, a, m, l));
                }
            }
            csr.indptr.push(csr.indices.len());
        }
    }
    csr
}

/// Gershgorin bounds (lower, upper) of the matrix, or of D^-1 A when `scaled` (each row divided
/// by its diagonal entry): the one definition every backend uses, so that bounds agree to the
/// bit across backends.
pub fn gershgorin_bounds(matrix: &impl DbfEntries, scaled: bool) -> (f64, f64) {
    let DbfShape { n_rows, n_f: nf, slots } = matrix.shape();
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for row in 0..n_rows {
        for m in 0..nf {
            let (mut radius, mut center) = (0.0, 0.0);
            for a in (0..slots).filter(|&a| matrix.column(row, a).is_some()) {
                for l in 0..nf {
                    let v = matrix.entry(row, a, m, l);
                    if a == 0 && l == m {
                        center = v;
                    } else {
                        radius += v.abs();
                    }
                }
            }
            let (c, r) = if scaled { (1.0, radius / center) } else { (center, radius) };
            lo = lo.min(c - r);
            hi = hi.max(c + r);
        }
    }
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two block rows of 1 x 1 blocks, two slots: [[4, -1], [-1, 3]] with the second row's
    /// second slot inactive (stored column = its row).
    struct Small;
    impl DbfEntries for Small {
        fn shape(&self) -> DbfShape {
            DbfShape { n_rows: 2, n_f: 1, slots: 2 }
        }
        fn column(&self, row: usize, a: usize) -> Option<u32> {
            let stored = [[0, 1], [1, 1]][row][a];
            stored_column(row, a, stored)
        }
        fn entry(&self, row: usize, a: usize, _: usize, _: usize) -> f64 {
            [[4.0, -1.0], [3.0, 0.0]][row][a]
        }
    }

    #[test]
    fn csr_and_bounds_of_a_small_matrix() {
        let csr = to_csr(&Small);
        assert_eq!(csr.indptr, vec![0, 2, 3]);
        assert_eq!(csr.indices, vec![0, 1, 1]);
        assert_eq!(csr.values, vec![4.0, -1.0, 3.0]);
        assert_eq!(gershgorin_bounds(&Small, false), (3.0, 5.0));
        assert_eq!(gershgorin_bounds(&Small, true), (0.75, 1.25));
    }
}
