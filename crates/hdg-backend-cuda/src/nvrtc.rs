//! NVRTC, CUDA's run-time compiler, loaded at run time (`crate::runtime_library` says why), for
//! the constant-operator kernels compiled per panel shape (`codegen::Strides::Fixed`,
//! `DeviceOperator::compile_for_panel`).
//!
//! Why run-time compilation at all, when the pipeline's kernels are built in: a kernel with the
//! panel's leading dimensions compiled in addresses B and C by immediate offsets, which the
//! built-in kernels (one per operator, for every panel) cannot; that saves a few percent per
//! application on narrow panels, against a compilation that costs far more (BENCHMARKS.md,
//! section 'Constant operators'). So it pays only for a caller that applies an operator to panels
//! of one shape many times, and only such a caller asks for it; the pipeline does not.
//!
//! Seven entry points of `nvrtc.h` are bound (a stable C ABI since CUDA 11). The program is
//! compiled straight to the device's SASS (`-arch=sm_XY`, NVRTC's CUBIN), as build.rs compiles
//! the built-in kernels with nvcc (`-O3` is NVRTC's default), so the driver has nothing to JIT.
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::Path;

use hdg_core::{CoreError, Result};

use crate::runtime_library::{open, symbol};

/// `nvrtcProgram`.
type Program = *mut c_void;
/// `nvrtcResult` (a C enum).
type Status = c_int;
const SUCCESS: Status = 0;

type CreateProgramFn = unsafe extern "C" fn(
    *mut Program,
    *const c_char,
    *const c_char,
    c_int,
    *const *const c_char,
    *const *const c_char,
) -> Status;
type CompileProgramFn = unsafe extern "C" fn(Program, c_int, *const *const c_char) -> Status;
type SizeFn = unsafe extern "C" fn(Program, *mut usize) -> Status;
type GetFn = unsafe extern "C" fn(Program, *mut c_char) -> Status;
type DestroyProgramFn = unsafe extern "C" fn(*mut Program) -> Status;
type ErrorStringFn = unsafe extern "C" fn(Status) -> *const c_char;

/// The library names tried, in order, when no path is set (`CudaSettings::nvrtc_library`): the
/// CUDA 13 and 12 sonames through the loader's search path, then the toolkit's default install.
const LIBRARY_NAMES: [&str; 5] = [
    "libnvrtc.so.13",
    "libnvrtc.so.12",
    "libnvrtc.so",
    "/usr/local/cuda/lib64/libnvrtc.so.13",
    "/usr/local/cuda/lib64/libnvrtc.so",
];

/// NVRTC's entry points, with the library they came from.
pub(crate) struct Nvrtc {
    create: CreateProgramFn,
    compile: CompileProgramFn,
    log_size: SizeFn,
    log: GetFn,
    cubin_size: SizeFn,
    cubin: GetFn,
    destroy: DestroyProgramFn,
    error_string: ErrorStringFn,
    /// Where the library was found (for messages).
    origin: String,
    // The functions live in it.
    _library: libloading::Library,
}

/// A program, destroyed when dropped.
struct ProgramGuard<'a> {
    nvrtc: &'a Nvrtc,
    program: Program,
}

impl Drop for ProgramGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: a program nvrtcCreateProgram made, destroyed once (here).
        let _ = unsafe { (self.nvrtc.destroy)(&mut self.program) };
    }
}

impl Nvrtc {
    /// Loads NVRTC from `path`, else from [`LIBRARY_NAMES`].
    pub(crate) fn load(path: Option<&Path>) -> Result<Nvrtc> {
        let (library, origin) = open("NVRTC", path, &LIBRARY_NAMES)?;
        // SAFETY: each function is looked up with the type of its declaration in nvrtc.h; the
        // pointers are kept with the library.
        unsafe {
            Ok(Nvrtc {
                create: symbol(&library, &origin, "nvrtcCreateProgram")?,
                compile: symbol(&library, &origin, "nvrtcCompileProgram")?,
                log_size: symbol(&library, &origin, "nvrtcGetProgramLogSize")?,
                log: symbol(&library, &origin, "nvrtcGetProgramLog")?,
                cubin_size: symbol(&library, &origin, "nvrtcGetCUBINSize")?,
                cubin: symbol(&library, &origin, "nvrtcGetCUBIN")?,
                destroy: symbol(&library, &origin, "nvrtcDestroyProgram")?,
                error_string: symbol(&library, &origin, "nvrtcGetErrorString")?,
                origin,
                _library: library,
            })
        }
    }

