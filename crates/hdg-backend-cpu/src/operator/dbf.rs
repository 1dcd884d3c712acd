//! The trace matrix in dense block format (DBF) and its SpMV (the assembly that fills it is
//! `stages::assemble`).
//!
//! Layout (host, row-major throughout): `blocks[((row * slots) + a) * n_f^2 + i * n_f + j]` is
//! entry (i, j) of block `a` of block row `row`; `columns[row * slots + a]` is the block column (a
//! free face) or [`NONE`](hdg_core::NONE). One row's blocks are contiguous, so a thread that owns a
//! range of rows streams its part of the matrix once, and the only indirection is one index per
//! n_f x n_f block. Padding and Dirichlet slots keep their place (fixed stride, simple addressing):
//! their block is zero and their column is the row itself, so the SpMV loop has no branch; the few
//! of them (rows next to the boundary) cost a little bandwidth.

use hdg_core::dbf::{self, stored_column, DbfEntries, DbfShape};
use hdg_core::{
    check_lengths, DemoteOperator, HostCsr, MultigridOperator, Real, Result, SmoothingCopy,
    TraceOperator,
};
use rayon::prelude::*;
use std::marker::PhantomData;

/// Rows per parallel task: enough work per task to hide scheduling, small enough to balance.
const ROWS_PER_TASK: usize = 512;

/// The assembled global trace matrix (Dirichlet unknowns eliminated) in DBF, acting on
/// vectors of T, its entries stored as E: T itself, or [`Bf16`] for the multigrid's smoothing
/// copy ([`MultigridOperator::smoothing_copy`]).
#[derive(Clone, Debug)]
pub struct DbfMatrix<T, E = T> {
    n_f: usize,
    slots: usize,
    blocks: Vec<E>,
    /// Block column of each slot; an inactive (padding or Dirichlet) slot holds its own row,
    /// which no active slot other than slot 0 can.
    columns: Vec<u32>,
    precision: PhantomData<fn() -> T>,
}

/// A matrix entry as stored, read in the working precision T by the products.
pub trait Entry<T>: Copy + Send + Sync + std::fmt::Debug {
    /// The entry in T.
    fn value(self) -> T;
}

impl<T: Real> Entry<T> for T {
    #[inline(always)]
    fn value(self) -> T {
        self
    }
}

/// bfloat16: the upper half of an f32 (its sign, exponent and 7 fraction bits), 8 significant
/// bits over f32's whole range. Widening is a shift, so a product over these entries reads
/// half an f32 product's bytes for one more operation per entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bf16(u16);

impl Bf16 {
    /// `value` rounded to the nearest bfloat16 (ties to even); finite values only (the
    /// matrix's entries).
    pub fn from_f32(value: f32) -> Bf16 {
        let bits = value.to_bits();
        let rounding = 0x7fff + ((bits >> 16) & 1);
        Bf16((bits.wrapping_add(rounding) >> 16) as u16)
    }

    /// The value as f32 (exact).
    #[inline(always)]
    pub fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }
}

impl<T: Real> Entry<T> for Bf16 {
    #[inline(always)]
    fn value(self) -> T {
        T::from_f64_lossy(self.to_f32() as f64)
    }
}

impl<T: Real> DbfMatrix<T> {
    /// The matrix of `blocks` and `columns` in the layout of the module documentation (what
    /// the assembly gathers).
    pub(crate) fn from_parts(n_f: usize, slots: usize, blocks: Vec<T>, columns: Vec<u32>) -> Self {
        DbfMatrix { n_f, slots, blocks, columns, precision: PhantomData }
    }

    /// Adds `value` times the identity to row `row`'s own (slot 0) block: a Robin face's
    /// alpha H_F ([`hdg_core::boundary`]).
    pub fn add_to_diagonal_block(&mut self, row: usize, value: T) {
        let bsz = self.n_f * self.n_f;
        let block = &mut self.blocks[row * self.slots * bsz..][..bsz];
        for m in 0..self.n_f {
            block[m * self.n_f + m] += value;
        }
    }

