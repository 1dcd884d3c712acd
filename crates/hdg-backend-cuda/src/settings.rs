//! Tuning overrides of the CUDA backend, in one value set on the backend
//! (`CudaBackend::with_settings`): the library itself reads no environment variable. The
//! programs (`hdg`, `gpu-bench`, `condense-bench`) fill it from the environment with
//! [`CudaSettings::from_environment`], for sweeps and kernel experiments on a machine with no
//! Rust toolchain.
use std::path::PathBuf;

use hdg_core::CoreError;

use crate::design::Design;

/// Overrides of the dispatch and launch choices of [`crate::design`]; [`CudaSettings::auto`]
/// overrides nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CudaSettings {
    /// One design forced on every element stage where it is compiled (`block-global` means
    /// `block` for recovery and postprocessing); None: the dispatch of [`crate::design`].
    /// `HDG_CUDA_DESIGN` = `thread`, `block`, `block-global`, `bordered`.
    pub design: Option<Design>,
    /// Threads per block of the block condensations (32..=1024, a multiple of 32; capped at
    /// the loaded kernel's own launch bound, so that kernels built with other bounds can be
    /// swept too); None: [`crate::design::block_threads`]. `HDG_CUDA_CONDENSE_THREADS`.
    pub condense_threads: Option<u32>,
    /// At most this many resident blocks per multiprocessor for the block condensations
    /// (fewer elements in flight write their K_e and Z into fewer L2 lines at a time); None:
    /// as many as fit. `HDG_CUDA_CONDENSE_BLOCKS_PER_SM`.
    pub condense_blocks_per_sm: Option<usize>,
    /// Multigrid levels of at least this many rows coarsen on the device, smaller ones on the
    /// host; None: levels of `multigrid::DEVICE_COARSENING_ROWS` rows and more whose rows are
    /// short (`multigrid::DEVICE_COARSENING_ROW_LENGTH` entries on average).
    /// `HDG_CUDA_COARSENING_ROWS` (0: every level on the device; a huge number: every level
    /// on the host).
    pub device_coarsening_rows: Option<usize>,
    /// Print the wall-clock phases of `prepare` and of the error norms to standard error.
    /// `HDG_CUDA_PROFILE` (set to anything).
    pub profile: bool,
    /// How the error norms evaluate the fields at their quadrature points.
    /// `HDG_CUDA_POINT_EVALUATION` = `auto`, `operators`, `loop`.
    pub point_evaluation: PointEvaluation,
    /// Whether constant operators go through cuBLAS's GEMM (`crate::cublas`).
    /// `HDG_CUDA_CUBLAS` = `auto`, `load`, `never`, `always`.
    pub cublas: CublasUse,
    /// The cuBLAS library to load (a path or a soname); None: the CUDA 13 and 12 sonames, then
    /// `/usr/local/cuda/lib64`. The first backend of a device to load it decides for all its
    /// clones. `HDG_CUDA_CUBLAS_LIBRARY`.
    pub cublas_library: Option<PathBuf>,
    /// The NVRTC library to load for kernels compiled at run time
    /// (`DeviceOperator::compile_for_panel`; a path or a soname); None: the CUDA 13 and 12
    /// sonames, then `/usr/local/cuda/lib64`. The first backend of a device to load it decides
    /// for all its clones. `HDG_CUDA_NVRTC_LIBRARY`.
    pub nvrtc_library: Option<PathBuf>,
    /// Load `STEM.sm_90.cubin` from this directory, where there is one, in place of the
    /// embedded SASS of `kernels/STEM.cu` (compiled on the GPU machine with nvcc, say with
    /// -lineinfo or a variant's defines). `HDG_CUDA_KERNEL_DIR`.
    pub kernel_dir: Option<PathBuf>,
}

/// How fields are evaluated at quadrature points (the error norms of the manufactured problems).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PointEvaluation {
    /// The operator kernels where they measured faster, the loop kernel elsewhere
    /// (`manufactured::operators_win`: the loop for few basis functions per point).
    #[default]
    Auto,
    /// Constant-operator kernels (`crate::constant_operator`: an operator's built-in generated
    /// kernel, the dense fallback where it has none) apply the basis at the points to panels of
    /// cells, then a kernel compares with the exact solution.
    Operators,
    /// One thread per cell sums the basis at every point (the kernel before the operator
    /// kernels).
    Loop,
}

/// When a constant operator is applied by cuBLAS's GEMM instead of the backend's kernels.
///
/// Loading cuBLAS and creating its handle costs, once per process, more than cuBLAS saves in the
/// error norms of any pipeline run measured (BENCHMARKS.md, section 'Constant operators'); so by
/// default the backend does not load it, and uses it where it is faster once something has
/// ([`CublasUse::Load`], [`CublasUse::Always`], or `CudaBackend::load_cublas` in a program that
/// applies many operators).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CublasUse {
    /// For the operators where it measured faster (`codegen::gemm_wins`), if the library is
    /// loaded already; the kernels otherwise.
    #[default]
    Auto,
    /// As [`CublasUse::Auto`], loading the library on the first operator that wants it (the
    /// kernels where it does not load).
    Load,
    /// Never: the generated kernels, or the dense fallback (the bits of
    /// `hdg_core::constant_operator`'s sequence).
    Never,
    /// Every operator (to compare); an error where the library does not load.
    Always,
}

