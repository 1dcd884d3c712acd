//! A constant operator applied to a panel of elements on the CPU: `C = A B` or `C = A B + C`
//! ([`hdg_core::constant_operator`] has the layout and the operation sequence).
//!
//! Where the CUDA backend generates one kernel per operator with the entries embedded, the CPU
//! runs one loop that the operator's nonzeros drive: the elements of a panel are the SIMD lanes.
//! A block of [`VECTORS`] SIMD vectors of consecutive elements keeps its accumulators in
//! registers while the row's nonzeros stream past (each entry broadcast once per block, each
//! value of `B` loaded from L1), so the work is the operator's nonzeros times the elements, and
//! zero entries and unused rows of `B` cost nothing. Two consecutive rows with the same nonzero
//! columns (all rows of a dense operator) are computed together on half blocks, so that each
//! value of `B` loaded feeds two fused multiply-adds. The SIMD width and FMA are chosen at run
//! time by `pulp` (faer's SIMD layer): AVX-512, AVX2 + FMA, or scalar.
//!
//! **Same bits as the CUDA kernels.** Each output is the documented sequence: the first product,
//! then one fused multiply-add per further nonzero in column order. The first product is formed
//! as fma(b, a, -0.0), which is b * a rounded once, sign of zero included (x + -0 = x for every
//! x under round-to-nearest), so every lane, the scalar tail and the generated CUDA source give
//! the same bits on any input.
use hdg_core::constant_operator::{Beta, ConstOperator, OperatorError, OperatorRow};
use hdg_core::{Precision, Real};
use pulp::{Arch, Simd, WithSimd};
use rayon::prelude::*;

/// SIMD vectors per block of elements (the accumulators of one row live in registers).
pub const VECTORS: usize = 8;

/// Elements per parallel task: a multiple of every block width (8 vectors of up to 16 lanes).
pub const ELEMENTS_PER_TASK: usize = 1024;

/// Why a panel could not be applied.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PanelError {
    /// The operator was refused (an f32 overflow, for instance).
    #[error(transparent)]
    Operator(#[from] OperatorError),
    /// A leading dimension below n, or a slice shorter than its rows need.
    #[error(
        "panel of {n} elements: B has {b_len} values for {k} rows of leading dimension {ldb}, \
         C has {c_len} for {m} rows of leading dimension {ldc}"
    )]
    Shape {
        /// Elements.
        n: usize,
        /// Rows of `A`.
        m: usize,
        /// Columns of `A`.
        k: usize,
        /// Leading dimension of `B`.
        ldb: usize,
        /// Leading dimension of `C`.
        ldc: usize,
        /// Values of `B` given.
        b_len: usize,
        /// Values of `C` given.
        c_len: usize,
    },
}

/// A [`ConstOperator`] prepared for the CPU in precision `T`: its nonzeros per row, rounded.
#[derive(Clone, Debug)]
pub struct PanelOperator<T> {
    m: usize,
    k: usize,
    rows: Vec<Vec<(usize, T)>>,
    /// `paired[i]`: rows i and i + 1 have the same nonzero columns and are computed together.
    paired: Vec<bool>,
}

/// f32 and f64, with their SIMD loop.
pub trait PanelReal: Real {
    /// One task: see [`PanelOperator::apply`].
    #[doc(hidden)]
    fn apply_task(
        rows: &[Vec<(usize, Self)>],
        paired: &[bool],
        beta: Beta,
        b: &[&[Self]],
        c: &mut [&mut [Self]],
    );
}

