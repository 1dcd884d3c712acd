//! The device: CUDA context, stream, kernel module, and the launch and memory helpers every
//! operation goes through.
//!
//! All work of one [`CudaBackend`] is queued on one stream, so operations run in the order they
//! are issued and no operation needs to wait for another; the host waits (synchronises the
//! stream) only where a value comes back to it (dot products, `to_host`, error flags).
use std::collections::HashMap;
use std::ffi::c_void;
use std::fmt::Display;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use cust::context::{Context, CurrentContext};
use cust::device::{Device, DeviceAttribute};
use cust::error::CudaError;
use cust::memory::{bytemuck::Pod, CopyDestination, DeviceBuffer, DeviceCopy, LockedBuffer};
use cust::module::Module;
use cust::stream::{Stream, StreamFlags};
use hdg_core::{CoreError, Real, Result};
use rayon::prelude::*;

use crate::settings::CudaSettings;
use crate::TraceOperatorKind;

/// One kernel file (`kernels/STEM.cu`) as build.rs compiles it: SASS for compute capability
/// 9.0 (H100, H200), loaded as it is, and portable PTX (compute_75) that the driver
/// JIT-compiles for any other GPU from Turing on. Loading SASS matters: JIT-compiling the
/// element kernels (one instantiation per cell type, order, precision and design) takes
/// seconds at every start.
pub(crate) struct KernelImage {
    /// `STEM.cu`.
    pub(crate) file: &'static str,
    pub(crate) sm90: &'static [u8],
    pub(crate) portable: &'static str,
}

/// The [`KernelImage`] of `kernels/STEM.cu`.
macro_rules! kernel_image {
    ($stem:literal) => {
        crate::device::KernelImage {
            file: concat!($stem, ".cu"),
            sm90: include_bytes!(concat!(env!("OUT_DIR"), "/", $stem, ".sm_90.cubin")),
            portable: include_str!(concat!(env!("OUT_DIR"), "/", $stem, ".compute_75.ptx")),
        }
    };
}
pub(crate) use kernel_image;

impl KernelImage {
    /// The module for a device of compute capability `major.minor`, and which image it is.
    pub(crate) fn load(&self, major: i32, minor: i32) -> Result<(Module, &'static str)> {
        if (major, minor) == (9, 0) {
            let module = Module::from_cubin(self.sm90, &[]).map_err(|e| {
                cuda_error(format!("cannot load the sm_90 SASS of {}", self.file), e)
            })?;
            Ok((module, "sm_90 SASS"))
        } else {
            let module = Module::from_ptx(self.portable, &[]).map_err(|e| {
                cuda_error(format!("cannot load the compute_75 PTX of {}", self.file), e)
            })?;
            Ok((module, "compute_75 PTX"))
        }
    }
}

/// The kernels launched with [`THREADS`] threads per block and no dynamic shared memory, one
/// module per file, looked up by name in this order (the element stages' kernels, with launch
/// configurations of their own, are `crate::element_kernels`).
const FIXED_KERNELS: [KernelImage; 7] = [
    kernel_image!("vector"),
    kernel_image!("dbf"),
    kernel_image!("multigrid"),
    kernel_image!("matrix_free"),
    kernel_image!("manufactured"),
    kernel_image!("geometry"),
    kernel_image!("assemble"),
];

/// Threads per block of every kernel (the reductions need exactly this many: see vector.cu).
pub(crate) const THREADS: u32 = 256;
/// Blocks of a reduction's first pass at most (its partials fit one scratch row).
pub(crate) const MAX_REDUCE_BLOCKS: usize = 1024;
/// Vector pairs one dot-product launch handles (`MAX_PAIRS` in vector.cu).
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

/// Converts a driver error into the backend's error, with what was being done: an
/// out-of-memory error (from an allocation, or a launch or copy that needed memory) becomes
/// [`CoreError::OutOfDeviceMemory`], anything else [`CoreError::Backend`].
pub(crate) fn cuda_error(what: impl Display, e: CudaError) -> CoreError {
    if e == CudaError::OutOfMemory {
        out_of_memory(what.to_string(), None)
    } else {
        CoreError::Backend(format!("{what}: {}", error_text(e)))
    }
}

/// The typed out-of-memory error, with the device's free and total memory now (the calling
/// thread's current context is the backend's: every caller bound it before the failing call).
fn out_of_memory(what: String, requested_bytes: Option<u64>) -> CoreError {
    let (free, total) = match cust::memory::mem_get_info() {
        Ok((f, t)) => (Some(f as u64), Some(t as u64)),
        Err(_) => (None, None),
    };
    CoreError::OutOfDeviceMemory { what, requested_bytes, free_bytes: free, total_bytes: total }
}

