//! The CUDA driver library as the driver loader (`driver/loader.c`, built by build.rs) found
//! it: the loader defines the driver's entry points and opens libcuda.so.1 at the first
//! `cuInit`, so a program with this backend starts on machines without the NVIDIA driver.
#[cfg(hdg_driver_loader)]
use std::ffi::{c_char, CStr};

#[cfg(hdg_driver_loader)]
extern "C" {
    /// dlerror's text when libcuda.so.1 could not be opened at `cuInit`, else null.
    fn hdg_cuda_driver_error() -> *const c_char;
}

/// Why the driver library could not be loaded, after a failed `cuInit`; `None` when it was
/// (or where binaries link the driver library directly).
pub(crate) fn driver_library_error() -> Option<String> {
    #[cfg(hdg_driver_loader)]
    {
        // SAFETY: the loader returns null or a pointer to its own static NUL-terminated buffer,
        // written once (under pthread_once, inside cuInit, which returned before this call).
        let text = unsafe { hdg_cuda_driver_error() };
        if text.is_null() {
            return None;
        }
        // SAFETY: non-null: the static buffer above, NUL-terminated by snprintf.
        Some(unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned())
    }
    #[cfg(not(hdg_driver_loader))]
    None
}