impl std::str::FromStr for CublasUse {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(CublasUse::Auto),
            "load" => Ok(CublasUse::Load),
            "never" => Ok(CublasUse::Never),
            "always" => Ok(CublasUse::Always),
            other => {
                Err(format!("unknown cuBLAS use '{other}' (known: auto, load, never, always)"))
            }
        }
    }
}

impl std::str::FromStr for PointEvaluation {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(PointEvaluation::Auto),
            "operators" => Ok(PointEvaluation::Operators),
            "loop" => Ok(PointEvaluation::Loop),
            other => {
                Err(format!("unknown point evaluation '{other}' (known: auto, operators, loop)"))
            }
        }
    }
}

impl CudaSettings {
    /// No overrides: every choice from [`crate::design`].
    pub fn auto() -> Self {
        Self::default()
    }

    /// The settings named in the environment (the variables in the field documentation); an
    /// error names a variable whose value is not valid.
    pub fn from_environment() -> Result<Self, CoreError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let invalid =
            |name: &'static str, reason: String| CoreError::InvalidParameter { name, reason };
        let settings = CudaSettings {
            design: var("HDG_CUDA_DESIGN")
                .map(|v| v.trim().parse().map_err(|r| invalid("HDG_CUDA_DESIGN", r)))
                .transpose()?,
            condense_threads: var("HDG_CUDA_CONDENSE_THREADS")
                .map(|v| {
                    v.trim()
                        .parse()
                        .map_err(|e| invalid("HDG_CUDA_CONDENSE_THREADS", format!("{v}: {e}")))
                })
                .transpose()?,
            condense_blocks_per_sm: var("HDG_CUDA_CONDENSE_BLOCKS_PER_SM")
                .map(|v| {
                    v.trim().parse().map_err(|e| {
                        invalid("HDG_CUDA_CONDENSE_BLOCKS_PER_SM", format!("{v}: {e}"))
                    })
                })
                .transpose()?,
            device_coarsening_rows: var("HDG_CUDA_COARSENING_ROWS")
                .map(|v| {
                    v.trim()
                        .parse()
                        .map_err(|e| invalid("HDG_CUDA_COARSENING_ROWS", format!("{v}: {e}")))
                })
                .transpose()?,
            point_evaluation: var("HDG_CUDA_POINT_EVALUATION")
                .map(|v| v.trim().parse().map_err(|r| invalid("HDG_CUDA_POINT_EVALUATION", r)))
                .transpose()?
                .unwrap_or_default(),
            cublas: var("HDG_CUDA_CUBLAS")
                .map(|v| v.trim().parse().map_err(|r| invalid("HDG_CUDA_CUBLAS", r)))
                .transpose()?
                .unwrap_or_default(),
            cublas_library: std::env::var_os("HDG_CUDA_CUBLAS_LIBRARY")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            nvrtc_library: std::env::var_os("HDG_CUDA_NVRTC_LIBRARY")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            profile: std::env::var_os("HDG_CUDA_PROFILE").is_some(),
            kernel_dir: std::env::var_os("HDG_CUDA_KERNEL_DIR").map(PathBuf::from),
        };
        settings.check()?;
        Ok(settings)
    }

    /// Checks the values' ranges.
    pub fn check(&self) -> Result<(), CoreError> {
        if let Some(t) = self.condense_threads {
            if !(32..=1024).contains(&t) || !t.is_multiple_of(32) {
                return Err(CoreError::InvalidParameter {
                    name: "condense threads",
                    reason: format!("{t}: must be a multiple of 32 in 32..=1024"),
                });
            }
        }
        if self.condense_blocks_per_sm == Some(0) {
            return Err(CoreError::InvalidParameter {
                name: "condense blocks per multiprocessor",
                reason: "must be at least 1".into(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::CudaSettings;

    #[test]
    fn ranges_are_checked() {
        assert!(CudaSettings::auto().check().is_ok());
        for bad in [0, 16, 48, 2048] {
            let s = CudaSettings { condense_threads: Some(bad), ..CudaSettings::auto() };
            assert!(s.check().is_err(), "{bad}");
        }
        let s = CudaSettings { condense_threads: Some(128), ..CudaSettings::auto() };
        assert!(s.check().is_ok());
        let s = CudaSettings { condense_blocks_per_sm: Some(0), ..CudaSettings::auto() };
        assert!(s.check().is_err());
        assert_eq!("loop".parse(), Ok(super::PointEvaluation::Loop));
        assert_eq!("operators".parse(), Ok(super::PointEvaluation::Operators));
        assert_eq!("auto".parse(), Ok(super::PointEvaluation::Auto));
        assert!("unrolled".parse::<super::PointEvaluation>().is_err());
        assert_eq!("never".parse(), Ok(super::CublasUse::Never));
        assert_eq!("always".parse(), Ok(super::CublasUse::Always));
        assert_eq!("auto".parse(), Ok(super::CublasUse::Auto));
        assert_eq!("load".parse(), Ok(super::CublasUse::Load));
        assert!("yes".parse::<super::CublasUse>().is_err());
    }
}
