//! The device: CUDA context, stream, kernel module, and the launch and memory helpers every
//! operation goes through.
//!
//! All work of one [`CudaBackend`] is queued on one stream, so operations run in the order they
//! are issued and no operation needs to wait for another; the host waits (synchronises the
//! stream) only where a value comes back to it (dot products, `to_host`, error flags).
use std::ffi::c_void;
use std::fmt::Display;
use std::sync::{Arc, Mutex, MutexGuard};

use cust::context::{Context, CurrentContext};
use cust::device::{Device, DeviceAttribute};
use cust::error::CudaError;
use cust::memory::{bytemuck::Pod, CopyDestination, DeviceBuffer, DeviceCopy};
use cust::module::Module;
use cust::stream::{Stream, StreamFlags};
use hdg_core::{CoreError, Real, Result};

/// The kernels compiled for compute capability 9.0 (H100, H200).
const PTX_SM90: &str = include_str!(concat!(env!("OUT_DIR"), "/hdg.sm_90.ptx"));
/// The kernels as portable PTX (compute_75): JIT-compiled by the driver for any other GPU.
const PTX_PORTABLE: &str = include_str!(concat!(env!("OUT_DIR"), "/hdg.compute_75.ptx"));
/// The element kernels (`kernels/elements.cu`) for compute capability 9.0.
const ELEMENTS_SM90: &str = include_str!(concat!(env!("OUT_DIR"), "/elements.sm_90.ptx"));
/// The element kernels as portable PTX.
const ELEMENTS_PORTABLE: &str = include_str!(concat!(env!("OUT_DIR"), "/elements.compute_75.ptx"));

/// Threads per block of every kernel (the reductions need exactly this many: see hdg.cu).
pub(crate) const THREADS: u32 = 256;
/// Blocks of a reduction's first pass at most (its partials fit one scratch row).
pub(crate) const MAX_REDUCE_BLOCKS: usize = 1024;
/// Vector pairs one dot-product launch handles (`MAX_PAIRS` in hdg.cu).
pub(crate) const MAX_PAIRS: usize = 32;
/// Grid of the elementwise kernels at most (they loop over the rest: grid-stride).
const MAX_ELEMENTWISE_BLOCKS: usize = 1 << 20;

/// A precision the kernels exist in: f32 or f64 (the `_f32` / `_f64` kernel suffix).
pub trait DeviceReal: Real + DeviceCopy + Pod {
    /// Suffix of the kernel names.
    const SUFFIX: &'static str;
}

impl DeviceReal for f32 {
    const SUFFIX: &'static str = "f32";
}

impl DeviceReal for f64 {
    const SUFFIX: &'static str = "f64";
}

/// The driver's description of an error and its name ("out of memory (OutOfMemory)").
///
/// cust's `Display` asks the driver (`cuGetErrorString`) and reports a formatting error when the
/// driver cannot answer (no driver, a stub library), so the text is built fallibly here.
pub fn error_text(e: CudaError) -> String {
    use std::fmt::Write;
    let mut text = String::new();
    match write!(text, "{e}") {
        Ok(()) => format!("{text} ({e:?})"),
        Err(_) => format!("{e:?}"),
    }
}

/// Converts a driver error into the backend's error, with what was being done.
pub(crate) fn cuda_error(what: impl Display, e: CudaError) -> CoreError {
    CoreError::Backend(format!("{what}: {}", error_text(e)))
}

/// A kernel argument: the address of the value, as `cuLaunchKernel` wants it.
pub(crate) fn arg<A: DeviceCopy>(value: &A) -> *mut c_void {
    value as *const A as *mut c_void
}

/// Device address of a buffer (what a kernel's `T*` parameter receives).
pub(crate) fn address<T: DeviceCopy>(buffer: &DeviceBuffer<T>) -> u64 {
    buffer.as_device_ptr().as_raw()
}

/// Scratch memory of the reductions: per-block partials and the final scalars, reused by every
/// reduction (behind a mutex: one reduction at a time uses it).
pub(crate) struct Scratch {
    /// `MAX_PAIRS * MAX_REDUCE_BLOCKS` partial sums (read as f32 or f64).
    pub partials: DeviceBuffer<f64>,
    /// `MAX_PAIRS` results.
    pub results: DeviceBuffer<f64>,
}

/// What the backend and its operators share: the context, the stream, the kernels.
pub(crate) struct Gpu {
    // Fields drop in declaration order: everything that lives in the context goes before it.
    pub(crate) scratch: Mutex<Scratch>,
    module: Module,
    /// The element kernels (condensation, assembly, recovery, postprocessing).
    elements: Module,
    pub(crate) stream: Stream,
    pub(crate) device: Device,
    pub(crate) description: String,
    context: Context,
}

