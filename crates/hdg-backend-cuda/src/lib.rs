//! The CUDA backend of the HDG pipeline.
//!
//! Built without the `cuda` feature this crate is a shell: it needs no CUDA and answers every
//! request for a device with a clear "unavailable" error ([`availability`]).
//!
//! With `--features cuda` (build: nvcc, see `scripts/cuda-toolchain.sh`; run: an NVIDIA driver)
//! it runs every stage of the pipeline on the GPU (the backend's own types named below exist
//! only in that build, so they are plain names here, not links):
//!
//! - `CudaBackend`: context, stream and kernels (`build.rs` compiles every `kernels/*.cu` to
//!   sm_90 SASS and portable compute_75 PTX and embeds both), with [`hdg_core::VectorOps`] for
//!   f32 and f64 on `DeviceVector`s (fused operations, deterministic one-launch reductions
//!   whose last block writes the result to page-locked host memory, batched block Cholesky for
//!   block Jacobi) and [`hdg_core::MixedPrecisionOps`];
//! - `DeviceDbf`: the assembled DBF trace matrix on the device (row-fastest planes, one per
//!   slot and block entry) as a [`hdg_core::TraceOperator`], so every solver of `hdg-linalg`
//!   runs on it unchanged, and as a [`hdg_core::DemoteOperator`] for mixed-precision
//!   refinement; block sizes 1..=11 (triangles) and the tetrahedron face blocks up to 45;
//! - the element stages (module `stages`): [`hdg_core::LocalSolver`], [`hdg_core::Assembler`],
//!   [`hdg_core::Postprocessor`] and [`hdg_core::Backend`] for f32 and f64 (triangles and
//!   tetrahedra, k = 1..=8; kernels in `kernels/condense.cu`, `condense_bordered.cu`,
//!   `assemble.cu`, `recover.cu` and `postprocess.cu`),
//!   so `hdg_core::pipeline::solve` runs the whole pipeline on the device: geometry factors,
//!   condensation, assembly straight into a `DeviceDbf`, the trace solve, recovery,
//!   postprocessing, and for the built-in manufactured problems the element loads and the
//!   error norms (other problems give closures, evaluated on the host). Condensation, recovery and postprocessing come in two
//!   kernel designs, thread per element and block per element, chosen per cell type, order and
//!   precision by measurement ([`design`]: the designs, the dispatch, the launch sizes);
//! - the matrix-free trace operator (`src/operator/matrix_free.rs`): `MatrixFreeOperator`
//!   applies the trace operator from the element trace matrices (packed symmetric,
//!   element-fastest) with a per-element product and a deterministic per-face gather, never
//!   assembling the global matrix. `CudaBackend::with_trace_operator` chooses what
//!   [`hdg_core::Assembler::assemble`] builds ([`TraceOperatorKind`]); the assembled operator
//!   is a `DeviceTraceOperator`, either kind, so the pipeline and every solver run unchanged on
//!   both;
//! - device memory: `CudaBackend::watch_memory` samples the memory in use from a background
//!   thread and reports the peak of a stretch of work (`MemoryWatch`, `MemoryPeak`); an
//!   allocation the device cannot satisfy is [`hdg_core::CoreError::OutOfDeviceMemory`].
//!
//! A CPU-assembled matrix can still be uploaded with `DeviceDbf::upload`.
use hdg_core::CoreError;
// For the modules shared with build.rs, which name them from their parent.
#[cfg(test)]
use hdg_core::manufactured::Arithmetic;
#[cfg(any(feature = "cuda", test))]
use hdg_core::Manufactured;

mod block_sizes;
pub mod codegen;
#[cfg(feature = "cuda")]
mod cublas;
pub mod design;
#[cfg(feature = "cuda")]
mod device;
#[cfg(feature = "cuda")]
mod driver;
mod element_instances;
#[cfg(feature = "cuda")]
mod element_kernels;
#[cfg(feature = "cuda")]
mod geometry;
#[cfg(feature = "cuda")]
mod manufactured;
// The generator of the manufactured solutions' device code is build.rs's; here for its tests.
#[cfg(feature = "cuda")]
mod constant_operator;
#[cfg(test)]
#[path = "../build/manufactured_code.rs"]
mod manufactured_code;
#[cfg(feature = "cuda")]
mod multigrid;
#[cfg(feature = "cuda")]
mod nvrtc;
#[cfg(feature = "cuda")]
mod operator;
pub mod settings;
#[cfg(feature = "cuda")]
pub mod stages;
#[cfg(feature = "cuda")]
mod staging;
// build.rs includes it too (the solutions with device code): some of it serves only there.
#[cfg(feature = "cuda")]
mod runtime_library;
#[cfg(any(feature = "cuda", test))]
#[allow(dead_code)]
mod solution_numbers;
#[cfg(feature = "cuda")]
mod vector;

#[cfg(feature = "cuda")]
pub use constant_operator::{DeviceOperator, OperatorPath};
pub use design::{
    Design, ElementStage, Precision, MAX_BLOCK_SIZE, MAX_ELEMENT_ORDER, TETRAHEDRON_BLOCK_SIZES,
};
#[cfg(feature = "cuda")]
pub use device::{error_text, CudaBackend, DeviceReal, MemoryPeak, MemoryWatch};
#[cfg(feature = "cuda")]
pub use manufactured::PointKernels;
#[cfg(feature = "cuda")]
pub use multigrid::{DeviceCsr, DeviceFaceTransfer};
#[cfg(feature = "cuda")]
pub use operator::dbf::{DeviceDbf, SpmvKernel};
#[cfg(feature = "cuda")]
pub use operator::matrix_free::MatrixFreeOperator;
#[cfg(feature = "cuda")]
pub use operator::DeviceTraceOperator;
pub use settings::{CublasUse, CudaSettings, PointEvaluation};
#[cfg(feature = "cuda")]
pub use stages::{
    condense::{CondensedArray, DeviceCondensed},
    postprocess::{DevicePostprocessed, NormsComputed},
    prepare::DevicePrepared,
    recover::DeviceFields,
};
#[cfg(feature = "cuda")]
pub use vector::{DeviceIndices, DeviceVector};

/// Which trace operator the assembly builds (in every build, so that programs can parse the
/// choice without the `cuda` feature).
pub use hdg_core::TraceOperatorKind;

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
