//! Vector operations on host vectors, parallel over large vectors: level 1 here, the solvers'
//! fusions (one pass, one reduction) in [`fused`], the precision conversions in [`mixed`], the
//! halo exchanges' gathers and scatters in [`halo`] and
//! batched block Jacobi in [`blocks`]; the same files as the CUDA backend's `vector/`.
mod blocks;
mod fused;
mod halo;
mod mixed;

use hdg_core::{check_lengths, Real, Result, VectorOps};
use rayon::prelude::*;

use crate::CpuBackend;

/// Below this length the work is too small to split across threads.
pub(crate) const MIN_PARALLEL_CHUNK: usize = 1 << 14;

impl<T: Real> VectorOps<T> for CpuBackend {
    type Vector = Vec<T>;

    fn zeros(&self, len: usize) -> Result<Vec<T>> {
        Ok(vec![T::zero(); len])
    }
    fn copy_from_host(&self, data: &[T]) -> Result<Vec<T>> {
        Ok(data.to_vec())
    }
    fn to_host(&self, v: &Vec<T>) -> Result<Vec<T>> {
        Ok(v.clone())
    }
    fn len(&self, v: &Vec<T>) -> usize {
        v.len()
    }
    fn copy(&self, src: &Vec<T>, dst: &mut Vec<T>) -> Result<()> {
        check_lengths("copy", &[dst.len()], &[src.len()])?;
        dst.par_iter_mut()
            .with_min_len(MIN_PARALLEL_CHUNK)
            .zip(src.par_iter())
            .for_each(|(d, &s)| *d = s);
        Ok(())
    }
    fn axpy(&self, alpha: T, x: &Vec<T>, y: &mut Vec<T>) -> Result<()> {
        check_lengths("axpy", &[y.len()], &[x.len()])?;
        y.par_iter_mut()
            .with_min_len(MIN_PARALLEL_CHUNK)
            .zip(x.par_iter())
            .for_each(|(yi, &xi)| *yi += alpha * xi);
        Ok(())
    }
    fn xpby(&self, x: &Vec<T>, beta: T, y: &mut Vec<T>) -> Result<()> {
        check_lengths("xpby", &[y.len()], &[x.len()])?;
        y.par_iter_mut()
            .with_min_len(MIN_PARALLEL_CHUNK)
            .zip(x.par_iter())
            .for_each(|(yi, &xi)| *yi = xi + beta * *yi);
        Ok(())
    }
    fn dot(&self, x: &Vec<T>, y: &Vec<T>) -> Result<T> {
        check_lengths("dot", &[x.len()], &[y.len()])?;
        // Partial sums per chunk, then a sum of the partials: deterministic for a given length
        // (chunk boundaries do not depend on the thread count).
        Ok(x.par_chunks(MIN_PARALLEL_CHUNK)
            .zip(y.par_chunks(MIN_PARALLEL_CHUNK))
            .map(|(a, b)| a.iter().zip(b).map(|(&u, &v)| u * v).sum::<T>())
            .collect::<Vec<T>>()
            .into_iter()
            .sum())
    }
    fn pointwise_mul(&self, a: &Vec<T>, x: &Vec<T>, y: &mut Vec<T>) -> Result<()> {
        check_lengths("pointwise_mul", &[y.len(), y.len()], &[a.len(), x.len()])?;
        y.par_iter_mut()
            .with_min_len(MIN_PARALLEL_CHUNK)
            .zip(a.par_iter().zip(x.par_iter()))
            .for_each(|(yi, (&ai, &xi))| *yi = ai * xi);
        Ok(())
    }
    fn reciprocal(&self, v: &mut Vec<T>) -> Result<()> {
        v.par_iter_mut().with_min_len(MIN_PARALLEL_CHUNK).for_each(|x| *x = T::one() / *x);
        Ok(())
    }
    fn axpby(&self, alpha: T, x: &Vec<T>, beta: T, y: &mut Vec<T>) -> Result<()> {
        check_lengths("axpby", &[y.len()], &[x.len()])?;
        y.par_iter_mut()
            .with_min_len(MIN_PARALLEL_CHUNK)
            .zip(x.par_iter())
            .for_each(|(yi, &xi)| *yi = alpha * xi + beta * *yi);
        Ok(())
    }
    fn scale(&self, alpha: T, x: &mut Vec<T>) -> Result<()> {
        x.par_iter_mut().with_min_len(MIN_PARALLEL_CHUNK).for_each(|v| *v *= alpha);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdg_core::{BlockOps, FusedOps, MixedPrecisionOps};

    fn v(n: usize, f: impl Fn(usize) -> f64) -> Vec<f64> {
        (0..n).map(f).collect()
    }

    /// The fused operations against their definitions, across chunk boundaries.
    #[test]
    fn fused_operations_match_their_definitions() {
        let b = CpuBackend;
        let n = 3 * MIN_PARALLEL_CHUNK + 17;
        let x = v(n, |i| (i as f64 * 0.1).sin());
        let y = v(n, |i| (i as f64 * 0.3).cos());
        let dots = b.dot_many(&[(&x, &y), (&x, &x), (&y, &y)]).unwrap();
        let exact = |a: &[f64], c: &[f64]| a.iter().zip(c).map(|(p, q)| p * q).sum::<f64>();
        for (d, e) in dots.iter().zip([exact(&x, &y), exact(&x, &x), exact(&y, &y)]) {
            assert!((d - e).abs() < 1e-9 * e.abs().max(1.0));
        }
        let (mut xs, mut r) = (x.clone(), y.clone());
        let (p, ap) = (v(n, |i| i as f64 / n as f64), v(n, |i| 1.0 - i as f64 / n as f64));
        let rr = b.cg_update(0.5, &p, &ap, &mut xs, &mut r).unwrap();
        for i in [0, n / 2, n - 1] {
            assert!((xs[i] - (x[i] + 0.5 * p[i])).abs() < 1e-15);
            assert!((r[i] - (y[i] - 0.5 * ap[i])).abs() < 1e-15);
        }
        assert!((rr - exact(&r, &r)).abs() < 1e-9 * rr);
        let mut z = y.clone();
        b.axpby(2.0, &x, -3.0, &mut z).unwrap();
        assert!((z[5] - (2.0 * x[5] - 3.0 * y[5])).abs() < 1e-15);
        let mut s = x.clone();
        b.scale(-2.0, &mut s).unwrap();
        assert_eq!(s[7], -2.0 * x[7]);
    }

    /// Vectors of the wrong lengths and blocks that do not tile a vector are errors, never a
    /// silently truncated result or a panic.
    #[test]
    fn mismatched_lengths_and_blocks_are_errors() {
        let b = CpuBackend;
        let (x, mut y) = (v(5, |i| i as f64), v(4, |_| 1.0));
        assert!(VectorOps::<f64>::axpy(&b, 1.0, &x, &mut y).is_err());
        assert!(VectorOps::<f64>::dot(&b, &x, &y).is_err());
        assert!(VectorOps::<f64>::copy(&b, &x, &mut y).is_err());
        assert!(FusedOps::<f64>::dot_many(&b, &[(&x, &x), (&x, &y)]).is_err());
        let (p, ap, mut r) = (x.clone(), x.clone(), x.clone());
        assert!(FusedOps::<f64>::cg_update(&b, 1.0, &p, &ap, &mut y, &mut r).is_err());
        let mut blocks = v(8, |_| 1.0);
        assert!(BlockOps::<f64>::factor_blocks(&b, &mut blocks, 0).is_err());
        assert!(BlockOps::<f64>::factor_blocks(&b, &mut blocks, 2).is_err());
        let mut z = v(4, |_| 0.0);
        assert!(BlockOps::<f64>::solve_blocks(&b, &blocks, 3, &y, &mut z).is_err());
        let mut short = v(3, |_| 0.0);
        assert!(BlockOps::<f64>::solve_blocks(&b, &blocks, 2, &y, &mut short).is_err());
        assert!(BlockOps::<f64>::solve_blocks(&b, &blocks[..4].to_vec(), 2, &y, &mut z).is_err());
        BlockOps::<f64>::solve_blocks(&b, &blocks, 2, &y, &mut z).expect("2 blocks of 2");
        let mut low = vec![0.0f32; 3];
        assert!(b.demote(&x, &mut low).is_err());
    }

    #[test]
    fn precision_conversions() {
        let b = CpuBackend;
        let x = vec![1.0 + 1e-12, -2.5];
        let mut y = vec![0.0f32; 2];
        b.demote(&x, &mut y).unwrap();
        assert_eq!(y, vec![1.0f32, -2.5]);
        let mut acc = vec![1.0, 1.0];
        b.promote_add(&y, &mut acc).unwrap();
        assert_eq!(acc, vec![2.0, -1.5]);
    }
}