/// Refuses `what` before anything is allocated when `estimate` bytes
/// (`hdg_core::resources`) exceed the device's free memory, with the estimate, the free and
/// the total memory in the error (the calling thread's context must be the backend's).
pub(crate) fn check_device_memory(what: String, estimate: u64) -> Result<()> {
    match cust::memory::mem_get_info() {
        Ok((free, total)) if estimate > free as u64 => Err(CoreError::OutOfDeviceMemory {
            what: format!("{what} (estimated before allocating: at least {estimate} bytes)"),
            requested_bytes: Some(estimate),
            free_bytes: Some(free as u64),
            total_bytes: Some(total as u64),
        }),
        _ => Ok(()),
    }
}

/// A kernel argument: the address of the value, as `cuLaunchKernel` wants it.
pub(crate) fn arg<A: DeviceCopy>(value: &A) -> *mut c_void {
    value as *const A as *mut c_void
}

/// Device address of a buffer (what a kernel's `T*` parameter receives).
pub(crate) fn address<T: DeviceCopy>(buffer: &DeviceBuffer<T>) -> u64 {
    buffer.as_device_ptr().as_raw()
}

/// Scratch memory of the reductions: per-block partials, the arrival counter of the blocks, and
/// the results in page-locked host memory, reused by every reduction (behind a mutex: one
/// reduction at a time uses it). The last block of a reduction kernel writes the results
/// straight to the host memory (vector.cu, `finish_reduction`).
pub(crate) struct Scratch {
    /// `MAX_PAIRS * MAX_REDUCE_BLOCKS` partial sums (read as f32 or f64).
    pub partials: DeviceBuffer<f64>,
    /// Blocks of the running reduction that have finished (0 between reductions: the last
    /// block resets it).
    pub counter: DeviceBuffer<u32>,
    /// `MAX_PAIRS` results (read as f32 or f64), page-locked host memory.
    pub results: LockedBuffer<f64>,
    /// The device address of `results` (the same as the host's under unified addressing,
    /// asked of the driver all the same).
    pub results_device: u64,
}

impl Scratch {
    /// The first `m` results of the last reduction, as T.
    ///
    /// # Safety
    /// The reduction kernel that wrote them must have completed (stream synchronised), and T
    /// must be the precision it wrote (f32 or f64: Pod, alignment at most that of f64).
    pub unsafe fn read_results<T: Pod>(&self, m: usize) -> Vec<T> {
        let base = self.results.as_ptr() as *const T;
        // SAFETY: m <= MAX_PAIRS values of T lie within the MAX_PAIRS f64s of the buffer; the
        // device wrote them behind the compiler's back, hence the volatile reads.
        (0..m).map(|k| unsafe { std::ptr::read_volatile(base.add(k)) }).collect()
    }
}

// SAFETY: the page-locked buffer is only touched under the Scratch mutex (by the host after
// a stream synchronisation, by the device in stream order).
unsafe impl Send for Scratch {}

/// A kernel of one of the [`Gpu`]'s modules (valid while they are loaded, that is as long as
/// the `Gpu`).
#[derive(Clone, Copy)]
struct KernelHandle(cust::sys::CUfunction);

// SAFETY: a CUfunction is an opaque driver handle, usable from any thread once the context is
// current (every launch binds it first); the handles are only read after insertion.
unsafe impl Send for KernelHandle {}

