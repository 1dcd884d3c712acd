//! Compiles the CUDA kernels (`kernels/*.cu`) when the `cuda` feature is on; does nothing
//! otherwise, so a plain build needs no CUDA.
//!
//! Each `kernels/NAME.cu` gives two files in OUT_DIR: `NAME.sm_90.cubin` (SASS for compute
//! capability 9.0, H100 and H200, loaded without a JIT step) and `NAME.compute_75.ptx`
//! (portable: the driver JIT-compiles it for any other GPU from Turing on). No
//! `--use_fast_math`: the f64 kernels must keep IEEE division, square roots and denormals.
//!
//! nvcc is taken from `HDG_NVCC`, else `nvcc` on PATH, else `/usr/local/cuda/bin/nvcc`
//! (`eval "$(scripts/cuda-toolchain.sh)"` installs one and sets HDG_NVCC).
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "src/block_sizes.rs"]
#[allow(dead_code)]
mod block_sizes;
#[path = "src/element_instances.rs"]
#[allow(dead_code)]
mod element_instances;

// The manufactured solutions (the one description, in the core), their numbers on the device,
// and the generator of their device code.
#[path = "../hdg-core/src/manufactured.rs"]
#[allow(dead_code)]
mod manufactured;
#[path = "build/manufactured_code.rs"]
mod manufactured_code;
#[path = "src/solution_numbers.rs"]
mod solution_numbers;
use manufactured::{Arithmetic, Manufactured};

