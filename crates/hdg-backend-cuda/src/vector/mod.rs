//! Device vectors and the level-1 operations on them (all as kernels on the device); the
//! solvers' fusions in `fused`, block Jacobi in `blocks`, precision conversions in
//! `mixed`.
//!
//! Reductions (dot, dot_many, cg_update) run in one kernel: every block writes one partial sum
//! (a fixed number of blocks for a given length, each summing a fixed strided subset and then a
//! shared-memory tree), and the last block to finish (an integer arrival counter) sums the
//! partials in block order and writes the scalars into page-locked host memory. The host waits
//! for the stream and reads them: one launch and one synchronisation per reduction, no copy.
//! No floating-point atomics: the results are bitwise reproducible for a given length.
use std::ffi::c_void;

use cust::memory::{AsyncCopyDestination, DeviceBuffer, DeviceCopy};
use hdg_core::{check_lengths, Result, VectorOps};

mod blocks;
mod fused;
mod halo;
mod mixed;

pub use halo::DeviceIndices;

pub(crate) use mixed::demote_buffer;

use crate::device::{
    address, alloc_error, arg, cuda_error, elementwise_blocks, reduce_blocks, CudaBackend,
    DeviceReal, MAX_PAIRS,
};

/// A vector in device memory.
pub struct DeviceVector<T: DeviceCopy> {
    pub(crate) buffer: DeviceBuffer<T>,
}

impl<T: DeviceCopy> DeviceVector<T> {
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.buffer.len()
    }

    /// Whether it has no entries.
    pub fn is_empty(&self) -> bool {
        self.buffer.len() == 0
    }

    /// The device buffer.
    pub fn buffer(&self) -> &DeviceBuffer<T> {
        &self.buffer
    }

    /// Device address of the first entry (kernel argument).
    pub(crate) fn address(&self) -> u64 {
        address(&self.buffer)
    }
}

/// The pointers of one dot_many launch, passed by value (`struct Pairs` in vector.cu).
#[repr(C)]
#[derive(Clone, Copy)]
struct Pairs {
    x: [u64; MAX_PAIRS],
    y: [u64; MAX_PAIRS],
}

// SAFETY: plain old data (device addresses as integers), no host pointers or references.
unsafe impl DeviceCopy for Pairs {}

impl CudaBackend {
    /// Launches an elementwise kernel `NAME_{f32,f64}` over `n` entries (nothing when n = 0).
    ///
    /// # Safety
    /// As [`crate::device::Gpu::launch`]: `rest` must be the kernel's parameters after `n`,
    /// pointing at buffers of at least `n` entries of T.
    unsafe fn elementwise<T: DeviceReal>(
        &self,
        name: &str,
        n: usize,
        rest: &[*mut c_void],
    ) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let n64 = n as u64;
        let mut args = Vec::with_capacity(rest.len() + 1);
        args.push(arg(&n64));
        args.extend_from_slice(rest);
        let kernel = format!("{name}_{}", T::SUFFIX);
        // SAFETY: forwarded from the caller.
        unsafe { self.gpu.launch(&kernel, elementwise_blocks(n), &args) }
    }

    /// The `m` results of the reduction kernel just queued (its last block wrote them to the
    /// page-locked results): waits for the stream, then reads them.
    ///
    /// # Safety
    /// A reduction kernel writing `m` results of T into `scratch` must have been queued on the
    /// stream, under the scratch mutex the caller still holds.
    unsafe fn finish_reduction<T: DeviceReal>(
        &self,
        scratch: &crate::device::Scratch,
        m: usize,
    ) -> Result<Vec<T>> {
        self.gpu.synchronize()?;
        // SAFETY: the kernel completed (synchronised) and wrote m values of T.
        Ok(unsafe { scratch.read_results::<T>(m) })
    }

    /// `[x_k . y_k]` for up to MAX_PAIRS pairs of vectors of length n >= 1, one launch pair.
    fn dot_chunk<T: DeviceReal>(
        &self,
        n: usize,
        pairs: &[(&DeviceVector<T>, &DeviceVector<T>)],
    ) -> Result<Vec<T>> {
        let scratch = self.scratch()?;
        let blocks = reduce_blocks(n);
        let mut p = Pairs { x: [0; MAX_PAIRS], y: [0; MAX_PAIRS] };
        for (k, (x, y)) in pairs.iter().enumerate() {
            p.x[k] = x.address();
            p.y[k] = y.address();
        }
        let (n64, m, partials) = (n as u64, pairs.len() as u32, address(&scratch.partials));
        let (counter, out) = (address(&scratch.counter), scratch.results_device);
        let kernel = format!("dot_{}", T::SUFFIX);
        // SAFETY: dot(u64 n, unsigned m, Pairs p, T* partials, unsigned* counter, T* out): the
        // m <= MAX_PAIRS pairs point at live vectors of n entries (lengths checked by the
        // caller); partials receives m * blocks <= MAX_PAIRS * MAX_REDUCE_BLOCKS values (the
        // scratch size), counter is the scratch's (0 between reductions), out its MAX_PAIRS
        // page-locked results. The scratch mutex is held until the results are read.
        unsafe {
            self.gpu.launch(
                &kernel,
                blocks,
                &[arg(&n64), arg(&m), arg(&p), arg(&partials), arg(&counter), arg(&out)],
            )?;
            self.finish_reduction::<T>(&scratch, pairs.len())
        }
    }
}