/// What the backend and its operators share: the context, the stream, the kernels.
pub(crate) struct Gpu {
    // Fields drop in declaration order: everything that lives in the context goes before it.
    pub(crate) scratch: Mutex<Scratch>,
    /// The modules of [`FIXED_KERNELS`], in its order.
    modules: Vec<Module>,
    /// Every kernel looked up so far, by name: a lookup walks the modules one by one.
    functions: Mutex<HashMap<String, KernelHandle>>,
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
        let function = self.function(name)?;
        // SAFETY: the caller guarantees the arguments (see above); the function is a kernel of
        // one of this context's modules, which live as long as `self`; the grid and block
        // sizes are within the device limits (blocks >= 1 by the callers' checks,
        // THREADS = 256); the stream is this context's.
        let status = unsafe {
            cust::sys::cuLaunchKernel(
                function.0,
                blocks,
                1,
                1,
                THREADS,
                1,
                1,
                0,
                self.stream.as_inner(),
                args.as_ptr() as *mut *mut c_void,
                std::ptr::null_mut(),
            )
        };
        let what = || format!("launch of {name} ({blocks} blocks) failed");
        match status {
            cust::sys::CUresult::CUDA_SUCCESS => Ok(()),
            cust::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => Err(out_of_memory(what(), None)),
            other => Err(CoreError::Backend(format!("{}: {other:?}", what()))),
        }
    }

    /// The kernel `name`, from the cache or looked up in the modules (the first to have it).
    fn function(&self, name: &str) -> Result<KernelHandle> {
        let poisoned = || CoreError::Backend("the kernel cache's lock is poisoned".into());
        if let Some(&f) = self.functions.lock().map_err(|_| poisoned())?.get(name) {
            return Ok(f);
        }
        let function = self
            .modules
            .iter()
            .find_map(|m| m.get_function(name).ok().map(|f| KernelHandle(f.to_raw())))
            .ok_or_else(|| {
                CoreError::Backend(format!("kernel {name} is missing from the modules"))
            })?;
        self.functions.lock().map_err(|_| poisoned())?.insert(name.to_string(), function);
        Ok(function)
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
    pub(crate) fn download<T: DeviceCopy + Default + Clone + Send + Sync>(
        &self,
        buffer: &DeviceBuffer<T>,
    ) -> Result<Vec<T>> {
        self.synchronize()?;
        // Fresh pages are touched first by all threads: faulted in by the copy, they cost
        // more than the copy itself (one thread, a fault per 4 KiB).
        let mut host = Vec::with_capacity(buffer.len());
        host.par_extend(rayon::iter::repeat_n(T::default(), buffer.len()));
        buffer.copy_to(&mut host[..]).map_err(|e| cuda_error("device-to-host copy failed", e))?;
        Ok(host)
    }
}

/// The error of a failed allocation, with the size asked for.
pub(crate) fn alloc_error<T>(len: usize, e: CudaError) -> CoreError {
    let bytes = len as u128 * std::mem::size_of::<T>() as u128;
    if e == CudaError::OutOfMemory {
        out_of_memory(
            format!("cannot allocate {len} values of {}", std::any::type_name::<T>()),
            Some(u64::try_from(bytes).unwrap_or(u64::MAX)),
        )
    } else {
        cuda_error(format!("device allocation of {bytes} bytes failed"), e)
    }
}

/// Blocks of [`THREADS`] for a kernel with one thread per item (items >= 1, no grid-stride
/// loop): an error when they do not fit one launch.
pub(crate) fn grid(items: usize) -> Result<u32> {
    u32::try_from(items.div_ceil(THREADS as usize)).map_err(|_| CoreError::InvalidParameter {
        name: "mesh size",
        reason: format!("{items} items: too many for one launch"),
    })
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
///
/// The trace operator that [`hdg_core::Assembler::assemble`] builds is chosen per backend value
/// ([`CudaBackend::with_trace_operator`]): the assembled DBF matrix (the default) or the
/// matrix-free operator ([`crate::MatrixFreeOperator`]).
#[derive(Clone)]
pub struct CudaBackend {
    pub(crate) gpu: Arc<Gpu>,
    trace_operator: TraceOperatorKind,
    settings: Arc<CudaSettings>,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaBackend({}, trace operator {})", self.gpu.description, self.trace_operator)
    }
}

