//! [`Solver`]: every option of a run, and the run itself on the chosen backend.
use std::sync::Arc;
use std::time::Duration;

use hdg_backend_cuda::CudaSettings;
use hdg_core::{
    Backend as BackendStages, CoreError, HostCsr, PipelineOptions, PipelineReport, Precision,
    Problem, Progress, Silent, Solution, TraceOperator, TraceOperatorKind,
};
use hdg_linalg::{SolverBackend, SolverChoice, SolverPrecision, SolverSettings};
use hdg_mesh::Mesh;

use crate::{Backend, Error, StartedBackend};

/// How often a run that watches the device memory samples it.
pub const MEMORY_SAMPLE_INTERVAL: Duration = Duration::from_micros(500);

/// A solve, set up step by step: `Solver::new(mesh, problem).order(3).solve()`.
///
/// Defaults: order 2, the CPU backend, f64, CG with the multigrid preconditioner
/// ([`SolverChoice::PcgMg`]) to the relative residual [`crate::default_tolerance`] of the
/// precision (1e-10 in f64, 1e-6 in f32) with at most [`crate::DEFAULT_MAX_ITERATIONS`]
/// iterations, the assembled trace matrix ([`TraceOperatorKind::Dbf`]), the CUDA backend's
/// own tuning ([`CudaSettings::auto`]), the solution kept, no trace matrix kept, no device
/// memory watch.
#[derive(Clone, Debug)]
#[must_use]
pub struct Solver {
    mesh: Arc<Mesh>,
    problem: Problem,
    order: usize,
    backend: Backend,
    precision: Precision,
    solver: SolverSettings,
    operator: TraceOperatorKind,
    cuda: CudaSettings,
    watch_memory: bool,
    keep_operator: bool,
    keep_solution: bool,
    started: Option<StartedBackend>,
}

/// Peak device memory of a run on the CUDA backend, sampled from a background thread every
/// [`MEMORY_SAMPLE_INTERVAL`] (`hdg::cuda::CudaBackend::watch_memory` says what the figure
/// includes and its resolution).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeviceMemory {
    /// The largest device memory in use during the run, above what was in use at its start
    /// (the context, the kernels, other processes), bytes.
    pub peak_bytes: u64,
    /// When the peak was first seen, seconds since the run started: with the stages' times,
    /// which stage held it.
    pub peak_at_s: f64,
    /// Device memory in use when the run started, bytes.
    pub baseline_used_bytes: u64,
    /// The device's memory, bytes.
    pub total_bytes: u64,
    /// Samples taken.
    pub samples: u64,
    /// Interval between samples, seconds.
    pub interval_s: f64,
}

/// Everything one run leaves ([`Solver::run`]).
#[derive(Debug)]
pub struct Run {
    /// The pipeline's report: sizes, the trace solve, errors, stage times.
    pub report: PipelineReport,
    /// The trace operator the run assembled.
    pub operator: TraceOperatorKind,
    /// The solution on the host ([`Solver::keep_solution`], the default).
    pub solution: Option<Solution>,
    /// The assembled trace matrix, Dirichlet unknowns eliminated, on the host
    /// ([`Solver::keep_operator`]).
    pub trace_matrix: Option<HostCsr>,
    /// Peak device memory ([`Solver::watch_device_memory`] on the CUDA backend).
    pub device_memory: Option<DeviceMemory>,
    /// The process's peak resident set size after the run, bytes, where known (Linux).
    pub host_peak_rss_bytes: Option<u64>,
}

impl Solver {
    /// A solve of `problem` on `mesh` with the defaults above.
    pub fn new(mesh: impl Into<Arc<Mesh>>, problem: Problem) -> Solver {
        Solver {
            mesh: mesh.into(),
            problem,
            order: 2,
            backend: Backend::Cpu,
            precision: Precision::F64,
            solver: SolverSettings::default(),
            operator: TraceOperatorKind::Dbf,
            cuda: CudaSettings::auto(),
            watch_memory: false,
            keep_operator: false,
            keep_solution: true,
            started: None,
        }
    }

    /// Runs on the backend `started` ([`Backend::start`]: started on another thread while
    /// the mesh was built) instead of creating one: the backend becomes its kind, and the CUDA
    /// runs (here and over MPI ranks) use its device.
    pub fn on_started(mut self, started: StartedBackend) -> Solver {
        self.backend = started.backend();
        self.started = Some(started);
        self
    }