    /// The blocks, row-major per block row (see the module documentation for the layout).
    pub fn blocks(&self) -> &[T] {
        &self.blocks
    }
}

impl<T: Real, E: Entry<T>> DbfMatrix<T, E> {
    /// The matrix with every entry rounded to bfloat16 on its own (so symmetric where this
    /// matrix is), acting on the same vectors.
    pub fn to_bf16(&self) -> DbfMatrix<T, Bf16> {
        let round = |&v: &E| Bf16::from_f32(v.value().as_f64() as f32);
        DbfMatrix {
            n_f: self.n_f,
            slots: self.slots,
            blocks: self.blocks.par_iter().map(round).collect(),
            columns: self.columns.clone(),
            precision: PhantomData,
        }
    }

    /// Block rows.
    pub fn n_rows(&self) -> usize {
        self.columns.len() / self.slots
    }

    /// Whether slot `a` of block row `row` holds a block of the matrix (not padding).
    fn is_active(&self, row: usize, a: usize) -> bool {
        self.column(row, a).is_some()
    }

    /// Block size n_f.
    pub fn block_size(&self) -> usize {
        self.n_f
    }

    /// The block column of every slot (inactive slots point at their own row).
    pub fn columns(&self) -> &[u32] {
        &self.columns
    }

    /// Blocks per row.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Stored blocks that the SpMV reads (not padding, not Dirichlet).
    pub fn n_active_blocks(&self) -> usize {
        (0..self.n_rows()).map(|r| (0..self.slots).filter(|&a| self.is_active(r, a)).count()).sum()
    }

    /// Bytes held by the matrix (blocks and neighbour table, padding included).
    pub fn memory_bytes(&self) -> usize {
        self.blocks.len() * std::mem::size_of::<E>() + self.columns.len() * 4
    }

    /// Bytes one SpMV must move at least: the active blocks, the column table, x once and y
    /// once (inactive slots are not counted, though the branch-free kernel reads them).
    pub fn spmv_bytes(&self) -> usize {
        let (e, t) = (std::mem::size_of::<E>(), std::mem::size_of::<T>());
        let rows = self.n_rows() * self.n_f;
        self.n_active_blocks() * self.n_f * self.n_f * e + self.columns.len() * 4 + 2 * rows * t
    }

    /// y = A x.
    pub fn spmv(&self, x: &[T], y: &mut [T]) {
        self.product(x, y, Store::Set);
    }

    /// y = A x, y += alpha A x or y = b + alpha A x, by `store`: each kind compiled on its own
    /// (a branch on it inside the row loop costs the plain product its speed).
    fn product(&self, x: &[T], y: &mut [T], store: Store<'_, T>) {
        match store {
            Store::Set => self.product_with(x, None, y, |yi: &mut T, v, _| *yi = v),
            Store::Add(alpha) => {
                self.product_with(x, None, y, move |yi: &mut T, v, _| *yi += alpha * v)
            }
            Store::Update(alpha, b) => {
                self.product_with(x, Some(b), y, move |yi: &mut T, v, bi| {
                    *yi = b_plus(bi, alpha, v)
                })
            }
        }
    }

    /// The product with `store(y_i, (A x)_i, b_i)` per row (b_i zero without `b`). b reaches
    /// the kernels in row chunks beside y's: indexing it by row number inside the store made
    /// the fused update much slower than the plain product (a bounds check per value that kept
    /// the row loop from being scheduled as the product's).
    fn product_with<S: Fn(&mut T, T, T) + Sync + Copy>(
        &self,
        x: &[T],
        b: Option<&[T]>,
        y: &mut [T],
        store: S,
    ) {
        let (slots, blocks, columns) = (self.slots, &self.blocks[..], &self.columns[..]);
        let m = Matrix { slots, blocks, columns };
        match self.n_f {
            1 => spmv_fixed::<T, E, S, 1>(m, x, b, y, store),
            2 => spmv_fixed::<T, E, S, 2>(m, x, b, y, store),
            3 => spmv_fixed::<T, E, S, 3>(m, x, b, y, store),
            4 => spmv_fixed::<T, E, S, 4>(m, x, b, y, store),
            5 => spmv_fixed::<T, E, S, 5>(m, x, b, y, store),
            6 => spmv_fixed::<T, E, S, 6>(m, x, b, y, store),
            7 => spmv_fixed::<T, E, S, 7>(m, x, b, y, store),
            8 => spmv_fixed::<T, E, S, 8>(m, x, b, y, store),
            9 => spmv_fixed::<T, E, S, 9>(m, x, b, y, store),
            10 => spmv_fixed::<T, E, S, 10>(m, x, b, y, store),
            11 => spmv_fixed::<T, E, S, 11>(m, x, b, y, store),
            _ => spmv_dynamic(self.n_f, m, x, b, y, store),
        }
    }

