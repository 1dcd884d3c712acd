//! The modules of the condensation, recovery and postprocessing kernels and their launches:
//! `kernels/condense.cu` (the thread and block designs of [`crate::design`]),
//! `kernels/condense_bordered.cu` (the bordered design), `kernels/recover.cu`,
//! `kernels/postprocess.cu` and `kernels/weighted.cu` (coefficients at quadrature points); which orders and tunings are compiled is
//! `src/element_instances.rs`.
//!
//! These kernels need their own launch configurations (block size per stage and order, up to
//! 227 KB of dynamic shared memory, a persistent grid sized by occupancy), so they live in
//! modules of their own (the sm_90 SASS on compute capability 9.0, the portable PTX elsewhere),
//! loaded once per device on a thread started with the backend ([`ElementModules`]) and
//! launched here on the backend's stream.
//!
//! # Kernel names
//!
//! Every kernel of the crate is named `{operation}_{precision}[_{size}]`: what it does (with
//! its stage first where it belongs to one: `dbf_spmv`, `mf_rhs`), `f32` or `f64`, and what it
//! is instantiated for, if anything: `{cell}{k}` for an order (`tri3`, `tet8`), `nf{n}` for a
//! trace block size (with `_{cell}` where the cell type matters too: `mf_rhs_f64_nf4_tri`),
//! `b{n}` for a Jacobi block size, `s{slots}` for DBF slots, `d{dim}_sol{n}` for a
//! manufactured solution in a dimension (`manufactured_errors_f64_d3_sol0`). The element
//! stages' kernels put the design after the stage: `{stage}_{design}_{precision}_{cell}{k}`,
//! as in `condense_bordered_f64_tet6` or `recover_thread_f32_tri3`
//! ([`crate::design::kernel_name`]); the stage is also the file (`condense_bordered` its own).
use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cust::context::Context;
use cust::device::DeviceAttribute;
use cust::function::{BlockSize, Function, FunctionAttribute};
use cust::module::Module;
use hdg_core::{CoreError, Result};

use crate::device::{cuda_error, kernel_image, CudaBackend, KernelImage, Preloaded};

/// The kernel files of the element stages, each compiled by build.rs on its own (so that
/// changing one does not recompile the others' minutes of ptxas), in the order of [`file_of`].
const FILES: [KernelImage; 5] = [
    kernel_image!("condense"),
    kernel_image!("condense_bordered"),
    kernel_image!("recover"),
    kernel_image!("postprocess"),
    kernel_image!("weighted"),
];

/// For kernel experiments on a GPU machine without Rust: `STEM.sm_90.cubin` from
/// [`crate::CudaSettings::kernel_dir`], where there is one, in place of the embedded SASS of
/// `kernels/STEM.cu`. None when no directory is set or it has no such file; an error when the
/// file is there and unreadable.
fn experimental_cubin(dir: Option<&std::path::Path>, file: &str) -> Result<Option<Vec<u8>>> {
    let Some(dir) = dir else { return Ok(None) };
    let stem = file.trim_end_matches(".cu");
    let path = dir.join(format!("{stem}.sm_90.cubin"));
    if !path.exists() {
        return Ok(None);
    }
    let bytes = std::fs::read(&path)
        .map_err(|e| CoreError::Backend(format!("cannot read {}: {e}", path.display())))?;
    eprintln!("[hdg-cuda] kernels of {file} from {}", path.display());
    Ok(Some(bytes))
}

/// Which of [`FILES`] holds kernel `name`: its stage (the module documentation's names); the
/// gather of the condensation's outputs is in the condensation's file.
fn file_of(name: &str) -> usize {
    if name.starts_with("condense_weighted_") || name.starts_with("weighted_flux_") {
        4
    } else if name.starts_with("condense_bordered_") {
        1
    } else if name.starts_with("recover_") {
        2
    } else if name.starts_with("postprocess_") {
        3
    } else {
        0
    }
}

