//! Selected entries of host vectors for the distributed pipeline's halo exchanges: the indices
//! stay a host array (the exchange buffers are host memory already).
use hdg_core::{check_lengths, CoreError, HaloOps, Real, Result};

use crate::CpuBackend;

fn check_indices(what: &str, indices: &[u32], len: usize) -> Result<()> {
    match indices.iter().find(|&&i| i as usize >= len) {
        Some(&i) => Err(CoreError::InvalidParameter {
            name: "halo indices",
            reason: format!("{what}: index {i} outside a vector of {len} entries"),
        }),
        None => Ok(()),
    }
}

impl<T: Real> HaloOps<T> for CpuBackend {
    type Indices = Vec<u32>;

    fn upload_indices(&self, indices: &[u32]) -> Result<Vec<u32>> {
        Ok(indices.to_vec())
    }
    fn gather(&self, v: &Vec<T>, indices: &Vec<u32>, out: &mut [T]) -> Result<()> {
        check_lengths("gather", &[indices.len()], &[out.len()])?;
        check_indices("gather", indices, v.len())?;
        out.iter_mut().zip(indices).for_each(|(o, &i)| *o = v[i as usize]);
        Ok(())
    }
    fn scatter(&self, values: &[T], indices: &Vec<u32>, v: &mut Vec<T>) -> Result<()> {
        check_lengths("scatter", &[indices.len()], &[values.len()])?;
        check_indices("scatter", indices, v.len())?;
        values.iter().zip(indices).for_each(|(&x, &i)| v[i as usize] = x);
        Ok(())
    }
    fn clear(&self, indices: &Vec<u32>, v: &mut Vec<T>) -> Result<()> {
        check_indices("clear", indices, v.len())?;
        indices.iter().for_each(|&i| v[i as usize] = T::zero());
        Ok(())
    }
}
