//! Transparent huge pages for the programs' large arrays.
//!
//! A solve at 1e7 unknowns allocates gigabytes of fresh memory (element data, the trace matrix
//! and its f32 copy, the multigrid setup's sparse matrices) and touches it once: with 4 KiB
//! pages the kernel's page faults and page clearing take a large part of the setup (on the
//! H100 host, 0.3 to 0.4 s of a 1.5 s solve; BENCHMARKS.md). glibc's malloc asks for
//! transparent huge pages on the blocks it maps when the tunable `glibc.malloc.hugetlb=1` is
//! set, which matters under the kernel's THP mode "madvise", the default of many
//! distributions. glibc reads its tunables once, at process start, so a program that wants
//! them runs itself again with the tunable added. A library embedding cannot do this for its
//! host: set `GLIBC_TUNABLES=glibc.malloc.hugetlb=1` in its environment.
//!
//! Not everywhere a gain: on the 2-core development machine the CPU backend's whole run was
//! slower with them (the kernel's system time doubled, compacting memory for 2 MiB pages), so
//! `hdg` asks for them on the CUDA backend only.

/// The tunable this module adds.
const TUNABLE: &str = "glibc.malloc.hugetlb=1";

/// Runs the current program again with `glibc.malloc.hugetlb=1` added to `GLIBC_TUNABLES`,
/// unless it is set there already (by the user, or by this call before the exec), or
/// `HDG_HUGE_PAGES=0` is set. Returns (and the program goes on with small pages) when the
/// program cannot be run again; does nothing off Linux with glibc.
pub fn enable() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::os::unix::process::CommandExt;
        let current = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
        if current.contains("glibc.malloc.hugetlb")
            || std::env::var_os("HDG_HUGE_PAGES").is_some_and(|v| v == "0")
        {
            return;
        }
        let Ok(program) = std::env::current_exe() else { return };
        let tunables =
            if current.is_empty() { TUNABLE.to_string() } else { format!("{current}:{TUNABLE}") };
        // `exec` returns only when it failed; the program then goes on as it is.
        let _ = std::process::Command::new(program)
            .args(std::env::args_os().skip(1))
            .env("GLIBC_TUNABLES", tunables)
            .exec();
    }
}
