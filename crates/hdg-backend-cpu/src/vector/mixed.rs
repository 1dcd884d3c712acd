//! Conversions between f64 and f32 vectors, for mixed-precision solvers.
use hdg_core::{check_lengths, MixedPrecisionOps, Result};
use rayon::prelude::*;

use super::MIN_PARALLEL_CHUNK;
use crate::CpuBackend;

impl MixedPrecisionOps for CpuBackend {
    fn demote(&self, x: &Vec<f64>, y: &mut Vec<f32>) -> Result<()> {
        check_lengths("demote", &[y.len()], &[x.len()])?;
        y.par_iter_mut()
            .with_min_len(MIN_PARALLEL_CHUNK)
            .zip(x.par_iter())
            .for_each(|(a, &b)| *a = b as f32);
        Ok(())
    }
    fn promote_add(&self, x: &Vec<f32>, y: &mut Vec<f64>) -> Result<()> {
        check_lengths("promote_add", &[y.len()], &[x.len()])?;
        y.par_iter_mut()
            .with_min_len(MIN_PARALLEL_CHUNK)
            .zip(x.par_iter())
            .for_each(|(a, &b)| *a += b as f64);
        Ok(())
    }
}
