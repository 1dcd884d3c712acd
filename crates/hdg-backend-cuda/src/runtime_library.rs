//! Libraries of the CUDA toolkit loaded at run time (`libloading`): cuBLAS (`crate::cublas`)
//! and NVRTC (`crate::nvrtc`).
//!
//! Why loaded and not linked: the build machines have no CUDA libraries (only the driver stub
//! that `scripts/cuda-toolchain.sh` makes), a binary linked against them would refuse to start
//! wherever one is missing, and the backend must run there all the same, with its built-in
//! kernels. A library that cannot be found is an error of the feature that needs it.
use std::path::Path;

use hdg_core::{CoreError, Result};

/// Loads `what` from `path`, else from the first of `names` that loads; returns the library
/// and where it came from (for messages). The error says what was tried and why it failed.
pub(crate) fn open(
    what: &str,
    path: Option<&Path>,
    names: &[&str],
) -> Result<(libloading::Library, String)> {
    let candidates: Vec<String> = match path {
        Some(p) => vec![p.display().to_string()],
        None => names.iter().map(|s| s.to_string()).collect(),
    };
    let mut failures = Vec::new();
    for name in candidates {
        // SAFETY: loading runs the library's initialisers; those of the CUDA toolkit's
        // libraries only set up their own state (they are what CUDA programs load at start-up).
        match unsafe { libloading::Library::new(&name) } {
            Ok(library) => return Ok((library, name)),
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    Err(CoreError::BackendUnavailable(format!("{what} not found ({})", failures.join("; "))))
}

/// The function `name` of `library` (loaded from `origin`), as a `T`.
///
/// # Safety
/// `T` must be the function's type as the library declares it, and the pointer must only be
/// called while the library is loaded.
pub(crate) unsafe fn symbol<T: Copy>(
    library: &libloading::Library,
    origin: &str,
    name: &str,
) -> Result<T> {
    let terminated = format!("{name}\0");
    // SAFETY: the caller's guarantees on T and on the library's lifetime.
    unsafe { library.get::<T>(terminated.as_bytes()) }
        .map(|f| *f)
        .map_err(|e| CoreError::Backend(format!("{origin}: {name}: {e}")))
}
