//! Starting a backend ahead of its run.
//!
//! Creating the CUDA backend (the driver's initialisation, the device's context, the kernels'
//! modules, a stream) takes a fixed fraction of a second that does not depend on the problem.
//! Started on another thread while the caller reads or builds the mesh ([`Backend::start`]),
//! it is off the critical path: the run then takes the started backend
//! ([`Solver::on_started`]) instead of creating its own. The CPU backend has nothing to start.
//!
//! ```no_run
//! use hdg::{generate, Backend, Problem, Solver};
//! let start = Backend::Cuda.start(); // the device starts while the mesh is built
//! let mesh = generate::unit_square(1000, generate::Diagonal::Right)?;
//! let problem = Problem::builder().source(|_| 1.0).build();
//! let solver = Solver::new(mesh, problem).order(3).on_started(start.wait()?);
//! let solution = solver.solve()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#[cfg(feature = "cuda")]
use std::time::Instant;

use crate::{Backend, Error};

#[cfg(feature = "cuda")]
type Started = (hdg_core::Result<hdg_backend_cuda::CudaBackend>, f64);

/// A backend being started on another thread ([`Backend::start`]); [`BackendStart::wait`]
/// gives it. Dropped without waiting, the start finishes on its own and is thrown away.
#[derive(Debug)]
pub struct BackendStart {
    backend: Backend,
    #[cfg(feature = "cuda")]
    thread: Option<std::thread::JoinHandle<Started>>,
}

/// A started backend ([`BackendStart::wait`]) for [`Solver::on_started`]; clones share the
/// device's state.
///
/// [`Solver::on_started`]: crate::Solver::on_started
#[derive(Clone, Debug)]
pub struct StartedBackend {
    backend: Backend,
    seconds: f64,
    #[cfg(feature = "cuda")]
    pub(crate) cuda: Option<hdg_backend_cuda::CudaBackend>,
}

impl Backend {
    /// Starts this backend on another thread on device 0 ([`Backend::start_on`]).
    pub fn start(self) -> BackendStart {
        self.start_on(0)
    }

    /// Starts this backend on another thread: for the CUDA backend, device `device` modulo the
    /// devices the process sees (a process of a node's ranks picks its own by its rank on the
    /// node, as [`Solver::run_distributed`] does). The CPU backend starts at once.
    ///
    /// [`Solver::run_distributed`]: crate::Solver::run_distributed
    pub fn start_on(self, device: usize) -> BackendStart {
        let _ = device;
        BackendStart {
            backend: self,
            #[cfg(feature = "cuda")]
            thread: (self == Backend::Cuda).then(|| {
                std::thread::spawn(move || {
                    let started = Instant::now();
                    (cuda_on(device), started.elapsed().as_secs_f64())
                })
            }),
        }
    }
}

/// The CUDA backend on device `device` modulo the devices the process sees.
#[cfg(feature = "cuda")]
pub(crate) fn cuda_on(device: usize) -> hdg_core::Result<hdg_backend_cuda::CudaBackend> {
    let devices = hdg_backend_cuda::CudaBackend::device_count().max(1);
    hdg_backend_cuda::CudaBackend::on_device(device % devices)
}

impl BackendStart {
    /// Waits for the start.
    ///
    /// # Errors
    /// The backend's start failed, or this build has no CUDA backend: the error the run would
    /// have met ([`Error::Core`] with [`crate::CoreError::BackendUnavailable`] without a
    /// driver or a device).
    pub fn wait(self) -> Result<StartedBackend, Error> {
        match self.backend {
            Backend::Cpu => Ok(StartedBackend {
                backend: Backend::Cpu,
                seconds: 0.0,
                #[cfg(feature = "cuda")]
                cuda: None,
            }),
            #[cfg(feature = "cuda")]
            Backend::Cuda => {
                let thread = self.thread.expect("a CUDA start has its thread");
                let (cuda, seconds) = match thread.join() {
                    Ok(started) => started,
                    Err(panic) => std::panic::resume_unwind(panic),
                };
                Ok(StartedBackend { backend: Backend::Cuda, seconds, cuda: Some(cuda?) })
            }
            #[cfg(not(feature = "cuda"))]
            Backend::Cuda => Err(hdg_backend_cuda::availability().unwrap_err().into()),
        }
    }
}

impl StartedBackend {
    /// Which backend it is.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// How long the start took on its thread, seconds (0 for the CPU backend).
    pub fn seconds(&self) -> f64 {
        self.seconds
    }
}