impl Gpu {
    /// Makes the context current on the calling thread (CUDA contexts are per thread; the
    /// backend may be used from a thread other than the one that created it).
    pub(crate) fn bind(&self) -> Result<()> {
        CurrentContext::set_current(&self.context)
            .map_err(|e| cuda_error("cannot make the CUDA context current", e))
    }

    /// Launches kernel `name` on the backend's stream with `blocks` blocks of [`THREADS`].
    ///
    /// # Safety
    /// `args` must match the kernel's parameter list in number, order and size, every pointer
    /// argument must be the address of a live allocation of the context that is large enough
    /// for the accesses the kernel makes for the given sizes, and no buffer the kernel writes
    /// may be read or written by the host until the stream is synchronised.
    pub(crate) unsafe fn launch(
        &self,
        name: &str,
        blocks: u32,
        args: &[*mut c_void],
    ) -> Result<()> {
        self.bind()?;
        let function = self
            .module
            .get_function(name)
            .or_else(|_| self.elements.get_function(name))
            .map_err(|e| cuda_error(format!("kernel {name} is missing from the modules"), e))?;
        // SAFETY: the caller guarantees the arguments (see above); the grid and block sizes are
        // within the device limits (blocks >= 1 by the callers' checks, THREADS = 256).
        unsafe { self.stream.launch(&function, blocks, THREADS, 0, args) }
            .map_err(|e| cuda_error(format!("launch of {name} ({blocks} blocks) failed"), e))
    }

    /// Waits for all queued work; errors of earlier asynchronous launches surface here.
    pub(crate) fn synchronize(&self) -> Result<()> {
        self.bind()?;
        self.stream.synchronize().map_err(|e| cuda_error("a kernel failed (stream synchronise)", e))
    }

    /// A device buffer of `len` zeros.
    pub(crate) fn zeros<T: DeviceCopy + Pod>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        self.bind()?;
        // SAFETY: the memory is zeroed on the stream right away, before any kernel queued after
        // it (same stream) can read it, and a zero byte pattern is a valid T (T: Pod).
        let mut buffer =
            unsafe { DeviceBuffer::uninitialized(len) }.map_err(|e| alloc_error::<T>(len, e))?;
        // SAFETY: stream-ordered: nothing reads the buffer before the memset completes (the
        // host only reads after synchronising; kernels are queued after it on the same stream).
        unsafe { buffer.set_zero_async(&self.stream) }
            .map_err(|e| cuda_error("cannot clear device memory", e))?;
        Ok(buffer)
    }

    /// A device buffer holding a copy of `data`.
    pub(crate) fn upload<T: DeviceCopy>(&self, data: &[T]) -> Result<DeviceBuffer<T>> {
        self.bind()?;
        // SAFETY: every element is written by the copy below before anything reads it (the copy
        // is synchronous with respect to the host and ordered before later stream work).
        let mut buffer = unsafe { DeviceBuffer::uninitialized(data.len()) }
            .map_err(|e| alloc_error::<T>(data.len(), e))?;
        buffer.copy_from(data).map_err(|e| cuda_error("host-to-device copy failed", e))?;
        Ok(buffer)
    }

    /// A host copy of `buffer` (waits for the stream first).
    pub(crate) fn download<T: DeviceCopy + Default + Clone>(
        &self,
        buffer: &DeviceBuffer<T>,
    ) -> Result<Vec<T>> {
        self.synchronize()?;
        let mut host = vec![T::default(); buffer.len()];
        buffer.copy_to(&mut host[..]).map_err(|e| cuda_error("device-to-host copy failed", e))?;
        Ok(host)
    }
}

/// The error of a failed allocation, with the size asked for.
pub(crate) fn alloc_error<T>(len: usize, e: CudaError) -> CoreError {
    let bytes = len as u128 * std::mem::size_of::<T>() as u128;
    if e == CudaError::OutOfMemory {
        CoreError::Backend(format!(
            "out of device memory: cannot allocate {bytes} bytes ({:.3} GiB, {len} values of {})",
            bytes as f64 / (1u64 << 30) as f64,
            std::any::type_name::<T>()
        ))
    } else {
        cuda_error(format!("device allocation of {bytes} bytes failed"), e)
    }
}

/// Blocks for an elementwise kernel over `n` entries (n >= 1).
pub(crate) fn elementwise_blocks(n: usize) -> u32 {
    n.div_ceil(THREADS as usize).clamp(1, MAX_ELEMENTWISE_BLOCKS) as u32
}

/// Blocks of a reduction's first pass over `n` entries (n >= 1): a function of n only, so
/// the summation order, hence the result, is the same on every run.
pub(crate) fn reduce_blocks(n: usize) -> u32 {
    n.div_ceil(THREADS as usize).clamp(1, MAX_REDUCE_BLOCKS) as u32
}

