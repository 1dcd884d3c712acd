//! Device vectors and the level-1 operations on them (all as kernels on the device).
//!
//! Reductions (dot, dot_many, cg_update) run in one kernel: every block writes one partial sum
//! (a fixed number of blocks for a given length, each summing a fixed strided subset and then a
//! shared-memory tree), and the last block to finish (an integer arrival counter) sums the
//! partials in block order and writes the scalars into page-locked host memory. The host waits
//! for the stream and reads them: one launch and one synchronisation per reduction, no copy.
//! No floating-point atomics: the results are bitwise reproducible for a given length.
use std::ffi::c_void;

use cust::memory::{AsyncCopyDestination, CopyDestination, DeviceBuffer, DeviceCopy};
use hdg_core::{CoreError, MixedPrecisionOps, Result, VectorOps};

use crate::design::{MAX_BLOCK_SIZE, TETRAHEDRON_BLOCK_SIZES};
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

fn check_len(what: &str, expected: usize, got: usize) -> Result<()> {
    if expected == got {
        Ok(())
    } else {
        Err(CoreError::InvalidParameter {
            name: "vector length",
            reason: format!("{what}: expected {expected} entries, got {got}"),
        })
    }
}

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
        check_len("copy", dst.len(), src.len())?;
        self.gpu.bind()?;
        // SAFETY: device-to-device copy of equal-length live buffers, queued on the backend's
        // stream after every earlier operation on them; nothing on the host touches them.
        unsafe { dst.buffer.async_copy_from(&src.buffer, &self.gpu.stream) }
            .map_err(|e| cuda_error("device-to-device copy failed", e))
    }

    fn axpy(&self, alpha: T, x: &DeviceVector<T>, y: &mut DeviceVector<T>) -> Result<()> {
        check_len("axpy", y.len(), x.len())?;
        let (xp, yp) = (x.address(), y.address());
        // SAFETY: axpy(u64 n, T alpha, const T* x, T* y), both of n entries.
        unsafe { self.elementwise::<T>("axpy", y.len(), &[arg(&alpha), arg(&xp), arg(&yp)]) }
    }

    fn xpby(&self, x: &DeviceVector<T>, beta: T, y: &mut DeviceVector<T>) -> Result<()> {
        check_len("xpby", y.len(), x.len())?;
        let (xp, yp) = (x.address(), y.address());
        // SAFETY: xpby(u64 n, const T* x, T beta, T* y), both of n entries.
        unsafe { self.elementwise::<T>("xpby", y.len(), &[arg(&xp), arg(&beta), arg(&yp)]) }
    }

    fn dot(&self, x: &DeviceVector<T>, y: &DeviceVector<T>) -> Result<T> {
        check_len("dot", x.len(), y.len())?;
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
        check_len("pointwise_mul", y.len(), x.len())?;
        check_len("pointwise_mul", y.len(), a.len())?;
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
        check_len("axpby", y.len(), x.len())?;
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

    fn dot_many(&self, pairs: &[(&DeviceVector<T>, &DeviceVector<T>)]) -> Result<Vec<T>> {
        let Some((first, _)) = pairs.first() else { return Ok(Vec::new()) };
        let n = first.len();
        for (x, y) in pairs {
            check_len("dot_many", n, x.len())?;
            check_len("dot_many", n, y.len())?;
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
        check_len("cg_update", n, p.len())?;
        check_len("cg_update", n, ap.len())?;
        check_len("cg_update", n, r.len())?;
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

    fn factor_blocks(&self, blocks: &mut DeviceVector<T>, block_size: usize) -> Result<()> {
        let bsz = block_size * block_size;
        if block_size == 0 || !blocks.len().is_multiple_of(bsz) {
            return Err(CoreError::InvalidParameter {
                name: "block size",
                reason: format!(
                    "{} entries are not whole {block_size}x{block_size} blocks",
                    blocks.len()
                ),
            });
        }
        let n_blocks = blocks.len() / bsz;
        if n_blocks == 0 {
            return Ok(());
        }
        let info = self.gpu.zeros::<i32>(n_blocks)?;
        let (n64, b, bp, ip) =
            (n_blocks as u64, block_size as u32, blocks.address(), address(&info));
        let kernel = format!("factor_blocks_{}", T::SUFFIX);
        // SAFETY: factor_blocks(u64 n_blocks, unsigned b, T* blocks, int* info): blocks holds
        // n_blocks * b * b entries (checked above), info n_blocks ints.
        unsafe {
            self.gpu.launch(
                &kernel,
                elementwise_blocks(n_blocks),
                &[arg(&n64), arg(&b), arg(&bp), arg(&ip)],
            )?
        };
        let info = self.gpu.download(&info)?;
        if let Some(bad) = info.iter().position(|&v| v != 0) {
            let pivot = (info[bad] - 1) as usize;
            let at = bad * bsz + pivot * block_size + pivot;
            let mut value = [T::zero()];
            blocks
                .buffer
                .index(at..at + 1)
                .copy_to(&mut value[..])
                .map_err(|e| cuda_error("device-to-host copy failed", e))?;
            return Err(CoreError::Solver(format!(
                "block Jacobi: diagonal block {bad} is not positive definite (pivot {pivot} = {:e})",
                value[0].as_f64()
            )));
        }
        Ok(())
    }

    fn solve_blocks(
        &self,
        factors: &DeviceVector<T>,
        block_size: usize,
        r: &DeviceVector<T>,
        z: &mut DeviceVector<T>,
    ) -> Result<()> {
        check_len("solve_blocks", r.len(), z.len())?;
        if block_size == 0 || !r.len().is_multiple_of(block_size) {
            return Err(CoreError::InvalidParameter {
                name: "block size",
                reason: format!("{} entries are not whole blocks of {block_size}", r.len()),
            });
        }
        let n_blocks = r.len() / block_size;
        check_len("solve_blocks factors", n_blocks * block_size * block_size, factors.len())?;
        if n_blocks == 0 {
            return Ok(());
        }
        let (n64, fp, rp, zp) = (n_blocks as u64, factors.address(), r.address(), z.address());
        let grid = elementwise_blocks(n_blocks);
        let b = block_size as u32;
        // Blocks of a compiled size have an unrolled kernel (any slot count: no SpMV here).
        if (1..=MAX_BLOCK_SIZE).contains(&block_size)
            || TETRAHEDRON_BLOCK_SIZES.contains(&block_size)
        {
            let kernel = format!("solve_blocks_{}_b{block_size}", T::SUFFIX);
            // SAFETY: solve_blocks_T_bB(u64 n_blocks, const T* factors, const T* r, T* z):
            // factors of n_blocks * B * B entries, r and z of n_blocks * B (checked above).
            unsafe { self.gpu.launch(&kernel, grid, &[arg(&n64), arg(&fp), arg(&rp), arg(&zp)]) }
        } else {
            let kernel = format!("solve_blocks_{}_any", T::SUFFIX);
            // SAFETY: solve_blocks_T_any(u64 n_blocks, unsigned b, const T* factors,
            // const T* r, T* z), sizes as above.
            unsafe {
                self.gpu.launch(&kernel, grid, &[arg(&n64), arg(&b), arg(&fp), arg(&rp), arg(&zp)])
            }
        }
    }
}

impl MixedPrecisionOps for CudaBackend {
    fn demote(&self, x: &DeviceVector<f64>, y: &mut DeviceVector<f32>) -> Result<()> {
        check_len("demote", y.len(), x.len())?;
        demote_buffer(self, &x.buffer, &mut y.buffer)
    }

    fn promote_add(&self, x: &DeviceVector<f32>, y: &mut DeviceVector<f64>) -> Result<()> {
        check_len("promote_add", y.len(), x.len())?;
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
