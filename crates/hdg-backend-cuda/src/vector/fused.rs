//! The solvers' fusions on the device: several dot products in one reduction, and the CG
//! update with its residual norm in one pass (the reduction scheme in the parent module).
use hdg_core::{check_lengths, FusedOps, Result};

use super::DeviceVector;
use crate::device::{address, arg, reduce_blocks, CudaBackend, DeviceReal, MAX_PAIRS};

impl<T: DeviceReal> FusedOps<T> for CudaBackend {
    fn dot_many(&self, pairs: &[(&DeviceVector<T>, &DeviceVector<T>)]) -> Result<Vec<T>> {
        let Some((first, _)) = pairs.first() else { return Ok(Vec::new()) };
        let n = first.len();
        for (x, y) in pairs {
            check_lengths("dot_many", &[n], &[x.len()])?;
            check_lengths("dot_many", &[n], &[y.len()])?;
        }
        if n == 0 {
            return Ok(vec![T::zero(); pairs.len()]);
        }
        // One launch pair (one host synchronisation) per MAX_PAIRS products.
        let mut out = Vec::with_capacity(pairs.len());
        for chunk in pairs.chunks(MAX_PAIRS) {
            out.extend(self.dot_chunk(n, chunk)?);
        }
        Ok(out)
    }

    fn cg_update(
        &self,
        alpha: T,
        p: &DeviceVector<T>,
        ap: &DeviceVector<T>,
        x: &mut DeviceVector<T>,
        r: &mut DeviceVector<T>,
    ) -> Result<T> {
        let n = x.len();
        check_lengths("cg_update", &[n], &[p.len()])?;
        check_lengths("cg_update", &[n], &[ap.len()])?;
        check_lengths("cg_update", &[n], &[r.len()])?;
        if n == 0 {
            return Ok(T::zero());
        }
        let scratch = self.scratch()?;
        let blocks = reduce_blocks(n);
        let (n64, pp, app, xp, rp) =
            (n as u64, p.address(), ap.address(), x.address(), r.address());
        let partials = address(&scratch.partials);
        let (counter, out) = (address(&scratch.counter), scratch.results_device);
        let kernel = format!("cg_update_{}", T::SUFFIX);
        // SAFETY: cg_update(u64 n, T alpha, const T* p, const T* ap, T* x, T* r, T* partials,
        // unsigned* counter, T* out): four live vectors of n entries (checked above; x and r
        // are distinct &mut borrows), `blocks` <= MAX_REDUCE_BLOCKS partials, the counter and
        // the page-locked results of the scratch, held under its mutex.
        unsafe {
            self.gpu.launch(
                &kernel,
                blocks,
                &[
                    arg(&n64),
                    arg(&alpha),
                    arg(&pp),
                    arg(&app),
                    arg(&xp),
                    arg(&rp),
                    arg(&partials),
                    arg(&counter),
                    arg(&out),
                ],
            )?;
            Ok(self.finish_reduction::<T>(&scratch, 1)?[0])
        }
    }
}