/// The CUDA backend: level-1 operations, block Jacobi and mixed precision on device vectors
/// ([`crate::DeviceVector`]), and the DBF trace operator ([`crate::DeviceDbf`]).
///
/// Cloning is cheap (the device state is shared); every clone queues on the same stream.
#[derive(Clone)]
pub struct CudaBackend {
    pub(crate) gpu: Arc<Gpu>,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaBackend({})", self.gpu.description)
    }
}

impl CudaBackend {
    /// Initialises CUDA on device 0: its primary context, a stream, and the kernels (the
    /// sm_90 PTX on compute capability 9.x, the portable PTX otherwise).
    ///
    /// Errors: no driver or no device ([`CoreError::BackendUnavailable`], with the driver's
    /// message); a failure to create the stream or to load the PTX ([`CoreError::Backend`]).
    pub fn new() -> Result<Self> {
        let unavailable = |what: &str, e: CudaError| {
            CoreError::BackendUnavailable(format!("CUDA {what}: {}", error_text(e)))
        };
        cust::init(cust::CudaFlags::empty())
            .map_err(|e| unavailable("initialisation failed", e))?;
        let count = Device::num_devices().map_err(|e| unavailable("device query failed", e))?;
        if count == 0 {
            return Err(CoreError::BackendUnavailable("no CUDA device found".into()));
        }
        let device = Device::get_device(0).map_err(|e| unavailable("device 0", e))?;
        let context = Context::new(device).map_err(|e| unavailable("context creation", e))?;
        let attribute = |a: DeviceAttribute| {
            device.get_attribute(a).map_err(|e| cuda_error("device attribute query failed", e))
        };
        let major = attribute(DeviceAttribute::ComputeCapabilityMajor)?;
        let minor = attribute(DeviceAttribute::ComputeCapabilityMinor)?;
        let sms = attribute(DeviceAttribute::MultiprocessorCount)?;
        let name = device.name().map_err(|e| cuda_error("device name query failed", e))?;
        let memory = device.total_memory().map_err(|e| cuda_error("memory query failed", e))?;
        let (ptx, elements_ptx, ptx_name) = if major == 9 {
            (PTX_SM90, ELEMENTS_SM90, "sm_90")
        } else {
            (PTX_PORTABLE, ELEMENTS_PORTABLE, "compute_75")
        };
        let module = Module::from_ptx(ptx, &[])
            .map_err(|e| cuda_error(format!("cannot load the {ptx_name} PTX kernels"), e))?;
        let elements = Module::from_ptx(elements_ptx, &[]).map_err(|e| {
            cuda_error(format!("cannot load the {ptx_name} PTX element kernels"), e)
        })?;
        let stream = Stream::new(StreamFlags::DEFAULT, None)
            .map_err(|e| cuda_error("stream creation failed", e))?;
        let description = format!(
            "{name} (compute capability {major}.{minor}, {sms} SMs, {:.1} GiB, kernels: {ptx_name} PTX)",
            memory as f64 / (1u64 << 30) as f64
        );
        let scratch_blocks = MAX_PAIRS * MAX_REDUCE_BLOCKS;
        // SAFETY: scratch memory is always written by a kernel before it is read (partials by
        // the first reduction pass, results by the second), and any f64 bit pattern is valid.
        let partials = unsafe { DeviceBuffer::uninitialized(scratch_blocks) }
            .map_err(|e| alloc_error::<f64>(scratch_blocks, e))?;
        // SAFETY: as above.
        let results = unsafe { DeviceBuffer::uninitialized(MAX_PAIRS) }
            .map_err(|e| alloc_error::<f64>(MAX_PAIRS, e))?;
        let gpu = Gpu {
            scratch: Mutex::new(Scratch { partials, results }),
            module,
            elements,
            stream,
            device,
            description,
            context,
        };
        Ok(CudaBackend { gpu: Arc::new(gpu) })
    }

    /// One line about the device: name, compute capability, SM count, memory, PTX used.
    pub fn describe(&self) -> String {
        self.gpu.description.clone()
    }

    /// Waits until all queued device work is done (for timings).
    pub fn synchronize(&self) -> Result<()> {
        self.gpu.synchronize()
    }

    /// The stream every operation is queued on (for CUDA events in benchmarks).
    pub fn stream(&self) -> &Stream {
        &self.gpu.stream
    }

    /// Free and total device memory in bytes.
    pub fn memory_info(&self) -> Result<(usize, usize)> {
        self.gpu.bind()?;
        cust::memory::mem_get_info().map_err(|e| cuda_error("memory query failed", e))
    }

    /// The device.
    pub fn device(&self) -> Device {
        self.gpu.device
    }

    pub(crate) fn scratch(&self) -> Result<MutexGuard<'_, Scratch>> {
        self.gpu
            .scratch
            .lock()
            .map_err(|_| CoreError::Backend("reduction scratch poisoned by a panic".into()))
    }
}