/// The targets: (output file suffix, nvcc output kind, nvcc -arch value).
const TARGETS: [(&str, &str, &str); 2] =
    [("sm_90.cubin", "-cubin", "sm_90"), ("compute_75.ptx", "-ptx", "compute_75")];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CARGO_FEATURE_CUDA");
    if env::var_os("CARGO_FEATURE_CUDA").is_none() {
        return;
    }
    println!("cargo:rerun-if-env-changed=HDG_NVCC");
    println!("cargo:rerun-if-changed=kernels");
    let nvcc = find_nvcc().unwrap_or_else(|| {
        panic!(
            "the `cuda` feature needs nvcc to compile kernels/*.cu, and none was found \
             (tried $HDG_NVCC, `nvcc` on PATH, /usr/local/cuda/bin/nvcc). On a machine without \
             CUDA run `eval \"$(scripts/cuda-toolchain.sh)\"` in the workspace root first."
        )
    });
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let kernel_dir =
        Path::new(&env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it")).join("kernels");
    let mut sources: Vec<PathBuf> = std::fs::read_dir(&kernel_dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", kernel_dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "cu" || x == "cuh"))
        .collect();
    sources.sort();
    for source in &sources {
        println!("cargo:rerun-if-changed={}", source.display());
    }
    // The kernels' instantiation lists, from the Rust sources of those facts.
    let generated = [
        ("block_sizes.cuh", block_sizes_header()),
        ("element_instances.cuh", element_instances_header()),
        // The manufactured solutions' device code, from their one description in the core.
        ("manufactured_solutions.cuh", manufactured_code::header()),
    ];
    for (name, text) in &generated {
        std::fs::write(out_dir.join(name), text)
            .unwrap_or_else(|e| panic!("cannot write {name}: {e}"));
    }
    println!("cargo:rerun-if-changed=src/block_sizes.rs");
    println!("cargo:rerun-if-changed=src/element_instances.rs");
    for input in
        ["../hdg-core/src/manufactured.rs", "build/manufactured_code.rs", "src/solution_numbers.rs"]
    {
        println!("cargo:rerun-if-changed={input}");
    }
    // Every (file, target) pair is an independent nvcc run: run them side by side (the element
    // kernels' SASS alone takes minutes of ptxas). No -lineinfo: it doubles the embedded
    // images, and every binary that links this crate carries them.
    let jobs: Vec<(&PathBuf, &str, &str, PathBuf)> = sources
        .iter()
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .flat_map(|source| {
            let stem =
                source.file_stem().expect("a .cu file has a stem").to_string_lossy().into_owned();
            let out_dir = &out_dir;
            TARGETS.iter().map(move |&(suffix, kind, arch)| {
                (source, kind, arch, out_dir.join(format!("{stem}.{suffix}")))
            })
        })
        .collect();
    // Every header by name (kernels/*.cuh and the generated ones), for the fingerprints.
    let mut headers: std::collections::HashMap<String, Vec<u8>> = sources
        .iter()
        .filter(|p| p.extension().is_some_and(|x| x == "cuh"))
        .map(|p| {
            let name = p.file_name().expect("a header has a name").to_string_lossy().into_owned();
            (name, std::fs::read(p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display())))
        })
        .collect();
    headers.extend(generated.into_iter().map(|(name, text)| (name.to_owned(), text.into_bytes())));
    let nvcc_version =
        Command::new(&nvcc).arg("--version").output().map(|o| o.stdout).unwrap_or_default();
    std::thread::scope(|scope| {
        let handles: Vec<_> = jobs
            .iter()
            // A job whose inputs (source, the headers it includes, target, nvcc) are those of the
            // output already in OUT_DIR is skipped: cargo reruns this script when any kernel file
            // changes, and recompiling an unchanged kernel file can cost minutes of ptxas.
            .filter_map(|job| {
                let (source, kind, arch, output_path) = job;
                let mut inputs = std::fs::read(source)
                    .unwrap_or_else(|e| panic!("cannot read {}: {e}", source.display()));
                for header in included_headers(&inputs, &headers) {
                    inputs.extend_from_slice(&headers[header]);
                }
                inputs.extend_from_slice(format!("{kind} {arch} -O3 -std=c++17").as_bytes());
                inputs.extend_from_slice(&nvcc_version);
                let fingerprint = format!("{:016x}", fnv1a(&inputs));
                let stamp = output_path.with_extension("fingerprint");
                let fresh = output_path.is_file()
                    && std::fs::read_to_string(&stamp).is_ok_and(|s| s == fingerprint);
                (!fresh).then_some((job, stamp, fingerprint))
            })
            .map(|((source, kind, arch, output_path), stamp, fingerprint)| {
                let (nvcc, kernel_dir, out_dir) = (&nvcc, &kernel_dir, &out_dir);
                scope.spawn(move || {
                    let output = Command::new(nvcc)
                        .arg(kind)
                        .arg(format!("-arch={arch}"))
                        .args(["-O3", "-std=c++17"])
                        .arg("-I")
                        .arg(kernel_dir)
                        .arg("-I")
                        .arg(out_dir)
                        .arg(source)
                        .arg("-o")
                        .arg(output_path)
                        .output()
                        .unwrap_or_else(|e| panic!("cannot run {}: {e}", nvcc.display()));
                    if !output.status.success() {
                        panic!(
                            "nvcc failed on {} (-arch={arch}):\n{}{}",
                            source.display(),
                            String::from_utf8_lossy(&output.stdout),
                            String::from_utf8_lossy(&output.stderr)
                        );
                    }
                    std::fs::write(&stamp, fingerprint)
                        .unwrap_or_else(|e| panic!("cannot write {}: {e}", stamp.display()));
                })
            })
            .collect();
        for handle in handles {
            if let Err(panic) = handle.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
}

/// `block_sizes.cuh`: `FOR_EACH_BLOCK_SIZE(X, T)` expands to `X(T, 1) .. X(T, MAX)` and
/// `FOR_EACH_TETRAHEDRON_BLOCK_SIZE(X, T)` to `X(T, n_f)` for the tetrahedra's larger faces.
fn block_sizes_header() -> String {
    let list = |sizes: &mut dyn Iterator<Item = usize>| {
        sizes.map(|b| format!("X(T, {b})")).collect::<Vec<_>>().join(" ")
    };
    format!(
        "// Generated by build.rs from src/block_sizes.rs: do not edit.\n#pragma once\n\
         #define FOR_EACH_BLOCK_SIZE(X, T) {}\n\
         #define FOR_EACH_TETRAHEDRON_BLOCK_SIZE(X, T) {}\n",
        list(&mut (1..=block_sizes::MAX_BLOCK_SIZE)),
        list(&mut block_sizes::TETRAHEDRON_BLOCK_SIZES.into_iter()),
    )
}

/// `element_instances.cuh`: the compiled orders and the bordered condensation's table.
/// `FOR_EACH_ELEMENT_ORDER(X, ...)` expands to `X(..., 1) .. X(..., MAX)`,
/// `FOR_EACH_THREAD_TETRAHEDRON_ORDER(X, ...)` to the thread design's tetrahedron orders, and
/// `FOR_EACH_BORDERED(X)` to
/// `X(T, CELL, NAME, K, NB, RW, TR, BOUNDS, G, GLOBAL_STAGE, LEFT, PW, SHARED)` per row of the
/// table (PW 0: the whole panel in one pass; SHARED: the bytes of dynamic shared memory that
/// src/design.rs launches the kernel with, `BorderedTuning::shared_bytes`, which the kernel
/// checks its layout against).
fn element_instances_header() -> String {
    use element_instances::{OutputStaging, BORDERED, BORDERED_SLACK};
    let orders = |max: usize| {
        (1..=max).map(|k| format!("X(__VA_ARGS__, {k})")).collect::<Vec<_>>().join(" ")
    };
    let bordered: Vec<String> = BORDERED
        .iter()
        .map(|t| {
            let cell = match t.cell {
                "tri" => "Tri",
                "tet" => "Tet",
                other => panic!("element_instances.rs: unknown cell {other}"),
            };
            let bounds = match t.min_blocks {
                0 => format!("({})", t.max_threads),
                blocks => format!("({}, {blocks})", t.max_threads),
            };
            format!(
                "    X({}, {cell}, {}, {}, {}, {}, {}, {bounds}, {}, {}, {}, {}, {})",
                t.precision,
                t.cell,
                t.k,
                t.step_columns,
                t.warp_groups,
                t.gram_rows,
                t.output_group(),
                t.staging == OutputStaging::Global,
                t.left_looking,
                t.panel_columns.unwrap_or(0),
                t.shared_bytes(),
            )
        })
        .collect();
    format!(
        "// Generated by build.rs from src/element_instances.rs: do not edit.\n#pragma once\n\
         #define FOR_EACH_ELEMENT_ORDER(X, ...) {}\n\
         #define FOR_EACH_THREAD_TETRAHEDRON_ORDER(X, ...) {}\n\
         #define BORDERED_SLACK {BORDERED_SLACK}\n\
         #define FOR_EACH_BORDERED(X) \\\n{}\n{}",
        orders(element_instances::MAX_ELEMENT_ORDER),
        orders(element_instances::MAX_THREAD_ORDER_TETRAHEDRON),
        bordered.join(" \\\n"),
        block_shared_values(),
    )
}

/// `BLOCK_SHARED_VALUES[DIM - 2][K][c]`: values of dynamic shared memory of the block-design
/// kernels from src/element_instances.rs's formulas, for c = 0 the condensation with its panel
/// in shared memory, 1 with the panel in global memory, 2 the recovery, 3 the
/// postprocessing (K = 0 unused); the kernels' instantiations check their layouts against it.
fn block_shared_values() -> String {
    use element_instances::{
        condense_block_shared_values, polynomials, postprocess_block_shared_values,
        recover_block_shared_values, MAX_ELEMENT_ORDER,
    };
    let dims: Vec<String> = [2usize, 3]
        .iter()
        .map(|&d| {
            let orders: Vec<String> = (0..=MAX_ELEMENT_ORDER)
                .map(|k| {
                    let (n, nl, n_post) = match k {
                        0 => (0, 0, 1),
                        k => (
                            polynomials(d, k),
                            (d + 1) * polynomials(d - 1, k),
                            polynomials(d, k + 1),
                        ),
                    };
                    format!(
                        "{{{}, {}, {}, {}}}",
                        condense_block_shared_values(n, nl, true),
                        condense_block_shared_values(n, nl, false),
                        recover_block_shared_values(n, nl),
                        postprocess_block_shared_values(d, n, n_post),
                    )
                })
                .collect();
            format!("    {{{}}}", orders.join(", "))
        })
        .collect();
    format!(
        "constexpr unsigned long long BLOCK_SHARED_VALUES[2][{}][4] = {{\n{}}};\n",
        MAX_ELEMENT_ORDER + 1,
        dims.join(",\n")
    )
}

/// The headers (by name, among `headers`) that a kernel file includes, directly or through
/// other headers.
fn included_headers<'a>(
    source: &[u8],
    headers: &'a std::collections::HashMap<String, Vec<u8>>,
) -> Vec<&'a str> {
    let mut found: Vec<&'a str> = Vec::new();
    let mut pending = vec![source];
    while let Some(text) = pending.pop() {
        for line in String::from_utf8_lossy(text).lines() {
            let Some(rest) = line.trim_start().strip_prefix("#include \"") else { continue };
            let Some(name) = rest.split('"').next() else { continue };
            if let Some((key, bytes)) = headers.get_key_value(name) {
                if !found.contains(&key.as_str()) {
                    found.push(key.as_str());
                    pending.push(bytes);
                }
            }
        }
    }
    found.sort_unstable();
    found
}

/// nvcc from HDG_NVCC, PATH, or the default CUDA install.
fn find_nvcc() -> Option<PathBuf> {
    if let Some(p) = env::var_os("HDG_NVCC") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Some(p);
        }
        println!("cargo:warning=HDG_NVCC={} is not a file; looking elsewhere", p.display());
    }
    if let Some(path) = env::var_os("PATH") {
        for dir in env::split_paths(&path) {
            let candidate = dir.join("nvcc");
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    let default = PathBuf::from("/usr/local/cuda/bin/nvcc");
    default.is_file().then_some(default)
}

/// 64-bit FNV-1a: a fingerprint of a job's inputs (not a security measure).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}