impl<T: PanelReal> PanelOperator<T> {
    /// The operator's nonzeros in `T` (f32: rounded to nearest; an error if one overflows).
    pub fn new(op: &ConstOperator) -> Result<Self, OperatorError> {
        let rows: Vec<OperatorRow> = op.rows(Precision::of::<T>())?;
        let rows: Vec<Vec<(usize, T)>> = rows
            .into_iter()
            .map(|row| row.into_iter().map(|(j, a)| (j, T::from_f64_lossy(a))).collect())
            .collect();
        // Consecutive rows with the same columns share each value of B loaded (dense operators:
        // every row), which halves the loads per fused multiply-add.
        let same_columns = |a: &Vec<(usize, T)>, b: &Vec<(usize, T)>| {
            !a.is_empty() && a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.0 == y.0)
        };
        let mut paired = vec![false; rows.len()];
        let mut i = 0;
        while i + 1 < rows.len() {
            if same_columns(&rows[i], &rows[i + 1]) {
                paired[i] = true;
                i += 2;
            } else {
                i += 1;
            }
        }
        Ok(PanelOperator { m: op.m(), k: op.k(), rows, paired })
    }

    /// Rows of `A`.
    pub fn m(&self) -> usize {
        self.m
    }

    /// Columns of `A`.
    pub fn k(&self) -> usize {
        self.k
    }

    /// `C = A B` ([`Beta::Zero`]) or `C = A B + C` ([`Beta::One`]) over `n` elements: `b` holds
    /// k rows (row j at `j * ldb`), `c` m rows (row i at `i * ldc`); values past `n` in a row
    /// are neither read nor written. In parallel over tasks of [`ELEMENTS_PER_TASK`] elements.
    pub fn apply(
        &self,
        beta: Beta,
        n: usize,
        b: &[T],
        ldb: usize,
        c: &mut [T],
        ldc: usize,
    ) -> Result<(), PanelError> {
        let needs = |rows: usize, ld: usize| (rows - 1) * ld + n;
        if ldb < n || ldc < n || b.len() < needs(self.k, ldb) || c.len() < needs(self.m, ldc) {
            return Err(PanelError::Shape {
                n,
                m: self.m,
                k: self.k,
                ldb,
                ldc,
                b_len: b.len(),
                c_len: c.len(),
            });
        }
        if n == 0 {
            return Ok(());
        }
        let b_rows: Vec<&[T]> = (0..self.k).map(|j| &b[j * ldb..j * ldb + n]).collect();
        // Task t gets the t-th slice of every row of C.
        let n_tasks = n.div_ceil(ELEMENTS_PER_TASK);
        let mut tasks: Vec<Vec<&mut [T]>> =
            (0..n_tasks).map(|_| Vec::with_capacity(self.m)).collect();
        for row in c.chunks_mut(ldc).take(self.m) {
            for (task, piece) in tasks.iter_mut().zip(row[..n].chunks_mut(ELEMENTS_PER_TASK)) {
                task.push(piece);
            }
        }
        tasks.par_iter_mut().enumerate().for_each(|(t, c_task)| {
            let range = t * ELEMENTS_PER_TASK..(t * ELEMENTS_PER_TASK + ELEMENTS_PER_TASK).min(n);
            let b_task: Vec<&[T]> = b_rows.iter().map(|row| &row[range.clone()]).collect();
            T::apply_task(&self.rows, &self.paired, beta, &b_task, c_task);
        });
        Ok(())
    }
}

