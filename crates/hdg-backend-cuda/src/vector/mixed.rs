//! Conversions between f64 and f32 device vectors, for mixed-precision solvers.
use cust::memory::DeviceBuffer;
use hdg_core::{check_lengths, CoreError, MixedPrecisionOps, Result};

use super::DeviceVector;
use crate::device::{address, arg, elementwise_blocks, CudaBackend};

impl MixedPrecisionOps for CudaBackend {
    fn demote(&self, x: &DeviceVector<f64>, y: &mut DeviceVector<f32>) -> Result<()> {
        check_lengths("demote", &[y.len()], &[x.len()])?;
        demote_buffer(self, &x.buffer, &mut y.buffer)
    }

    fn promote_add(&self, x: &DeviceVector<f32>, y: &mut DeviceVector<f64>) -> Result<()> {
        check_lengths("promote_add", &[y.len()], &[x.len()])?;
        if y.is_empty() {
            return Ok(());
        }
        let (n64, xp, yp) = (y.len() as u64, x.address(), y.address());
        // SAFETY: promote_add(u64 n, const float* x, double* y), both of n entries.
        unsafe {
            self.gpu.launch(
                "promote_add",
                elementwise_blocks(y.len()),
                &[arg(&n64), arg(&xp), arg(&yp)],
            )
        }
    }
}

/// y = x rounded to f32 (equal lengths, checked by the callers).
pub(crate) fn demote_buffer(
    backend: &CudaBackend,
    x: &DeviceBuffer<f64>,
    y: &mut DeviceBuffer<f32>,
) -> Result<()> {
    if x.len() != y.len() {
        return Err(CoreError::Backend(format!("demote: {} != {} entries", x.len(), y.len())));
    }
    if x.is_empty() {
        return Ok(());
    }
    let (n64, xp, yp) = (x.len() as u64, address(x), address(y));
    // SAFETY: demote(u64 n, const double* x, float* y), both of n entries.
    unsafe {
        backend.gpu.launch("demote", elementwise_blocks(x.len()), &[arg(&n64), arg(&xp), arg(&yp)])
    }
}
