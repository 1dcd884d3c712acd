//! Errors of the core: every bad input becomes one of these, never a panic.
use thiserror::Error;

/// The error type of the HDG pipeline.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum CoreError {
    /// A polynomial order outside the supported range.
    #[error("polynomial order {order} is not supported (allowed: {min}..={max})")]
    InvalidOrder { order: usize, min: usize, max: usize },
    /// A parameter with a value the method cannot use (with the reason).
    #[error("invalid {name}: {reason}")]
    InvalidParameter { name: &'static str, reason: String },
    /// The mesh's cell type does not match the reference element or problem.
    #[error("cell type mismatch: {0}")]
    CellTypeMismatch(String),
    /// A mesh error, passed through.
    #[error(transparent)]
    Mesh(#[from] hdg_mesh::MeshError),
    /// A local (per-element) matrix that should be SPD is not.
    #[error("element {element}: local Schur complement is not positive definite (pivot {pivot} = {value:e})")]
    NotPositiveDefinite { element: usize, pivot: usize, value: f64 },
    /// The backend cannot run (for instance, built without CUDA, or no device).
    #[error("backend unavailable: {0}")]
    BackendUnavailable(String),
    /// A failure inside a backend (device memory, kernel launch, ...).
    #[error("backend error: {0}")]
    Backend(String),
    /// The trace solve failed.
    #[error("solver failed: {0}")]
    Solver(String),
    /// An I/O failure (export files).
    #[error("i/o error: {0}")]
    Io(String),
}

impl From<std::io::Error> for CoreError {
    fn from(e: std::io::Error) -> Self {
        CoreError::Io(e.to_string())
    }
}

/// Result alias of the core.
pub type Result<T> = std::result::Result<T, CoreError>;