    /// The diagonal (from the diagonal blocks).
    pub fn diagonal(&self) -> Vec<T> {
        let (nf, bsz) = (self.n_f, self.n_f * self.n_f);
        (0..self.n_rows() * nf)
            .map(|i| {
                let (row, m) = (i / nf, i % nf);
                self.blocks[row * self.slots * bsz + m * nf + m].value()
            })
            .collect()
    }
}

/// What the product does with row i's value v: y_i = v, y_i += alpha v, or y_i = b_i + alpha v
/// (the expressions of `axpy` after a product, and of `copy` + `axpy` or `xpby`: the fused
/// product rounds as the unfused sequence does).
#[derive(Clone, Copy)]
enum Store<'a, T> {
    Set,
    Add(T),
    Update(T, &'a [T]),
}

/// b + alpha v, as `xpby` and `axpy` round it.
#[inline(always)]
fn b_plus<T: Real>(b: T, alpha: T, v: T) -> T {
    b + alpha * v
}

/// The stored blocks and neighbour table a product reads.
#[derive(Clone, Copy)]
struct Matrix<'a, E> {
    slots: usize,
    blocks: &'a [E],
    columns: &'a [u32],
}

fn spmv_fixed<T: Real, E: Entry<T>, S: Fn(&mut T, T, T) + Sync + Copy, const NF: usize>(
    m: Matrix<'_, E>,
    x: &[T],
    b: Option<&[T]>,
    y: &mut [T],
    store: S,
) {
    match m.slots {
        5 => spmv_rows::<T, E, S, NF, 5>(m, x, b, y, store),
        7 => spmv_rows::<T, E, S, NF, 7>(m, x, b, y, store),
        _ => spmv_dynamic(NF, m, x, b, y, store),
    }
}

/// The SpMV with the block size and the slots per row known at compile time: the loops unroll
/// and every bounds check folds away. Each slot's product goes to its own partial sum, so the
/// slots' gathers and FMAs overlap instead of waiting on one accumulator. b's rows reach the
/// store as chunks zipped with y's: indexing b by row number inside the store, or one loop
/// for both kinds, made the product markedly slower (the row loop then compiled worse).
fn spmv_rows<
    T: Real,
    E: Entry<T>,
    S: Fn(&mut T, T, T) + Sync + Copy,
    const NF: usize,
    const SLOTS: usize,
>(
    m: Matrix<'_, E>,
    x: &[T],
    b: Option<&[T]>,
    y: &mut [T],
    store: S,
) {
    let chunk = NF * ROWS_PER_TASK;
    match b {
        Some(b) => y.par_chunks_mut(chunk).zip(b.par_chunks(chunk)).enumerate().for_each(
            |(task, (y_task, b_task))| {
                let rows = y_task.chunks_exact_mut(NF).zip(b_task.chunks_exact(NF));
                for (r, (y_row, b_row)) in rows.enumerate() {
                    let row = task * ROWS_PER_TASK + r;
                    row_product::<T, E, S, NF, SLOTS>(m, x, row, y_row, b_row, store);
                }
            },
        ),
        None => y.par_chunks_mut(chunk).enumerate().for_each(|(task, y_task)| {
            for (r, y_row) in y_task.chunks_exact_mut(NF).enumerate() {
                let row = task * ROWS_PER_TASK + r;
                row_product::<T, E, S, NF, SLOTS>(m, x, row, y_row, &[T::zero(); NF], store);
            }
        }),
    }
}