    /// The CUDA backend started for this solver ([`Solver::on_started`]), if any.
    #[cfg(feature = "cuda")]
    pub(crate) fn started_cuda(&self) -> Option<hdg_backend_cuda::CudaBackend> {
        self.started.as_ref().and_then(|s| s.cuda.clone())
    }

    /// Polynomial order k (1 to 10 on the CPU, 1 to 8 on CUDA: [`Backend::max_order`]).
    pub fn order(mut self, order: usize) -> Solver {
        self.order = order;
        self
    }

    /// The backend.
    pub fn backend(mut self, backend: Backend) -> Solver {
        self.backend = backend;
        self
    }

    /// The working precision of every stage.
    pub fn precision(mut self, precision: Precision) -> Solver {
        self.precision = precision;
        self
    }

    /// The trace solver.
    pub fn solver(mut self, solver: SolverChoice) -> Solver {
        self.solver.choice = solver;
        self
    }

    /// The relative residual at which the iterative trace solve stops.
    pub fn tolerance(mut self, tolerance: f64) -> Solver {
        self.solver.tolerance = Some(tolerance);
        self
    }

    /// The iteration cap of the trace solve.
    pub fn max_iterations(mut self, max_iterations: usize) -> Solver {
        self.solver.max_iterations = max_iterations;
        self
    }

    /// The same options for another problem on the same mesh.
    pub fn with_problem(mut self, problem: Problem) -> Solver {
        self.problem = problem;
        self
    }

    /// Solver, tolerance and iteration cap at once.
    pub fn solver_settings(mut self, settings: SolverSettings) -> Solver {
        self.solver = settings;
        self
    }

    /// The trace operator the assembly builds: the assembled matrix (every backend) or the
    /// matrix-free operator (the CUDA backend).
    pub fn operator(mut self, operator: TraceOperatorKind) -> Solver {
        self.operator = operator;
        self
    }

    /// Tuning overrides of the CUDA backend (ignored on the CPU).
    pub fn cuda_settings(mut self, settings: CudaSettings) -> Solver {
        self.cuda = settings;
        self
    }

    /// Sample the device memory in use during the run (CUDA backend; ignored on the CPU):
    /// [`Run::device_memory`].
    pub fn watch_device_memory(mut self, watch: bool) -> Solver {
        self.watch_memory = watch;
        self
    }

    /// Keep the assembled trace matrix: [`Run::trace_matrix`], for export
    /// ([`crate::matrix_market`]) or checks.
    pub fn keep_operator(mut self, keep: bool) -> Solver {
        self.keep_operator = keep;
        self
    }

    /// Copy the solution to the host ([`Run::solution`]; on by default). A run that only
    /// wants its report (a convergence study, a benchmark) saves the copy.
    pub fn keep_solution(mut self, keep: bool) -> Solver {
        self.keep_solution = keep;
        self
    }

    /// Whether runs copy the solution to the host ([`Solver::keep_solution`]).
    pub fn keeps_solution(&self) -> bool {
        self.keep_solution
    }

    /// The mesh.
    pub fn mesh(&self) -> &Arc<Mesh> {
        &self.mesh
    }

    /// The problem.
    pub fn problem(&self) -> &Problem {
        &self.problem
    }

    /// The backend chosen.
    pub fn backend_choice(&self) -> Backend {
        self.backend
    }

    /// The precision chosen.
    pub fn precision_choice(&self) -> Precision {
        self.precision
    }

    /// The polynomial order.
    pub fn order_choice(&self) -> usize {
        self.order
    }

    /// The trace solver's settings.
    pub fn solver_choice(&self) -> &SolverSettings {
        &self.solver
    }

    /// The trace operator chosen.
    pub fn operator_choice(&self) -> TraceOperatorKind {
        self.operator
    }

    /// The CUDA backend's settings.
    pub fn cuda_settings_choice(&self) -> &CudaSettings {
        &self.cuda
    }

    /// Runs the pipeline and returns the solution.
    ///
    /// # Errors
    /// [`Error::Core`] for bad input (each names what is wrong and where) or a backend
    /// failure; [`Error::NotConverged`], carrying the solution, when the trace solve stops
    /// above its tolerance.
    pub fn solve(&self) -> Result<Solution, Error> {
        self.solve_with_progress(&mut Silent)
    }

    /// [`Self::solve`], reporting each stage's start and end to `progress`.
    ///
    /// # Errors
    /// As [`Self::solve`].
    pub fn solve_with_progress(&self, progress: &mut dyn Progress) -> Result<Solution, Error> {
        let keeping = self.clone().keep_solution(true);
        let run = keeping.run(progress)?;
        let solution = run.solution.expect("the run was asked to keep the solution");
        if solution.report().solve.converged {
            Ok(solution)
        } else {
            Err(Error::NotConverged(Box::new(solution)))
        }
    }

