//! Level-1 vector operations on host vectors, parallel over large vectors.
use hdg_core::{Real, Result, VectorOps};
use rayon::prelude::*;

use crate::CpuBackend;

/// Below this length the work is too small to split across threads.
const MIN_PARALLEL_CHUNK: usize = 1 << 14;

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
        dst.par_iter_mut()
            .with_min_len(MIN_PARALLEL_CHUNK)
            .zip(src.par_iter())
            .for_each(|(d, &s)| *d = s);
        Ok(())
    }
    fn axpy(&self, alpha: T, x: &Vec<T>, y: &mut Vec<T>) -> Result<()> {
        y.par_iter_mut()
            .with_min_len(MIN_PARALLEL_CHUNK)
            .zip(x.par_iter())
            .for_each(|(yi, &xi)| *yi += alpha * xi);
        Ok(())
    }
    fn xpby(&self, x: &Vec<T>, beta: T, y: &mut Vec<T>) -> Result<()> {
        y.par_iter_mut()
            .with_min_len(MIN_PARALLEL_CHUNK)
            .zip(x.par_iter())
            .for_each(|(yi, &xi)| *yi = xi + beta * *yi);
        Ok(())
    }
    fn dot(&self, x: &Vec<T>, y: &Vec<T>) -> Result<T> {
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
}
