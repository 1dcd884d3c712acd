//! The solvers' fusions of level-1 operations: one pass over memory, one reduction.
use hdg_core::{check_lengths, FusedOps, Real, Result};
use rayon::prelude::*;

use super::MIN_PARALLEL_CHUNK;
use crate::CpuBackend;

impl<T: Real> FusedOps<T> for CpuBackend {
    fn dot_many(&self, pairs: &[(&Vec<T>, &Vec<T>)]) -> Result<Vec<T>> {
        let n = pairs.first().map_or(0, |(x, _)| x.len());
        for (x, y) in pairs {
            check_lengths("dot_many", &[n, n], &[x.len(), y.len()])?;
        }
        // One pass over each chunk computes every product: one reduction phase for all.
        let len = pairs.first().map_or(0, |(x, _)| x.len());
        let m = pairs.len();
        let partials: Vec<Vec<T>> = (0..len.div_ceil(MIN_PARALLEL_CHUNK))
            .into_par_iter()
            .map(|c| {
                let range = c * MIN_PARALLEL_CHUNK..((c + 1) * MIN_PARALLEL_CHUNK).min(len);
                pairs
                    .iter()
                    .map(|(x, y)| {
                        x[range.clone()].iter().zip(&y[range.clone()]).map(|(&a, &b)| a * b).sum()
                    })
                    .collect()
            })
            .collect();
        Ok((0..m).map(|i| partials.iter().map(|p| p[i]).sum()).collect())
    }
    fn cg_update(
        &self,
        alpha: T,
        p: &Vec<T>,
        ap: &Vec<T>,
        x: &mut Vec<T>,
        r: &mut Vec<T>,
    ) -> Result<T> {
        let n = x.len();
        check_lengths("cg_update", &[n, n, n], &[p.len(), ap.len(), r.len()])?;
        let partials: Vec<T> = x
            .par_chunks_mut(MIN_PARALLEL_CHUNK)
            .zip(r.par_chunks_mut(MIN_PARALLEL_CHUNK))
            .zip(p.par_chunks(MIN_PARALLEL_CHUNK).zip(ap.par_chunks(MIN_PARALLEL_CHUNK)))
            .map(|((xc, rc), (pc, apc))| {
                let mut rr = T::zero();
                for i in 0..xc.len() {
                    xc[i] += alpha * pc[i];
                    rc[i] -= alpha * apc[i];
                    rr += rc[i] * rc[i];
                }
                rr
            })
            .collect();
        Ok(partials.into_iter().sum())
    }
}
