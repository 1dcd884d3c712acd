//! glibc malloc tunables for the programs' large arrays, chosen per backend.
//!
//! A solve allocates gigabytes of fresh memory (element data, the trace matrix and its f32
//! copies, the multigrid setup's sparse matrices), and the kernel clears every fresh page on
//! its first touch. glibc maps each block above 32 MiB on its own and unmaps it when it is
//! freed, so memory that one stage frees comes back fresh to the next. What that costs
//! depends on the host:
//!
//! - **CUDA backend**: transparent huge pages for the mapped blocks (`glibc.malloc.hugetlb=1`)
//!   cut the host setup's page faults (benchmarks/history/cuda-pipeline.md, section 'The
//!   multigrid setup's host parts in parallel, and huge pages for CUDA runs').
//! - **CPU backend** (measured on a virtual machine with free page reporting, where the cost
//!   of a fresh page depends on what ran before): blocks come from the heap and are
//!   never returned to the system (`glibc.malloc.mmap_max=0`, `glibc.malloc.trim_threshold`
//!   at 1 TiB), so a stage reuses the memory an earlier one freed (fewer page faults, less
//!   system time; BENCHMARKS.md, section 'End to end on the CPU'); huge pages measured slower
//!   there. The process keeps its peak memory until it exits, which suits a program that runs
//!   one job.
//!
//! glibc reads its tunables once, at process start, so the program runs itself again with
//! the tunables added. A library embedding cannot do this for its host: it sets
//! `GLIBC_TUNABLES` in its environment.
use hdg::Backend;

/// The tunables of the CUDA backend's runs.
const CUDA_TUNABLES: &str = "glibc.malloc.hugetlb=1";

/// The tunables of the CPU backend's runs: no mapped blocks, no trimming below 1 TiB.
const CPU_TUNABLES: &str = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=1099511627776";

/// The tunables for `backend`'s runs.
pub fn tunables(backend: Backend) -> &'static str {
    match backend {
        Backend::Cpu => CPU_TUNABLES,
        Backend::Cuda => CUDA_TUNABLES,
    }
}

/// Runs the current program again with `backend`'s tunables added to `GLIBC_TUNABLES`, unless
/// a malloc tunable is set there already (by the user, or by this call before the exec), or
/// `HDG_MALLOC_TUNABLES=0` is set. Returns (and the program goes on with glibc's defaults)
/// when the program cannot be run again; does nothing off Linux with glibc.
pub fn enable(backend: Backend) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::os::unix::process::CommandExt;
        let current = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
        if current.contains("glibc.malloc.")
            || std::env::var_os("HDG_MALLOC_TUNABLES").is_some_and(|v| v == "0")
        {
            return;
        }
        let Ok(program) = std::env::current_exe() else { return };
        let added = tunables(backend);
        let tunables =
            if current.is_empty() { added.to_string() } else { format!("{current}:{added}") };
        // `exec` returns only when it failed; the program then goes on as it is.
        let _ = std::process::Command::new(program)
            .args(std::env::args_os().skip(1))
            .env("GLIBC_TUNABLES", tunables)
            .exec();
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = backend;
}