impl CudaBackend {
    /// Initialises CUDA on device 0: its primary context, a stream, and the kernels (the
    /// sm_90 SASS on compute capability 9.0, the portable PTX otherwise).
    ///
    /// Errors: no driver or no device ([`CoreError::BackendUnavailable`], with the driver's
    /// message); a failure to create the stream or to load the kernels ([`CoreError::Backend`]).
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
        let mut modules = Vec::with_capacity(FIXED_KERNELS.len());
        let mut image = "";
        for kernels in &FIXED_KERNELS {
            let (module, which) = kernels.load(major, minor)?;
            modules.push(module);
            image = which;
        }
        let stream = Stream::new(StreamFlags::DEFAULT, None)
            .map_err(|e| cuda_error("stream creation failed", e))?;
        let description = format!(
            "{name} (compute capability {major}.{minor}, {sms} SMs, {:.1} GiB, kernels: {image})",
            memory as f64 / (1u64 << 30) as f64
        );
        let scratch_blocks = MAX_PAIRS * MAX_REDUCE_BLOCKS;
        // SAFETY: the partials are always written by a reduction's blocks before its last block
        // reads them, and any f64 bit pattern is valid.
        let partials = unsafe { DeviceBuffer::uninitialized(scratch_blocks) }
            .map_err(|e| alloc_error::<f64>(scratch_blocks, e))?;
        let counter = DeviceBuffer::from_slice(&[0u32])
            .map_err(|e| cuda_error("cannot allocate the reduction counter", e))?;
        let results = LockedBuffer::new(&0.0f64, MAX_PAIRS)
            .map_err(|e| cuda_error("cannot allocate page-locked memory for reductions", e))?;
        let mut results_device: cust::sys::CUdeviceptr = 0;
        // SAFETY: asks the driver for the device address of a live page-locked allocation of
        // this context, into a local.
        let status = unsafe {
            cust::sys::cuMemHostGetDevicePointer_v2(
                &mut results_device,
                results.as_ptr() as *mut c_void,
                0,
            )
        };
        if status != cust::sys::CUresult::CUDA_SUCCESS {
            return Err(CoreError::Backend(format!(
                "page-locked reduction results are not addressable from the device: {status:?}"
            )));
        }
        let gpu = Gpu {
            scratch: Mutex::new(Scratch { partials, counter, results, results_device }),
            modules,
            functions: Mutex::new(HashMap::new()),
            stream,
            device,
            description,
            context,
        };
        Ok(CudaBackend {
            gpu: Arc::new(gpu),
            trace_operator: TraceOperatorKind::Dbf,
            settings: Arc::new(CudaSettings::auto()),
        })
    }

    /// This backend (sharing its device state) with the tuning overrides `settings` for the
    /// discretizations it prepares from now on; an error if a value is out of range.
    pub fn with_settings(mut self, settings: CudaSettings) -> Result<Self> {
        settings.check()?;
        self.settings = Arc::new(settings);
        Ok(self)
    }

    /// The tuning overrides in force.
    pub fn settings(&self) -> &CudaSettings {
        &self.settings
    }

    /// This backend (sharing its device state) with the trace operator that
    /// [`hdg_core::Assembler::assemble`] builds set to `kind`.
    pub fn with_trace_operator(mut self, kind: TraceOperatorKind) -> Self {
        self.trace_operator = kind;
        self
    }

    /// Sets the trace operator that [`hdg_core::Assembler::assemble`] builds.
    pub fn set_trace_operator(&mut self, kind: TraceOperatorKind) {
        self.trace_operator = kind;
    }

    /// The trace operator that [`hdg_core::Assembler::assemble`] builds (default: DBF).
    pub fn trace_operator(&self) -> TraceOperatorKind {
        self.trace_operator
    }

    /// One line about the device: name, compute capability, SM count, memory, kernel image used.
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

/// Peak device memory over a stretch of work (a solve), sampled by a background thread: see
/// [`CudaBackend::watch_memory`]. Stop it with [`MemoryWatch::stop`]; dropping it stops the
/// thread too (and forgets the figures).
pub struct MemoryWatch {
    shared: Arc<WatchShared>,
    thread: Option<std::thread::JoinHandle<()>>,
    gpu: Arc<Gpu>,
    baseline_used: usize,
    total: usize,
    interval: Duration,
    start: Instant,
}

/// What the sampling thread and the watch share.
struct WatchShared {
    stop: AtomicBool,
    /// Largest device-wide used memory seen (total - free), bytes.
    peak_used: AtomicUsize,
    samples: AtomicU64,
    /// The sampling thread's first error, if any.
    error: Mutex<Option<CoreError>>,
}

/// What a [`MemoryWatch`] saw.
///
/// The figures come from `cuMemGetInfo`, which reports the memory in use on the whole device:
/// its resolution limits are those of [`CudaBackend::watch_memory`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemoryPeak {
    /// Device memory in use (by every context and process) when the watch started, bytes.
    pub baseline_used_bytes: usize,
    /// The largest device memory in use seen while watching, bytes.
    pub peak_used_bytes: usize,
    /// The device's memory, bytes.
    pub total_bytes: usize,
    /// Samples taken (one at the start, one per interval, one at the stop).
    pub samples: u64,
    /// The interval asked for between samples (the real one is a little longer: sleep
    /// granularity and the query itself, a few microseconds).
    pub interval: Duration,
    /// Seconds watched.
    pub seconds: f64,
}

