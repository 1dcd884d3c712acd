//! cuBLAS GEMM, loaded at run time, for the constant operators where the library measured
//! faster than the generated kernels (`codegen::gemm_wins`; GiMMiK's dispatch to the vendor
//! GEMM for large dense operators).
//!
//! Loaded at run time (`crate::runtime_library` says why); five entry points are bound, by the
//! stable C ABI of `cublas_api.h` (the `_v2` names, which the `cublas_v2.h` macros map to).
//!
//! cuBLAS runs on the runtime API, which uses the context current on the calling thread: the
//! backend's primary context, made current before every call. The handle is bound to the
//! backend's stream, so GEMMs are ordered with its kernels like any launch.
use std::ffi::{c_int, c_void};
use std::path::Path;
use std::sync::Mutex;

use hdg_core::{CoreError, Precision, Result};

use crate::runtime_library::{open, symbol};

/// `cublasHandle_t`.
type Handle = *mut c_void;
/// `cublasStatus_t`, `cublasOperation_t`, `cublasMath_t`: C enums (int).
type Status = c_int;
const SUCCESS: Status = 0;
const OP_N: c_int = 0;
/// `CUBLAS_DEFAULT_MATH`: no reduced-precision tensor-core modes (no TF32 for SGEMM); DGEMM
/// still uses the FP64 tensor cores, which round like FMA chains.
const DEFAULT_MATH: c_int = 0;

type CreateFn = unsafe extern "C" fn(*mut Handle) -> Status;
type DestroyFn = unsafe extern "C" fn(Handle) -> Status;
type SetStreamFn = unsafe extern "C" fn(Handle, *mut c_void) -> Status;
type SetMathModeFn = unsafe extern "C" fn(Handle, c_int) -> Status;
/// `cublas{S,D}gemm_v2(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)`
/// with the scalars and matrices as untyped pointers (same ABI as `const float*`/`double*`).
type GemmFn = unsafe extern "C" fn(
    Handle,
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    *const c_void,
    *const c_void,
    c_int,
    *const c_void,
    c_int,
    *const c_void,
    *mut c_void,
    c_int,
) -> Status;

/// The library names tried, in order, when no path is set (`CudaSettings::cublas_library`):
/// the CUDA 13 and 12 sonames through the loader's search path, then the toolkit's default
/// install.
const LIBRARY_NAMES: [&str; 5] = [
    "libcublas.so.13",
    "libcublas.so.12",
    "libcublas.so",
    "/usr/local/cuda/lib64/libcublas.so.13",
    "/usr/local/cuda/lib64/libcublas.so",
];

/// A cuBLAS handle bound to the backend's stream, with the library it came from.
pub(crate) struct Cublas {
    /// The handle, behind a lock: a cuBLAS handle must not be used by two threads at once.
    handle: Mutex<Handle>,
    destroy: DestroyFn,
    sgemm: GemmFn,
    dgemm: GemmFn,
    /// Where the library was found (for messages).
    origin: String,
    // Dropped last (after `Drop::drop` destroyed the handle): the functions live in it.
    _library: libloading::Library,
}

// SAFETY: the handle is an opaque cuBLAS pointer only used under its mutex, with the backend's
// context made current by the caller; the function pointers are plain code addresses into the
// library, which lives as long as `self`.
unsafe impl Send for Cublas {}
// SAFETY: as for Send: every use of the handle takes the mutex.
unsafe impl Sync for Cublas {}

