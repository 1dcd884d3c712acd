//! The program's wall time since it started, for the summary's account of where it went.
//!
//! The program may run itself again at once (the malloc tunables,
//! [`crate::malloc_tunables`]), so the start is kept in an environment variable that the
//! second run inherits: the clock starts with the first.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The variable that holds the start, in nanoseconds since the Unix epoch.
const START_VARIABLE: &str = "HDG_PROCESS_START_NS";

fn now_ns() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_nanos()
}

/// Marks the program's start, unless a run of this program that ran it again marked it:
/// called first thing in `main`, before any thread starts.
pub fn start() {
    let inherited = std::env::var(START_VARIABLE).ok().and_then(|v| v.parse::<u128>().ok());
    if inherited.is_none() {
        std::env::set_var(START_VARIABLE, now_ns().to_string());
    }
}

/// Seconds since [`start`] (0 when it was not called).
pub fn elapsed() -> f64 {
    let start = std::env::var(START_VARIABLE).ok().and_then(|v| v.parse::<u128>().ok());
    start.map_or(0.0, |s| now_ns().saturating_sub(s) as f64 * 1e-9)
}

/// The backend's start on its own thread while the mesh is built ([`hdg::Backend::start`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct BackendStartTimes {
    /// How long the start took on its thread, seconds.
    pub seconds: f64,
    /// How long the program waited for it after the mesh was built, seconds.
    pub waited: f64,
}

/// Where a run's wall time went, in seconds: the summary's `process` line.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcessTimes {
    /// Since the program started, until the summary.
    pub wall: f64,
    /// Building or reading the mesh (and its checks and topology).
    pub mesh: f64,
    /// The backend's start (the CUDA context and kernels), on another thread beside the mesh:
    /// not part of the sum, but for the wait that followed the mesh, in `around_pipeline`.
    pub backend_start: f64,
    /// The pipeline's stages (their total).
    pub pipeline: f64,
    /// The solver's run around the stages (checks, the results' hand-over) and the wait for
    /// the backend's start after the mesh.
    pub around_pipeline: f64,
    /// Writing the outputs.
    pub outputs: f64,
    /// Freeing the solution before the summary.
    pub teardown: f64,
}

impl ProcessTimes {
    /// The account at this moment, from the parts' seconds: `run` is the solver's whole run,
    /// of which `pipeline` is the stages.
    pub fn now(
        mesh: f64,
        backend: BackendStartTimes,
        run: f64,
        pipeline: f64,
        outputs: f64,
        teardown: f64,
    ) -> Self {
        ProcessTimes {
            wall: elapsed(),
            mesh,
            backend_start: backend.seconds,
            pipeline,
            around_pipeline: (run - pipeline).max(0.0) + backend.waited,
            outputs,
            teardown,
        }
    }

    /// What no part accounts for: start-up, options, the problem's set-up, reporting.
    pub fn rest(&self) -> f64 {
        self.wall - self.mesh - self.pipeline - self.around_pipeline - self.outputs - self.teardown
    }

    /// The summary's line.
    pub fn line(&self) -> String {
        format!(
            "wall {:.3} since the program started: mesh {:.3}{}, pipeline {:.3} (the stages), \
             around it {:.3}, outputs {:.3}, teardown {:.3}, the rest {:.3}",
            self.wall,
            self.mesh,
            if self.backend_start > 0.0 {
                format!(" (the backend's start beside it {:.3})", self.backend_start)
            } else {
                String::new()
            },
            self.pipeline,
            self.around_pipeline,
            self.outputs,
            self.teardown,
            self.rest()
        )
    }

    /// The JSON report's `process` object (seconds).
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "wall_s": self.wall,
            "mesh_s": self.mesh,
            "backend_start_s": self.backend_start,
            "pipeline_s": self.pipeline,
            "around_pipeline_s": self.around_pipeline,
            "outputs_s": self.outputs,
            "teardown_s": self.teardown,
            "rest_s": self.rest(),
        })
    }
}