/// The modules of [`FILES`], in its order: the embedded images for compute capability
/// `(major, minor)`, or the experimental SASS of `kernel_dir` where it has a file's.
fn load_modules(kernel_dir: Option<&Path>, (major, minor): (i32, i32)) -> Result<Vec<Module>> {
    let sass = (major, minor) == (9, 0);
    FILES
        .iter()
        .map(|f| match experimental_cubin(kernel_dir, f.file)? {
            Some(bytes) if sass => Module::from_cubin(bytes, &[]).map_err(|e| {
                cuda_error(format!("cannot load the experimental SASS of {}", f.file), e)
            }),
            _ => f.load(major, minor).map(|(module, _)| module),
        })
        .collect()
}

/// The element stages' modules of a device, loaded once, from the backend's start
/// ([`Preloaded`]: some 10 ms of driver work for the SASS, longer for PTX), from the kernel
/// directory of the backend's first settings. A backend given another kernel directory
/// ([`CudaBackend::with_settings`]) loads its own.
pub(crate) struct ElementModules {
    kernel_dir: Option<PathBuf>,
    modules: Preloaded<Arc<Vec<Module>>>,
}

impl ElementModules {
    /// Starts loading the modules of `kernel_dir` into `context` (the device's primary
    /// context).
    pub(crate) fn start(
        context: &Context,
        capability: (i32, i32),
        kernel_dir: Option<PathBuf>,
    ) -> Self {
        let dir = kernel_dir.clone();
        let modules = Preloaded::start(context, move || {
            load_modules(dir.as_deref(), capability).map(Arc::new)
        });
        ElementModules { kernel_dir, modules }
    }

    /// The modules for `kernel_dir` where it is the start's directory (waiting for them), else
    /// None.
    fn get(&self, kernel_dir: Option<&Path>) -> Option<Result<Arc<Vec<Module>>>> {
        (kernel_dir == self.kernel_dir.as_deref()).then(|| self.modules.get().clone())
    }
}

/// The loaded modules and what the launches need to know about the device.
pub(crate) struct ElementKernels {
    /// One per entry of [`FILES`].
    modules: Arc<Vec<Module>>,
    /// Streaming multiprocessors.
    sms: u32,
    /// Shared memory a block may use after opting in (bytes).
    max_shared_optin: usize,
    /// "sm_90 SASS" or "compute_75 PTX".
    image: &'static str,
    /// Last: the module is unloaded while the context lives.
    backend: CudaBackend,
}

impl ElementKernels {
    /// Loads the modules into the backend's context.
    pub(crate) fn load(backend: &CudaBackend) -> Result<Self> {
        let gpu = &backend.gpu;
        gpu.bind()?;
        let attribute = |a: DeviceAttribute| {
            gpu.device.get_attribute(a).map_err(|e| cuda_error("device attribute query failed", e))
        };
        let major = attribute(DeviceAttribute::ComputeCapabilityMajor)?;
        let minor = attribute(DeviceAttribute::ComputeCapabilityMinor)?;
        let sms = attribute(DeviceAttribute::MultiprocessorCount)?.max(1) as u32;
        let mut optin: i32 = 0;
        // SAFETY: a plain attribute query of a valid device into a local integer.
        let status = unsafe {
            cust::sys::cuDeviceGetAttribute(
                &mut optin,
                cust::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                gpu.device.as_raw(),
            )
        };
        if status != cust::sys::CUresult::CUDA_SUCCESS {
            return Err(CoreError::Backend(format!(
                "query of the opt-in shared memory per block failed: {status:?}"
            )));
        }
        let max_shared_optin = optin.max(48 * 1024) as usize;
        let sass = (major, minor) == (9, 0);
        let image = if sass { "sm_90 SASS" } else { "compute_75 PTX" };
        let kernel_dir = backend.settings().kernel_dir.as_deref();
        let modules = match gpu.element_modules.get(kernel_dir) {
            Some(modules) => modules?,
            None => Arc::new(load_modules(kernel_dir, (major, minor))?),
        };
        Ok(ElementKernels { modules, sms, max_shared_optin, image, backend: backend.clone() })
    }

    /// Streaming multiprocessors of the device.
    pub(crate) fn sms(&self) -> u32 {
        self.sms
    }

