//! The CUDA backend of the HDG pipeline.
//!
//! Built without the `cuda` feature this crate is a shell: it needs no CUDA and answers every
//! request for a device with a clear "unavailable" error ([`availability`]).
//!
//! With `--features cuda` (build: nvcc, see `scripts/cuda-toolchain.sh`; run: an NVIDIA driver)
//! it provides the trace-solve stage on the GPU:
//!
//! - [`CudaBackend`]: context, stream and kernels (PTX compiled by `build.rs` from
//!   `kernels/hdg.cu` and embedded), with [`hdg_core::VectorOps`] for f32 and f64 on
//!   [`DeviceVector`]s (fused operations, deterministic two-pass reductions, batched block
//!   Cholesky for block Jacobi) and [`hdg_core::MixedPrecisionOps`];
//! - [`DeviceDbf`]: the assembled DBF trace matrix on the device (coalesced element-fastest
//!   layout) as a [`hdg_core::TraceOperator`], so every solver of `hdg-linalg` runs on it
//!   unchanged, and as a [`hdg_core::DemoteOperator`] for mixed-precision refinement.
//!
//! The element stages (condensation, assembly, recovery) still run on the CPU backend; the
//! assembled matrix is uploaded with [`DeviceDbf::upload`].
use hdg_core::CoreError;

#[cfg(feature = "cuda")]
mod dbf;
#[cfg(feature = "cuda")]
mod device;
#[cfg(feature = "cuda")]
mod vector;

#[cfg(feature = "cuda")]
pub use dbf::{DeviceDbf, SpmvKernel, MAX_BLOCK_SIZE};
#[cfg(feature = "cuda")]
pub use device::{error_text, CudaBackend, DeviceReal};
#[cfg(feature = "cuda")]
pub use vector::DeviceVector;

/// Whether this build can run the CUDA backend as the pipeline's backend, and if not, why.
///
/// The pipeline's element stages have no CUDA implementation yet, so this is an error in every
/// build; with the `cuda` feature the trace solve can run on the device through
/// [`CudaBackend`] and [`DeviceDbf`] directly.
pub fn availability() -> Result<(), CoreError> {
    if cfg!(feature = "cuda") {
        Err(CoreError::BackendUnavailable(
            "the CUDA backend is not implemented in this version of hdg".into(),
        ))
    } else {
        Err(CoreError::BackendUnavailable(
            "this build of hdg has no CUDA support (rebuild with `--features cuda`)".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn reports_why_it_is_unavailable() {
        let err = super::availability().unwrap_err().to_string();
        assert!(err.contains("CUDA"), "{err}");
    }
}