impl MemoryPeak {
    /// The peak above the baseline: what the watched work allocated at most, bytes.
    pub fn peak_bytes(&self) -> usize {
        self.peak_used_bytes.saturating_sub(self.baseline_used_bytes)
    }
}

/// Device memory in use now (total - free) and the total, on the calling thread's context.
fn used_and_total() -> Result<(usize, usize)> {
    let (free, total) =
        cust::memory::mem_get_info().map_err(|e| cuda_error("memory query failed", e))?;
    Ok((total.saturating_sub(free), total))
}

impl CudaBackend {
    /// Starts watching device memory: a background thread makes the backend's context current
    /// and samples `cuMemGetInfo` every `interval` (0.5 ms is a good choice: about 2000 queries
    /// a second, each a few microseconds of one host core, nothing on the GPU), recording the
    /// largest memory in use; [`MemoryWatch::stop`] ends it and reports the peak above the
    /// baseline taken here (after the stream's queued work, so frees issued before are done).
    ///
    /// Resolution limits:
    /// - an allocation that lives shorter than the interval can be missed (the pipeline's
    ///   buffers live for whole stages, milliseconds at least; kernels' own scratch inside a
    ///   launch, such as local memory, is reserved at context level and shows in the baseline);
    /// - the figure is the driver's footprint, device-wide: allocations rounded up to the
    ///   driver's granularity (2 MiB pages for large buffers), plus anything another context
    ///   or process allocates meanwhile (run alone for clean numbers);
    /// - cust frees with `cuMemFree` at drop (no caching allocator), so a freed buffer leaves
    ///   the figure at once, and the peak is that of the buffers alive together.
    pub fn watch_memory(&self, interval: Duration) -> Result<MemoryWatch> {
        self.gpu.synchronize()?;
        let (baseline_used, total) = used_and_total()?;
        let shared = Arc::new(WatchShared {
            stop: AtomicBool::new(false),
            peak_used: AtomicUsize::new(baseline_used),
            samples: AtomicU64::new(1),
            error: Mutex::new(None),
        });
        let (gpu, sampler) = (Arc::clone(&self.gpu), Arc::clone(&shared));
        let thread = std::thread::Builder::new()
            .name("hdg-memory-watch".into())
            .spawn(move || {
                let run = || -> Result<()> {
                    gpu.bind()?;
                    while !sampler.stop.load(Ordering::Acquire) {
                        let (used, _) = used_and_total()?;
                        sampler.peak_used.fetch_max(used, Ordering::AcqRel);
                        sampler.samples.fetch_add(1, Ordering::Relaxed);
                        std::thread::sleep(interval);
                    }
                    Ok(())
                };
                if let Err(e) = run() {
                    if let Ok(mut slot) = sampler.error.lock() {
                        *slot = Some(e);
                    }
                }
            })
            .map_err(|e| CoreError::Backend(format!("cannot start the memory watch: {e}")))?;
        Ok(MemoryWatch {
            shared,
            thread: Some(thread),
            gpu: Arc::clone(&self.gpu),
            baseline_used,
            total,
            interval,
            start: Instant::now(),
        })
    }
}

impl MemoryWatch {
    /// Stops the sampling thread, takes a last sample, and reports what was seen. Errors: the
    /// sampling thread's (a failed memory query), or the last sample's.
    pub fn stop(mut self) -> Result<MemoryPeak> {
        self.join();
        if let Some(e) = self.shared.error.lock().ok().and_then(|mut slot| slot.take()) {
            return Err(e);
        }
        self.gpu.bind()?;
        let (used, _) = used_and_total()?;
        let peak_used = self.shared.peak_used.load(Ordering::Acquire).max(used);
        Ok(MemoryPeak {
            baseline_used_bytes: self.baseline_used,
            peak_used_bytes: peak_used,
            total_bytes: self.total,
            samples: self.shared.samples.load(Ordering::Relaxed) + 1,
            interval: self.interval,
            seconds: self.start.elapsed().as_secs_f64(),
        })
    }

    fn join(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            // A panic in the sampler would only lose samples; the figures stay valid.
            let _ = thread.join();
        }
    }
}

impl Drop for MemoryWatch {
    fn drop(&mut self) {
        self.join();
    }
}

impl std::fmt::Debug for MemoryWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryWatch")
            .field("baseline_used", &self.baseline_used)
            .field("total", &self.total)
            .field("interval", &self.interval)
            .finish()
    }
}
