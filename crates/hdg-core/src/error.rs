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
    /// A failure inside a backend (kernel launch, copies, ...).
    #[error("backend error: {0}")]
    Backend(String),
    /// The device ran out of memory: what was being done, the size asked for and the device's
    /// free and total memory at that moment, where known.
    #[error("out of device memory: {what}{}", memory_detail(*.requested_bytes, *.free_bytes, *.total_bytes))]
    OutOfDeviceMemory {
        what: String,
        requested_bytes: Option<u64>,
        free_bytes: Option<u64>,
        total_bytes: Option<u64>,
    },
    /// The host has too little memory for the problem (estimated before allocating:
    /// `crate::resources`).
    #[error("not enough host memory for {what}: it needs at least {} GiB, the host has {} GiB available", gib(*.estimated_bytes), gib(*.available_bytes))]
    OutOfHostMemory { what: String, estimated_bytes: u64, available_bytes: u64 },
    /// The trace solve failed.
    #[error("solver failed: {0}")]
    Solver(String),
    /// An I/O failure (export files).
    #[error("i/o error: {0}")]
    Io(String),
    /// A rank of a distributed run failed: every rank returns the error of the lowest failing
    /// rank, its message as text (cell and face numbers in it are those of that rank's part,
    /// `hdg_mesh::MeshPart`, where the failure was in the part's stages).
    #[error("rank {rank}: {message}")]
    Distributed { rank: usize, message: String },
}

impl From<std::io::Error> for CoreError {
    fn from(e: std::io::Error) -> Self {
        CoreError::Io(e.to_string())
    }
}

/// The sizes of an [`CoreError::OutOfDeviceMemory`] error, in GiB, for its message.
fn memory_detail(requested: Option<u64>, free: Option<u64>, total: Option<u64>) -> String {
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    let mut text = String::new();
    if let Some(r) = requested {
        text += &format!(" (asked for {r} bytes, {:.3} GiB)", gib(r));
    }
    match (free, total) {
        (Some(f), Some(t)) => text += &format!("; {:.3} GiB free of {:.3} GiB", gib(f), gib(t)),
        (Some(f), None) => text += &format!("; {:.3} GiB free", gib(f)),
        _ => {}
    }
    text
}

/// Bytes in GiB with three decimals, for messages.
fn gib(bytes: u64) -> String {
    format!("{:.3}", bytes as f64 / (1u64 << 30) as f64)
}

/// Result alias of the core.
pub type Result<T> = std::result::Result<T, CoreError>;

#[cfg(test)]
mod tests {
    use super::CoreError;

    #[test]
    fn out_of_device_memory_says_how_much() {
        let e = CoreError::OutOfDeviceMemory {
            what: "cannot allocate 10 values of f64".into(),
            requested_bytes: Some(3 << 30),
            free_bytes: Some(1 << 30),
            total_bytes: Some(80 << 30),
        };
        assert_eq!(
            e.to_string(),
            "out of device memory: cannot allocate 10 values of f64 (asked for 3221225472 bytes, \
             3.000 GiB); 1.000 GiB free of 80.000 GiB"
        );
        let bare = CoreError::OutOfDeviceMemory {
            what: "launch of k failed".into(),
            requested_bytes: None,
            free_bytes: None,
            total_bytes: None,
        };
        assert_eq!(bare.to_string(), "out of device memory: launch of k failed");
    }
}