/// Row `row` of the product, stored through `store(y_i, (A x)_i, b_i)`.
#[inline(always)]
fn row_product<T: Real, E: Entry<T>, S: Fn(&mut T, T, T), const NF: usize, const SLOTS: usize>(
    m: Matrix<'_, E>,
    x: &[T],
    row: usize,
    y_row: &mut [T],
    b_row: &[T],
    store: S,
) {
    let row_blocks = &m.blocks[row * SLOTS * NF * NF..][..SLOTS * NF * NF];
    let row_columns = &m.columns[row * SLOTS..][..SLOTS];
    let mut partial = [[T::zero(); NF]; SLOTS];
    for a in 0..SLOTS {
        let block = &row_blocks[a * NF * NF..][..NF * NF];
        let xc = &x[row_columns[a] as usize * NF..][..NF];
        for i in 0..NF {
            let mut s = T::zero();
            for j in 0..NF {
                s += block[i * NF + j].value() * xc[j];
            }
            partial[a][i] = s;
        }
    }
    let (y_row, b_row) = (&mut y_row[..NF], &b_row[..NF]);
    for i in 0..NF {
        store(&mut y_row[i], (0..SLOTS).map(|a| partial[a][i]).sum(), b_row[i]);
    }
}

fn spmv_dynamic<T: Real, E: Entry<T>, S: Fn(&mut T, T, T) + Sync + Copy>(
    nf: usize,
    m: Matrix<'_, E>,
    x: &[T],
    b: Option<&[T]>,
    y: &mut [T],
    store: S,
) {
    let (slots, blocks, columns) = (m.slots, m.blocks, m.columns);
    let chunk = nf * ROWS_PER_TASK;
    y.par_chunks_mut(chunk).enumerate().for_each_init(
        || vec![T::zero(); nf],
        |sums, (task, y_task)| {
            let first_row = task * ROWS_PER_TASK;
            let b_task = b.map(|b| &b[task * chunk..][..y_task.len()]);
            for (r, y_row) in y_task.chunks_exact_mut(nf).enumerate() {
                let row = first_row + r;
                sums.fill(T::zero());
                for a in 0..slots {
                    let c = columns[row * slots + a];
                    let block = &blocks[(row * slots + a) * nf * nf..][..nf * nf];
                    let xc = &x[c as usize * nf..][..nf];
                    for (i, si) in sums.iter_mut().enumerate() {
                        *si += block[i * nf..(i + 1) * nf]
                            .iter()
                            .zip(xc)
                            .map(|(&b, &v)| b.value() * v)
                            .sum::<T>();
                    }
                }
                for (i, (yi, &si)) in y_row.iter_mut().zip(sums.iter()).enumerate() {
                    store(yi, si, b_task.map_or(T::zero(), |b| b[r * nf + i]));
                }
            }
        },
    );
}

impl<T: Real, E: Entry<T>> DbfEntries for DbfMatrix<T, E> {
    fn shape(&self) -> DbfShape {
        DbfShape { n_rows: self.n_rows(), n_f: self.n_f, slots: self.slots }
    }
    fn column(&self, row: usize, a: usize) -> Option<u32> {
        stored_column(row, a, self.columns[row * self.slots + a])
    }
    fn entry(&self, row: usize, a: usize, i: usize, j: usize) -> f64 {
        self.blocks[((row * self.slots + a) * self.n_f + i) * self.n_f + j].value().as_f64()
    }
}