    /// Compiles the CUDA C `source` (no includes) for compute capability `major.minor` and
    /// returns the CUBIN; the error carries NVRTC's log.
    pub(crate) fn compile_cubin(
        &self,
        name: &str,
        source: &str,
        (major, minor): (i32, i32),
    ) -> Result<Vec<u8>> {
        let nul = |what: &str| CoreError::Backend(format!("{name}: NUL in the {what}"));
        let source = CString::new(source).map_err(|_| nul("source"))?;
        let file = CString::new(format!("{name}.cu")).map_err(|_| nul("name"))?;
        let options = [format!("-arch=sm_{major}{minor}"), "-std=c++17".to_string()]
            .map(|o| CString::new(o).map_err(|_| nul("options")));
        let options = options.into_iter().collect::<Result<Vec<CString>>>()?;
        let option_pointers: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();

        let mut program: Program = std::ptr::null_mut();
        // SAFETY: NUL-terminated source and name, no headers (null arrays with a count of 0).
        let status = unsafe {
            (self.create)(
                &mut program,
                source.as_ptr(),
                file.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        self.check(name, "nvrtcCreateProgram", status)?;
        let program = ProgramGuard { nvrtc: self, program };
        // SAFETY: a live program; option_pointers holds option_pointers.len() NUL-terminated
        // strings that outlive the call.
        let status = unsafe {
            (self.compile)(
                program.program,
                option_pointers.len() as c_int,
                option_pointers.as_ptr(),
            )
        };
        if status != SUCCESS {
            let log = self.text(&program, self.log_size, self.log).unwrap_or_default();
            return Err(CoreError::Backend(format!(
                "{}: {name} did not compile ({}):\n{}",
                self.origin,
                self.error(status),
                String::from_utf8_lossy(&log).trim_end_matches('\0')
            )));
        }
        self.text(&program, self.cubin_size, self.cubin).map_err(|status| {
            CoreError::Backend(format!("{}: {name}: no CUBIN ({status})", self.origin))
        })
    }

    /// The bytes of one of a compiled program's outputs (the log, the CUBIN) through its
    /// size and copy functions; the failing call's message otherwise.
    fn text(
        &self,
        program: &ProgramGuard<'_>,
        size: SizeFn,
        get: GetFn,
    ) -> std::result::Result<Vec<u8>, String> {
        let mut len = 0usize;
        // SAFETY: a live program; writes one size_t.
        let status = unsafe { size(program.program, &mut len) };
        if status != SUCCESS {
            return Err(self.error(status));
        }
        let mut bytes = vec![0u8; len];
        // SAFETY: a live program; writes exactly the `len` bytes its size function reported.
        let status = unsafe { get(program.program, bytes.as_mut_ptr() as *mut c_char) };
        if status != SUCCESS {
            return Err(self.error(status));
        }
        Ok(bytes)
    }

    fn check(&self, name: &str, call: &str, status: Status) -> Result<()> {
        if status == SUCCESS {
            return Ok(());
        }
        Err(CoreError::Backend(format!(
            "{}: {call} for {name}: {}",
            self.origin,
            self.error(status)
        )))
    }

    /// NVRTC's text for `status`.
    fn error(&self, status: Status) -> String {
        // SAFETY: nvrtcGetErrorString returns a static NUL-terminated string for any value.
        let text = unsafe { (self.error_string)(status) };
        if text.is_null() {
            return format!("nvrtcResult {status}");
        }
        // SAFETY: non-null, static and NUL-terminated (above).
        unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
    }
}
