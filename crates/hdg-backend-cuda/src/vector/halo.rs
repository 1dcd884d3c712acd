//! Selected entries of device vectors for the distributed pipeline's halo exchanges: a rank's
//! outgoing values are packed on the device by one kernel into a staging buffer and copied to
//! the host in one transfer; incoming values go the other way. The indices stay on the device,
//! with a staging buffer of as many f64 values (the f32 levels use its first half).
use std::ffi::c_void;
use std::sync::Mutex;

use cust::memory::DeviceBuffer;
use hdg_core::{check_lengths, CoreError, HaloOps, Result};

use super::DeviceVector;
use crate::device::{address, arg, driver_status, CudaBackend, DeviceReal};

/// Vector entries on the device, with the staging buffer their exchanges pass through.
pub struct DeviceIndices {
    indices: DeviceBuffer<u32>,
    /// One value per index, room for f64 (read as f32 by the f32 kernels).
    staging: Mutex<DeviceBuffer<f64>>,
    /// The largest index plus one (0 when empty): the shortest vector they may select from.
    bound: usize,
}

impl DeviceIndices {
    fn len(&self) -> usize {
        self.indices.len()
    }

    fn check(&self, what: &str, len: usize) -> Result<()> {
        if self.bound > len {
            return Err(CoreError::InvalidParameter {
                name: "halo indices",
                reason: format!(
                    "{what}: index {} outside a vector of {len} entries",
                    self.bound - 1
                ),
            });
        }
        Ok(())
    }
}

impl CudaBackend {
    /// Launches `NAME_{f32,f64}(n, indices, rest...)` over the indices.
    ///
    /// # Safety
    /// `rest` must be the kernel's parameters after the indices, pointing at buffers the
    /// indices (checked against their bound by the callers) and the staging buffer fit.
    unsafe fn halo_kernel<T: DeviceReal>(
        &self,
        name: &str,
        indices: &DeviceIndices,
        rest: &[*mut c_void],
    ) -> Result<()> {
        let ip = address(&indices.indices);
        let mut args = vec![arg(&ip)];
        args.extend_from_slice(rest);
        // SAFETY: forwarded from the caller.
        unsafe { self.elementwise::<T>(name, indices.len(), &args) }
    }
}

impl<T: DeviceReal> HaloOps<T> for CudaBackend {
    type Indices = DeviceIndices;

    fn upload_indices(&self, indices: &[u32]) -> Result<DeviceIndices> {
        let bound = indices.iter().map(|&i| i as usize + 1).max().unwrap_or(0);
        Ok(DeviceIndices {
            indices: self.gpu.upload(indices)?,
            staging: Mutex::new(self.gpu.zeros(indices.len())?),
            bound,
        })
    }

    fn gather(&self, v: &DeviceVector<T>, indices: &DeviceIndices, out: &mut [T]) -> Result<()> {
        check_lengths("gather", &[indices.len()], &[out.len()])?;
        indices.check("gather", v.len())?;
        if out.is_empty() {
            return Ok(());
        }
        let staging = indices.staging.lock().map_err(|_| {
            CoreError::Backend("halo staging buffer poisoned by an earlier panic".into())
        })?;
        let (vp, sp) = (v.address(), address(&*staging));
        // SAFETY: gather(u64 n, const unsigned* idx, const T* v, T* out): every index is below
        // v's length (checked), and the staging buffer holds n f64, room for n values of T.
        unsafe { self.halo_kernel::<T>("gather", indices, &[arg(&vp), arg(&sp)])? };
        // SAFETY: queued after the kernel on the backend's stream: copies n values of T from
        // the staging buffer into `out`, a live host slice of n values of T (pageable memory:
        // the call returns once the copy is done). The staging buffer stays locked meanwhile.
        let status = unsafe {
            cust::sys::cuMemcpyDtoHAsync_v2(
                out.as_mut_ptr() as *mut c_void,
                sp,
                std::mem::size_of_val(out),
                self.gpu.stream.as_inner(),
            )
        };
        driver_status("halo device-to-host copy", status)?;
        self.gpu.synchronize()
    }

    fn scatter(
        &self,
        values: &[T],
        indices: &DeviceIndices,
        v: &mut DeviceVector<T>,
    ) -> Result<()> {
        check_lengths("scatter", &[indices.len()], &[values.len()])?;
        indices.check("scatter", v.len())?;
        if values.is_empty() {
            return Ok(());
        }
        let staging = indices.staging.lock().map_err(|_| {
            CoreError::Backend("halo staging buffer poisoned by an earlier panic".into())
        })?;
        let (vp, sp) = (v.address(), address(&*staging));
        // SAFETY: queued on the backend's stream, after every earlier kernel that reads the
        // staging buffer: copies n values of T from a live host slice (pageable: staged by the
        // driver before the call returns) into the staging buffer, room for n values of T.
        let status = unsafe {
            cust::sys::cuMemcpyHtoDAsync_v2(
                sp,
                values.as_ptr() as *const c_void,
                std::mem::size_of_val(values),
                self.gpu.stream.as_inner(),
            )
        };
        driver_status("halo host-to-device copy", status)?;
        // SAFETY: scatter(u64 n, const unsigned* idx, const T* values, T* v): the indices are
        // below v's length (checked) and distinct; the staging buffer holds the n values.
        unsafe { self.halo_kernel::<T>("scatter", indices, &[arg(&sp), arg(&vp)]) }
    }

    fn clear(&self, indices: &DeviceIndices, v: &mut DeviceVector<T>) -> Result<()> {
        indices.check("clear", v.len())?;
        let vp = v.address();
        // SAFETY: clear(u64 n, const unsigned* idx, T* v): every index below v's length.
        unsafe { self.halo_kernel::<T>("clear", indices, &[arg(&vp)]) }
    }
}
