//! Batched block Jacobi on the host: every diagonal block inverted once
//! ([`BlockOps::factor_blocks`]), then applied ([`BlockOps::solve_blocks`]), alone or fused
//! with a polynomial smoother's recurrence step ([`BlockOps::solve_blocks_step`]).
//!
//! **Layout.** Each block's inverse, row-major and exactly symmetric (the inversion mirrors
//! its lower triangle), so a row is also a column. z = B^-1 r accumulates column by column,
//! z += column_j r_j: n_f independent sums the compiler turns into SIMD lanes for block sizes
//! known at compile time (1 to [`MAX_FIXED`]), each sum still taken over j in order, which is
//! what row_i . r gives: the same bits as a row-by-row product. Larger blocks take the
//! row-by-row loop.
use hdg_core::{check_lengths, whole_blocks, BlockOps, CoreError, Real, RecurrenceStep, Result};
use rayon::prelude::*;

use crate::{dense, CpuBackend};

/// Blocks per parallel task.
const BLOCKS_PER_TASK: usize = 256;

/// The largest block size compiled on its own (n_f of a triangle at k = 10).
const MAX_FIXED: usize = 11;

impl<T: Real> BlockOps<T> for CpuBackend {
    fn factor_blocks(&self, blocks: &mut Vec<T>, block_size: usize) -> Result<()> {
        let bsz = block_size * block_size;
        whole_blocks("factor_blocks", blocks.len(), bsz)?;
        blocks.par_chunks_mut(bsz).enumerate().try_for_each(|(b, block)| {
            dense::cholesky(block_size, block).map_err(|(pivot, value)| {
                CoreError::Solver(format!(
                    "block Jacobi: diagonal block {b} is not positive definite (pivot {pivot} = {:e})",
                    value.as_f64()
                ))
            })?;
            dense::invert_from_cholesky(block_size, block);
            Ok(())
        })
    }

    fn solve_blocks(
        &self,
        factors: &Vec<T>,
        block_size: usize,
        r: &Vec<T>,
        z: &mut Vec<T>,
    ) -> Result<()> {
        let n_blocks = whole_blocks("solve_blocks", r.len(), block_size)?;
        check_lengths(
            "solve_blocks",
            &[r.len(), n_blocks * block_size * block_size],
            &[z.len(), factors.len()],
        )?;
        apply_by_size(block_size, factors, r, z, None);
        Ok(())
    }

    /// One pass: each block's w = B^-1 r stays in registers and goes straight into the
    /// recurrence (`w` is not written), with the expressions of
    /// [`RecurrenceStep::update`]'s level-1 operations: the same bits.
    fn solve_blocks_step(
        &self,
        factors: &Vec<T>,
        block_size: usize,
        r: &Vec<T>,
        _w: &mut Vec<T>,
        step: RecurrenceStep<T>,
        p: &mut Vec<T>,
        x: &mut Vec<T>,
    ) -> Result<()> {
        let n_blocks = whole_blocks("solve_blocks_step", r.len(), block_size)?;
        check_lengths(
            "solve_blocks_step",
            &[r.len(), r.len(), n_blocks * block_size * block_size],
            &[p.len(), x.len(), factors.len()],
        )?;
        apply_by_size(block_size, factors, r, p, Some((step, x)));
        Ok(())
    }
}

/// out = B^-1 r, or with a step, (p, x) = (out, x) updated by it from w = B^-1 r.
type Step<'a, T> = Option<(RecurrenceStep<T>, &'a mut [T])>;

/// [`apply_fixed`] for the block sizes compiled on their own, [`apply_rows`] for the rest.
fn apply_by_size<T: Real>(nf: usize, factors: &[T], r: &[T], out: &mut [T], step: Step<'_, T>) {
    match nf {
        1 => apply_fixed::<T, 1>(factors, r, out, step),
        2 => apply_fixed::<T, 2>(factors, r, out, step),
        3 => apply_fixed::<T, 3>(factors, r, out, step),
        4 => apply_fixed::<T, 4>(factors, r, out, step),
        5 => apply_fixed::<T, 5>(factors, r, out, step),
        6 => apply_fixed::<T, 6>(factors, r, out, step),
        7 => apply_fixed::<T, 7>(factors, r, out, step),
        8 => apply_fixed::<T, 8>(factors, r, out, step),
        9 => apply_fixed::<T, 9>(factors, r, out, step),
        10 => apply_fixed::<T, 10>(factors, r, out, step),
        MAX_FIXED => apply_fixed::<T, MAX_FIXED>(factors, r, out, step),
        _ => apply_rows(nf, factors, r, out, step),
    }
}