    /// Which image was loaded.
    pub(crate) fn image(&self) -> &'static str {
        self.image
    }

    fn function(&self, name: &str) -> Result<Function<'_>> {
        let file = file_of(name);
        self.modules[file].get_function(name).map_err(|e| {
            cuda_error(format!("kernel {name} is missing from {}", FILES[file].file), e)
        })
    }

    /// Dynamic shared memory a block of kernel `name` may use at most (the opt-in limit less
    /// the kernel's static shared memory).
    pub(crate) fn max_dynamic_shared(&self, name: &str) -> Result<usize> {
        let fixed = self.attribute(name, FunctionAttribute::SharedMemorySizeBytes)?;
        Ok(self.max_shared_optin.saturating_sub(fixed.max(0) as usize))
    }

    /// Most threads per block kernel `name` can be launched with (its compiled launch bound,
    /// less where its registers do not allow that many).
    pub(crate) fn max_block_threads(&self, name: &str) -> Result<u32> {
        let most = self.attribute(name, FunctionAttribute::MaxThreadsPerBlock)?;
        Ok(most.max(32) as u32)
    }

    fn attribute(&self, name: &str, attribute: FunctionAttribute) -> Result<i32> {
        self.backend.gpu.bind()?;
        self.function(name)?
            .get_attribute(attribute)
            .map_err(|e| cuda_error(format!("attribute query of {name} failed"), e))
    }

    /// Blocks of `threads` threads and `shared` bytes of dynamic shared memory of kernel `name`
    /// resident per multiprocessor (at least 1).
    pub(crate) fn blocks_per_sm(&self, name: &str, threads: u32, shared: usize) -> Result<u32> {
        self.backend.gpu.bind()?;
        let f = self.function(name)?;
        self.allow_shared(&f, name, shared)?;
        let blocks = f
            .max_active_blocks_per_multiprocessor(BlockSize::x(threads), shared)
            .map_err(|e| cuda_error(format!("occupancy query of {name} failed"), e))?;
        Ok(blocks.max(1))
    }

    /// Raises the kernel's dynamic shared memory limit to `shared` bytes.
    fn allow_shared(&self, f: &Function<'_>, name: &str, shared: usize) -> Result<()> {
        if shared == 0 {
            return Ok(());
        }
        let bytes = i32::try_from(shared).map_err(|_| {
            CoreError::Backend(format!("{name}: {shared} bytes of shared memory asked"))
        })?;
        // SAFETY: a plain attribute call on a live function handle of the current context.
        let status = unsafe {
            cust::sys::cuFuncSetAttribute(
                f.to_raw(),
                cust::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes,
            )
        };
        if status != cust::sys::CUresult::CUDA_SUCCESS {
            return Err(CoreError::Backend(format!(
                "{name}: cannot allow {shared} bytes of dynamic shared memory (the device allows \
                 {} per block): {status:?}",
                self.max_shared_optin
            )));
        }
        Ok(())
    }

    /// Launches kernel `name` with `grid` blocks of `threads` threads and `shared` bytes of
    /// dynamic shared memory on the backend's stream.
    ///
    /// # Safety
    /// `args` must match the kernel's parameter list in number, order and size, every pointer
    /// argument must be the address of a live allocation of the context large enough for the
    /// accesses the kernel makes for these sizes (and this grid, for per-block scratch), and no
    /// buffer the kernel writes may be used by the host before the stream is synchronised.
    pub(crate) unsafe fn launch(
        &self,
        name: &str,
        grid: u32,
        threads: u32,
        shared: usize,
        args: &[*mut c_void],
    ) -> Result<()> {
        let gpu = &self.backend.gpu;
        gpu.bind()?;
        let f = self.function(name)?;
        self.allow_shared(&f, name, shared)?;
        let shared_u32 = u32::try_from(shared).map_err(|_| {
            CoreError::Backend(format!("{name}: {shared} bytes of shared memory asked"))
        })?;
        // SAFETY: the caller guarantees the arguments (see above); grid >= 1, and threads
        // within the kernel's launch bound by the callers' checks (max_block_threads); the
        // shared memory limit was raised above.
        unsafe { gpu.stream.launch(&f, grid.max(1), threads, shared_u32, args) }.map_err(|e| {
            cuda_error(
                format!("launch of {name} ({grid} blocks of {threads}, {shared} B shared) failed"),
                e,
            )
        })
    }
}
