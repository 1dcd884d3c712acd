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
//! - the element stages ([`elements`]): [`hdg_core::LocalSolver`], [`hdg_core::Assembler`],
//!   [`hdg_core::Postprocessor`] and [`hdg_core::Backend`] for f32 and f64 (triangles,
//!   k = 1..=6; kernels in `kernels/elements.cu`), so `hdg_core::pipeline::solve` runs the whole
//!   pipeline on the device: condensation, assembly straight into a [`DeviceDbf`], the trace
//!   solve, recovery and postprocessing. Two steps run on the host in this first version: the
//!   element loads F_K and the error norms (both need closures of the problem).
//!
//! A CPU-assembled matrix can still be uploaded with [`DeviceDbf::upload`].
use hdg_core::CoreError;

#[cfg(feature = "cuda")]
mod dbf;
#[cfg(feature = "cuda")]
mod device;
#[cfg(feature = "cuda")]
pub mod elements;
#[cfg(feature = "cuda")]
mod vector;

#[cfg(feature = "cuda")]
pub use dbf::{DeviceDbf, SpmvKernel, MAX_BLOCK_SIZE};
#[cfg(feature = "cuda")]
pub use device::{error_text, CudaBackend, DeviceReal};
#[cfg(feature = "cuda")]
pub use elements::{
    DeviceCondensed, DeviceFields, DevicePostprocessed, DevicePrepared, MAX_ELEMENT_ORDER,
};
#[cfg(feature = "cuda")]
pub use vector::DeviceVector;

/// Whether this build can run the CUDA backend as the pipeline's backend, and if not, why.
///
/// Without the `cuda` feature there is no device code: an error that says how to get it. With
/// it, the backend is built in; whether a device is present is `CudaBackend::new()`'s answer.
pub fn availability() -> Result<(), CoreError> {
    if cfg!(feature = "cuda") {
        // Built with device code: whether a device is present is CudaBackend::new()'s answer.
        Ok(())
    } else {
        Err(CoreError::BackendUnavailable(
            "this build of hdg has no CUDA support (rebuild with `--features cuda`)".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    #[cfg(not(feature = "cuda"))]
    #[test]
    fn reports_why_it_is_unavailable() {
        let err = super::availability().unwrap_err().to_string();
        assert!(err.contains("CUDA"), "{err}");
    }
}