/// B^-1 r for one block of size NF, column by column (see the module documentation).
#[inline(always)]
fn block_inverse_times<T: Real, const NF: usize>(inverse: &[T], r: &[T]) -> [T; NF] {
    let (inverse, r) = (&inverse[..NF * NF], &r[..NF]);
    let mut w = [T::zero(); NF];
    for i in 0..NF {
        w[i] = inverse[i] * r[0];
    }
    for j in 1..NF {
        for i in 0..NF {
            w[i] += inverse[j * NF + i] * r[j];
        }
    }
    w
}

/// The block loop for a block size known at compile time; the kind of output is chosen once
/// per task (a branch inside the block loop would cost it its speed).
fn apply_fixed<T: Real, const NF: usize>(factors: &[T], r: &[T], out: &mut [T], step: Step<'_, T>) {
    let w_of =
        |block: usize| block_inverse_times::<T, NF>(&factors[block * NF * NF..], &r[block * NF..]);
    let chunk = NF * BLOCKS_PER_TASK;
    match step {
        None => out.par_chunks_mut(chunk).enumerate().for_each(|(task, out)| {
            for (b, zb) in out.chunks_exact_mut(NF).enumerate() {
                zb.copy_from_slice(&w_of(task * BLOCKS_PER_TASK + b));
            }
        }),
        Some((step, x)) => {
            out.par_chunks_mut(chunk).zip(x.par_chunks_mut(chunk)).enumerate().for_each(
                |(task, (p, x))| {
                    let blocks = p.chunks_exact_mut(NF).zip(x.chunks_exact_mut(NF)).enumerate();
                    match step {
                        RecurrenceStep::First { alpha } => {
                            for (b, (pb, xb)) in blocks {
                                let w = w_of(task * BLOCKS_PER_TASK + b);
                                for i in 0..NF {
                                    pb[i] = w[i];
                                    xb[i] = alpha * w[i];
                                }
                            }
                        }
                        RecurrenceStep::Next { alpha, beta } => {
                            for (b, (pb, xb)) in blocks {
                                let w = w_of(task * BLOCKS_PER_TASK + b);
                                for i in 0..NF {
                                    pb[i] = w[i] + beta * pb[i];
                                    xb[i] += alpha * pb[i];
                                }
                            }
                        }
                    }
                },
            )
        }
    }
}

/// The block loop for any block size: row by row.
fn apply_rows<T: Real>(nf: usize, factors: &[T], r: &[T], out: &mut [T], step: Step<'_, T>) {
    let w_of = |block: usize, i: usize| -> T {
        let row = &factors[(block * nf + i) * nf..][..nf];
        row.iter().zip(&r[block * nf..][..nf]).map(|(&a, &b)| a * b).sum()
    };
    let chunk = nf * BLOCKS_PER_TASK;
    match step {
        None => out.par_chunks_mut(chunk).enumerate().for_each(|(task, out)| {
            for (b, zb) in out.chunks_exact_mut(nf).enumerate() {
                for (i, zi) in zb.iter_mut().enumerate() {
                    *zi = w_of(task * BLOCKS_PER_TASK + b, i);
                }
            }
        }),
        Some((step, x)) => out
            .par_chunks_mut(chunk)
            .zip(x.par_chunks_mut(chunk))
            .enumerate()
            .for_each(|(task, (p, x))| {
                for (b, (pb, xb)) in p.chunks_exact_mut(nf).zip(x.chunks_exact_mut(nf)).enumerate()
                {
                    let block = task * BLOCKS_PER_TASK + b;
                    for (i, (pi, xi)) in pb.iter_mut().zip(xb.iter_mut()).enumerate() {
                        let wi = w_of(block, i);
                        match step {
                            RecurrenceStep::First { alpha } => {
                                *pi = wi;
                                *xi = alpha * wi;
                            }
                            RecurrenceStep::Next { alpha, beta } => {
                                *pi = wi + beta * *pi;
                                *xi += alpha * *pi;
                            }
                        }
                    }
                }
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_solves_invert_spd_blocks_and_reject_others() {
        let b = CpuBackend;
        // Two 2x2 blocks: [[4, 1], [1, 3]] and [[2, 0], [0, 5]].
        let blocks: Vec<f64> = vec![4.0, 1.0, 1.0, 3.0, 2.0, 0.0, 0.0, 5.0];
        let mut factors = blocks.clone();
        b.factor_blocks(&mut factors, 2).unwrap();
        let r: Vec<f64> = vec![1.0, 2.0, 3.0, 4.0];
        let mut z: Vec<f64> = vec![0.0; 4];
        b.solve_blocks(&factors, 2, &r, &mut z).unwrap();
        assert!((4.0 * z[0] + z[1] - 1.0).abs() < 1e-14 && (z[0] + 3.0 * z[1] - 2.0).abs() < 1e-14);
        assert!((z[2] - 1.5).abs() < 1e-15 && (z[3] - 0.8).abs() < 1e-15);
        let mut bad: Vec<f64> = vec![1.0, 2.0, 2.0, 1.0];
        assert!(b.factor_blocks(&mut bad, 2).is_err());
    }
}