impl<T: DeviceReal> VectorOps<T> for CudaBackend {
    type Vector = DeviceVector<T>;

    fn zeros(&self, len: usize) -> Result<DeviceVector<T>> {
        Ok(DeviceVector { buffer: self.gpu.zeros(len)? })
    }

    fn copy_from_host(&self, data: &[T]) -> Result<DeviceVector<T>> {
        Ok(DeviceVector { buffer: self.gpu.upload(data)? })
    }

    fn to_host(&self, v: &DeviceVector<T>) -> Result<Vec<T>> {
        self.gpu.download(&v.buffer)
    }

    fn len(&self, v: &DeviceVector<T>) -> usize {
        v.len()
    }

    fn copy(&self, src: &DeviceVector<T>, dst: &mut DeviceVector<T>) -> Result<()> {
        check_lengths("copy", &[dst.len()], &[src.len()])?;
        self.gpu.bind()?;
        // SAFETY: device-to-device copy of equal-length live buffers, queued on the backend's
        // stream after every earlier operation on them; nothing on the host touches them.
        unsafe { dst.buffer.async_copy_from(&src.buffer, &self.gpu.stream) }
            .map_err(|e| cuda_error("device-to-device copy failed", e))
    }

    fn axpy(&self, alpha: T, x: &DeviceVector<T>, y: &mut DeviceVector<T>) -> Result<()> {
        check_lengths("axpy", &[y.len()], &[x.len()])?;
        let (xp, yp) = (x.address(), y.address());
        // SAFETY: axpy(u64 n, T alpha, const T* x, T* y), both of n entries.
        unsafe { self.elementwise::<T>("axpy", y.len(), &[arg(&alpha), arg(&xp), arg(&yp)]) }
    }

    fn xpby(&self, x: &DeviceVector<T>, beta: T, y: &mut DeviceVector<T>) -> Result<()> {
        check_lengths("xpby", &[y.len()], &[x.len()])?;
        let (xp, yp) = (x.address(), y.address());
        // SAFETY: xpby(u64 n, const T* x, T beta, T* y), both of n entries.
        unsafe { self.elementwise::<T>("xpby", y.len(), &[arg(&xp), arg(&beta), arg(&yp)]) }
    }

    fn dot(&self, x: &DeviceVector<T>, y: &DeviceVector<T>) -> Result<T> {
        check_lengths("dot", &[x.len()], &[y.len()])?;
        if x.is_empty() {
            return Ok(T::zero());
        }
        Ok(self.dot_chunk(x.len(), &[(x, y)])?[0])
    }

    fn pointwise_mul(
        &self,
        a: &DeviceVector<T>,
        x: &DeviceVector<T>,
        y: &mut DeviceVector<T>,
    ) -> Result<()> {
        check_lengths("pointwise_mul", &[y.len()], &[x.len()])?;
        check_lengths("pointwise_mul", &[y.len()], &[a.len()])?;
        let (ap, xp, yp) = (a.address(), x.address(), y.address());
        // SAFETY: pointwise_mul(u64 n, const T* a, const T* x, T* y), all of n entries.
        unsafe { self.elementwise::<T>("pointwise_mul", y.len(), &[arg(&ap), arg(&xp), arg(&yp)]) }
    }

    fn reciprocal(&self, v: &mut DeviceVector<T>) -> Result<()> {
        let vp = v.address();
        // SAFETY: reciprocal(u64 n, T* v), v of n entries.
        unsafe { self.elementwise::<T>("reciprocal", v.len(), &[arg(&vp)]) }
    }

    fn axpby(&self, alpha: T, x: &DeviceVector<T>, beta: T, y: &mut DeviceVector<T>) -> Result<()> {
        check_lengths("axpby", &[y.len()], &[x.len()])?;
        let (xp, yp) = (x.address(), y.address());
        // SAFETY: axpby(u64 n, T alpha, const T* x, T beta, T* y), both of n entries.
        unsafe {
            self.elementwise::<T>("axpby", y.len(), &[arg(&alpha), arg(&xp), arg(&beta), arg(&yp)])
        }
    }

    fn scale(&self, alpha: T, x: &mut DeviceVector<T>) -> Result<()> {
        let xp = x.address();
        // SAFETY: scale(u64 n, T alpha, T* x), x of n entries.
        unsafe { self.elementwise::<T>("scale", x.len(), &[arg(&alpha), arg(&xp)]) }
    }
}

/// An uninitialised device buffer of `len` entries.
///
/// # Safety
/// The caller must write every entry before anything reads it.
pub(crate) unsafe fn uninitialized<T: DeviceCopy>(
    backend: &CudaBackend,
    len: usize,
) -> Result<DeviceBuffer<T>> {
    backend.gpu.bind()?;
    // SAFETY: forwarded to the caller.
    unsafe { DeviceBuffer::uninitialized(len) }.map_err(|e| alloc_error::<T>(len, e))
}
