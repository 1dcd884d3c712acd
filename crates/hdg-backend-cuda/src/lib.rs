//! The CUDA backend of the HDG pipeline.
//!
//! Until the CUDA issue lands this crate is a shell: it builds without CUDA and answers every
//! request for a device with a clear "unavailable" error, so that the command-line program and
//! the tests can already ask for it and report why it cannot run.
use hdg_core::CoreError;

/// Whether this build can run the CUDA backend, and if not, why.
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