impl Cublas {
    /// Loads cuBLAS (from `path`, else [`LIBRARY_NAMES`]), creates a handle and binds it to
    /// `stream` (a `CUstream` of the context current on this thread). The error says what was
    /// tried and why it failed.
    pub(crate) fn load(path: Option<&Path>, stream: *mut c_void) -> Result<Cublas> {
        let (library, origin) = open("cuBLAS", path, &LIBRARY_NAMES)?;
        // SAFETY: each function is looked up with the type of its declaration in cublas_api.h
        // (cuBLAS 12 and 13 export these names with these signatures).
        let (create, destroy, set_stream, set_math_mode, sgemm, dgemm) = unsafe {
            (
                symbol::<CreateFn>(&library, &origin, "cublasCreate_v2")?,
                symbol::<DestroyFn>(&library, &origin, "cublasDestroy_v2")?,
                symbol::<SetStreamFn>(&library, &origin, "cublasSetStream_v2")?,
                symbol::<SetMathModeFn>(&library, &origin, "cublasSetMathMode")?,
                symbol::<GemmFn>(&library, &origin, "cublasSgemm_v2")?,
                symbol::<GemmFn>(&library, &origin, "cublasDgemm_v2")?,
            )
        };
        let mut handle: Handle = std::ptr::null_mut();
        let failed = |origin: &str, what: &str, status: Status| {
            CoreError::Backend(format!("{origin}: {what} failed (cublasStatus_t {status})"))
        };
        // SAFETY: writes a new handle into a local; the caller made the backend's context
        // current, which cuBLAS's runtime adopts.
        let status = unsafe { create(&mut handle) };
        if status != SUCCESS {
            return Err(failed(&origin, "cublasCreate", status));
        }
        let cublas =
            Cublas { handle: Mutex::new(handle), destroy, sgemm, dgemm, origin, _library: library };
        // SAFETY: a live handle; `stream` is a stream of the current context.
        let status = unsafe { set_stream(handle, stream) };
        if status != SUCCESS {
            return Err(failed(&cublas.origin, "cublasSetStream", status));
        }
        // SAFETY: a live handle and a valid cublasMath_t.
        let status = unsafe { set_math_mode(handle, DEFAULT_MATH) };
        if status != SUCCESS {
            return Err(failed(&cublas.origin, "cublasSetMathMode", status));
        }
        Ok(cublas)
    }

    /// Queues `C = A B` over a panel of `n` elements in the layout of `crate::constant_operator`
    /// (the element index fastest: B is k rows of `ldb`, C m rows of `ldc`), with `a` the device
    /// address of A (m x k, row-major) in `precision`.
    ///
    /// In cuBLAS's column-major terms that panel is C^T = B^T A^T: B^T is n x k with leading
    /// dimension ldb, A^T is k x m with leading dimension k (A row-major), C^T n x m with ldc,
    /// so one GEMM with no transposition does it.
    ///
    /// # Safety
    /// The backend's context must be current; `a`, `b`, `c` must address live device
    /// allocations of that context holding m k, (k - 1) ldb + n and (m - 1) ldc + n values of
    /// `precision`, `c` overlapping neither, and the host must not touch `c` before the stream
    /// is synchronised. The sizes must fit an int (the caller's checks).
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn gemm(
        &self,
        precision: Precision,
        (m, k, n): (i32, i32, i32),
        a: u64,
        b: u64,
        ldb: i32,
        c: u64,
        ldc: i32,
    ) -> Result<()> {
        let handle = self
            .handle
            .lock()
            .map_err(|_| CoreError::Backend("the cuBLAS handle's lock is poisoned".into()))?;
        let (one_f32, zero_f32, one_f64, zero_f64) = (1.0f32, 0.0f32, 1.0f64, 0.0f64);
        let (gemm, one, zero): (GemmFn, *const c_void, *const c_void) = match precision {
            Precision::F32 => (
                self.sgemm,
                &one_f32 as *const f32 as *const c_void,
                &zero_f32 as *const f32 as *const c_void,
            ),
            Precision::F64 => (
                self.dgemm,
                &one_f64 as *const f64 as *const c_void,
                &zero_f64 as *const f64 as *const c_void,
            ),
        };
        // SAFETY: the caller's guarantees on the addresses and sizes (see above); alpha and
        // beta point at host scalars of `precision` (the handle's default host pointer mode),
        // read before the call returns.
        let status = unsafe {
            gemm(
                *handle,
                OP_N,
                OP_N,
                n,
                m,
                k,
                one,
                b as *const c_void,
                ldb,
                a as *const c_void,
                k,
                zero,
                c as *mut c_void,
                ldc,
            )
        };
        if status != SUCCESS {
            return Err(CoreError::Backend(format!(
                "{}: GEMM of a {m} x {k} operator over {n} elements failed (cublasStatus_t \
                 {status})",
                self.origin
            )));
        }
        Ok(())
    }
}

impl Drop for Cublas {
    fn drop(&mut self) {
        if let Ok(handle) = self.handle.get_mut() {
            // SAFETY: the handle is live and used by nobody else (we own it); the backend drops
            // it before its context (`Gpu`'s field order).
            let _ = unsafe { (self.destroy)(*handle) };
        }
    }
}