    /// Runs the pipeline, reporting each stage's start and end to `progress`, and returns what
    /// the run leaves: its report whether or not the trace solve converged (see
    /// `report.solve.converged`), and what the options asked to keep.
    ///
    /// # Errors
    /// [`Error::Core`] for bad input or a backend failure.
    pub fn run(&self, progress: &mut dyn Progress) -> Result<Run, Error> {
        if self.backend == Backend::Cpu && self.operator != TraceOperatorKind::Dbf {
            return Err(CoreError::InvalidParameter {
                name: "operator",
                reason: format!(
                    "the {} trace operator exists on the CUDA backend only; the CPU backend \
                     assembles the DBF matrix",
                    self.operator
                ),
            }
            .into());
        }
        let mut run = match self.backend {
            Backend::Cpu => self.run_on(&hdg_backend_cpu::CpuBackend::new(), progress)?,
            #[cfg(feature = "cuda")]
            Backend::Cuda => self.run_on_cuda(progress)?,
            #[cfg(not(feature = "cuda"))]
            Backend::Cuda => return Err(hdg_backend_cuda::availability().unwrap_err().into()),
        };
        run.host_peak_rss_bytes = host_peak_rss_bytes();
        Ok(run)
    }

    /// The run on the CUDA backend with this solver's operator and settings, its device memory
    /// watched if asked.
    #[cfg(feature = "cuda")]
    fn run_on_cuda(&self, progress: &mut dyn Progress) -> Result<Run, Error> {
        let cuda = match self.started_cuda() {
            Some(cuda) => cuda,
            None => hdg_backend_cuda::CudaBackend::new()?,
        };
        let cuda = cuda.with_trace_operator(self.operator).with_settings(self.cuda.clone())?;
        let watch = match self.watch_memory {
            true => Some(cuda.watch_memory(MEMORY_SAMPLE_INTERVAL)?),
            false => None,
        };
        let mut run = self.run_on(&cuda, progress)?;
        if let Some(watch) = watch {
            let peak = watch.stop()?;
            run.device_memory = Some(DeviceMemory {
                peak_bytes: peak.peak_bytes() as u64,
                peak_at_s: peak.peak_at_seconds,
                baseline_used_bytes: peak.baseline_used_bytes as u64,
                total_bytes: peak.total_bytes as u64,
                samples: peak.samples,
                interval_s: peak.interval.as_secs_f64(),
            });
        }
        Ok(run)
    }

    /// The run on `backend` in the chosen precision.
    fn run_on<B: SolverBackend>(
        &self,
        backend: &B,
        progress: &mut dyn Progress,
    ) -> Result<Run, Error> {
        match self.precision {
            Precision::F64 => self.run_in::<f64, B>(backend, progress),
            Precision::F32 => self.run_in::<f32, B>(backend, progress),
        }
    }

    fn run_in<T, B>(&self, backend: &B, progress: &mut dyn Progress) -> Result<Run, Error>
    where
        T: SolverPrecision<B>,
        B: SolverBackend + BackendStages<T>,
    {
        let solver = self.solver.trace_solver::<T, B>()?;
        let options =
            PipelineOptions { keep_operator: self.keep_operator, full_trace: self.keep_solution };
        let out = hdg_core::solve::<T, B>(
            backend,
            &self.mesh,
            &self.problem,
            self.order,
            &*solver,
            options,
            progress,
        )?;
        let trace_matrix = match &out.operator {
            Some((matrix, _)) => Some(matrix.to_host_csr()?),
            None => None,
        };
        // The solution owns its mesh and problem: shared, not copied.
        let solution =
            Solution::from_output(backend, self.mesh.clone(), self.problem.clone(), &out)?;
        Ok(Run {
            report: out.report,
            operator: self.operator,
            solution,
            trace_matrix,
            device_memory: None,
            host_peak_rss_bytes: None,
        })
    }
}

/// The process's peak resident set size (`VmHWM` of `/proc/self/status`), bytes; `None` where
/// there is no such file (not Linux).
pub fn host_peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 =
        line.trim_start_matches("VmHWM:").trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

/// The threads the CPU backend runs on (Rayon's pool: `RAYON_NUM_THREADS` chooses them).
pub fn host_threads() -> usize {
    rayon::current_num_threads()
}