impl<T: Real, E: Entry<T>> TraceOperator<T> for DbfMatrix<T, E> {
    type Vector = Vec<T>;
    fn dim(&self) -> usize {
        self.n_rows() * self.n_f
    }
    fn apply(&self, x: &Vec<T>, y: &mut Vec<T>) -> Result<()> {
        self.spmv(x, y);
        Ok(())
    }
    fn fuses_update(&self) -> bool {
        true
    }
    fn apply_update(&self, alpha: T, x: &Vec<T>, b: Option<&Vec<T>>, y: &mut Vec<T>) -> Result<()> {
        let n = self.dim();
        let b_len = b.map_or(n, |b| b.len());
        check_lengths("DBF product and update (x, y, b)", &[n, n, n], &[x.len(), y.len(), b_len])?;
        let store = match b {
            Some(b) => Store::Update(alpha, b),
            None => Store::Add(alpha),
        };
        self.product(x, y, store);
        Ok(())
    }
    fn diagonal(&self) -> Result<Vec<T>> {
        Ok(DbfMatrix::diagonal(self))
    }
    fn block_size(&self) -> usize {
        self.n_f
    }
    fn diagonal_blocks(&self) -> Result<Vec<T>> {
        let bsz = self.n_f * self.n_f;
        let stride = self.slots * bsz;
        let mut out = vec![T::zero(); self.n_rows() * bsz];
        out.par_chunks_mut(bsz)
            .zip(self.blocks.par_chunks_exact(stride))
            .with_min_len(ROWS_PER_TASK)
            .for_each(|(block, row)| {
                block.iter_mut().zip(&row[..bsz]).for_each(|(b, &v)| *b = v.value())
            });
        Ok(out)
    }
    fn gershgorin_bounds(&self, scaled: bool) -> Result<(f64, f64)> {
        Ok(dbf::gershgorin_bounds(self, scaled))
    }
    fn to_host_csr(&self) -> Result<HostCsr> {
        Ok(dbf::to_csr(self))
    }
}

impl<T: Real> MultigridOperator<T, crate::CpuBackend> for DbfMatrix<T> {
    fn project_blocks(&self, basis: &[f64], rows: usize, m: usize) -> Result<Vec<f64>> {
        let (nf, slots) = (self.n_f, self.slots);
        check_basis(nf, basis, rows, m)?;
        let mut out = vec![0.0; self.n_rows() * slots * m * m];
        out.par_chunks_mut(slots * m * m).enumerate().with_min_len(ROWS_PER_TASK).for_each_init(
            || vec![0.0; rows * m],
            |ab, (row, projected)| {
                for a in (0..slots).filter(|&a| self.is_active(row, a)) {
                    let block = &self.blocks[(row * slots + a) * nf * nf..][..nf * nf];
                    // (A B) on the leading rows, then B^T (A B).
                    for r in 0..rows {
                        for j in 0..m {
                            ab[r * m + j] = (0..rows)
                                .map(|l| block[r * nf + l].value().as_f64() * basis[l * m + j])
                                .sum();
                        }
                    }
                    let target = &mut projected[a * m * m..(a + 1) * m * m];
                    for i in 0..m {
                        for j in 0..m {
                            target[i * m + j] =
                                (0..rows).map(|r| basis[r * m + i] * ab[r * m + j]).sum();
                        }
                    }
                }
            },
        );
        Ok(out)
    }
    /// The entries in bfloat16: half the bytes of f32 (the products are bound by memory).
    fn smoothing_copy(&self) -> Result<Option<SmoothingCopy<'_, T, Vec<T>>>> {
        Ok(Some(Box::new(self.to_bf16())))
    }
}

/// Checks that `basis` holds the first `rows` (<= n_f) rows of an n_f x m matrix.
fn check_basis(n_f: usize, basis: &[f64], rows: usize, m: usize) -> Result<()> {
    if m == 0 || rows == 0 || rows > n_f || basis.len() != rows * m {
        return Err(hdg_core::CoreError::InvalidParameter {
            name: "projection basis",
            reason: format!("{} values for {rows} rows of an {n_f} x {m} basis", basis.len()),
        });
    }
    Ok(())
}

impl DemoteOperator<crate::CpuBackend> for DbfMatrix<f64> {
    type Low = DbfMatrix<f32>;
    fn demote(&self) -> Result<DbfMatrix<f32>> {
        Ok(DbfMatrix {
            n_f: self.n_f,
            slots: self.slots,
            blocks: self.blocks.par_iter().map(|&v| v as f32).collect(),
            columns: self.columns.clone(),
            precision: PhantomData,
        })
    }
}