/// The loop of one task for one precision (`$lanes`, `$splat`, `$fma`, `$as_simd`,
/// `$as_mut_simd` are pulp's names for it).
macro_rules! panel_real {
    ($t:ty, $lanes:ident, $splat:ident, $fma:ident, $as_simd:ident, $as_mut_simd:ident) => {
        impl PanelReal for $t {
            fn apply_task(
                rows: &[Vec<(usize, $t)>],
                paired: &[bool],
                beta: Beta,
                b: &[&[$t]],
                c: &mut [&mut [$t]],
            ) {
                struct Task<'a, 'b> {
                    rows: &'a [Vec<(usize, $t)>],
                    paired: &'a [bool],
                    beta: Beta,
                    b: &'a [&'a [$t]],
                    c: &'a mut [&'b mut [$t]],
                }
                impl WithSimd for Task<'_, '_> {
                    type Output = ();
                    #[inline(always)]
                    fn with_simd<S: Simd>(self, simd: S) {
                        let Task { rows, paired, beta, b, c } = self;
                        let len = c.first().map_or(0, |row| row.len());
                        let block = VECTORS * S::$lanes;
                        let full = len / block * block;
                        // Blocks outermost: the block's values of B (k x block) stay in L1
                        // while every row of A passes over them.
                        for e0 in (0..full).step_by(block) {
                            let mut i = 0;
                            while i < rows.len() {
                                let row = &rows[i];
                                if paired[i] {
                                    // Two rows, half a block at a time: 2 x VECTORS / 2
                                    // accumulators, two broadcasts and one value of B live.
                                    let (lo, hi) = c.split_at_mut(i + 1);
                                    let (c0, c1) = (&mut *lo[i], &mut *hi[0]);
                                    let half = block / 2;
                                    for o in [e0, e0 + half] {
                                        let (v0, _) = S::$as_mut_simd(&mut c0[o..o + half]);
                                        let (v1, _) = S::$as_mut_simd(&mut c1[o..o + half]);
                                        let mut acc0 = [simd.$splat(-0.0); VECTORS / 2];
                                        let mut acc1 = [simd.$splat(-0.0); VECTORS / 2];
                                        if beta == Beta::One {
                                            acc0.copy_from_slice(&v0[..VECTORS / 2]);
                                            acc1.copy_from_slice(&v1[..VECTORS / 2]);
                                        }
                                        for (&(j, a0), &(_, a1)) in row.iter().zip(&rows[i + 1]) {
                                            let (a0, a1) = (simd.$splat(a0), simd.$splat(a1));
                                            let (b_vec, _) = S::$as_simd(&b[j][o..o + half]);
                                            for ((x0, x1), &bv) in acc0
                                                .iter_mut()
                                                .zip(&mut acc1)
                                                .zip(&b_vec[..VECTORS / 2])
                                            {
                                                *x0 = simd.$fma(bv, a0, *x0);
                                                *x1 = simd.$fma(bv, a1, *x1);
                                            }
                                        }
                                        v0[..VECTORS / 2].copy_from_slice(&acc0);
                                        v1[..VECTORS / 2].copy_from_slice(&acc1);
                                    }
                                    i += 2;
                                    continue;
                                }
                                i += 1;
                                if row.is_empty() {
                                    continue;
                                }
                                let (c_vec, _) = S::$as_mut_simd(&mut c[i - 1][e0..e0 + block]);
                                let mut acc = [simd.$splat(-0.0); VECTORS];
                                if beta == Beta::One {
                                    acc.copy_from_slice(&c_vec[..VECTORS]);
                                }
                                for &(j, a) in row {
                                    let a = simd.$splat(a);
                                    let (b_vec, _) = S::$as_simd(&b[j][e0..e0 + block]);
                                    for (acc, &bv) in acc.iter_mut().zip(&b_vec[..VECTORS]) {
                                        *acc = simd.$fma(bv, a, *acc);
                                    }
                                }
                                c_vec[..VECTORS].copy_from_slice(&acc);
                            }
                        }
                        for (c_row, row) in c.iter_mut().zip(rows) {
                            if row.is_empty() {
                                if beta == Beta::Zero {
                                    c_row.fill(0.0);
                                }
                                continue;
                            }
                            for e in full..len {
                                let mut s = match beta {
                                    Beta::Zero => -0.0,
                                    Beta::One => c_row[e],
                                };
                                for &(j, a) in row {
                                    s = b[j][e].mul_add(a, s);
                                }
                                c_row[e] = s;
                            }
                        }
                    }
                }
                Arch::new().dispatch(Task { rows, paired, beta, b, c });
            }
        }
    };
}

panel_real!(f64, F64_LANES, splat_f64s, mul_add_f64s, as_simd_f64s, as_mut_simd_f64s);
panel_real!(f32, F32_LANES, splat_f32s, mul_add_f32s, as_simd_f32s, as_mut_simd_f32s);
