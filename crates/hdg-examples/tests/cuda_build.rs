//! A program built with the `cuda` feature starts on any machine: the CUDA driver library is
//! opened when CUDA is first initialised, not when the program starts
//! (crates/hdg-backend-cuda/driver/). On a machine without the NVIDIA driver it prints its
//! version, solves on the CPU with the plain build's numbers, and refuses `--backend cuda`
//! saying why.
//!
//! Ignored unless `HDG_CUDA_BUILD` names such a binary: `.ci/run` builds one (with
//! `HDG_CUDA_KERNELS=none`, so that it needs no nvcc) and runs this test with `--ignored`.
use std::process::Command;

fn run(program: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(program).args(args).output().expect("runs the program");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Whether the dynamic loader knows a CUDA driver library on this machine.
fn driver_installed() -> bool {
    let listed = Command::new("/sbin/ldconfig").arg("-p").output();
    listed.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("libcuda.so.1"))
}

#[test]
#[ignore = "needs a CUDA-enabled hdg in HDG_CUDA_BUILD (.ci/run builds one)"]
fn the_cuda_build_starts_without_a_driver() {
    let cuda_build = std::env::var("HDG_CUDA_BUILD").expect("HDG_CUDA_BUILD names the binary");
    let plain = env!("CARGO_BIN_EXE_hdg");

    let (code, out, err) = run(&cuda_build, &["--version"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("hdg "), "{out}");

    let solve = ["solve", "--mesh", "square:8", "--order", "2", "--json"];
    let (code, out, err) = run(&cuda_build, &[&solve[..], &["--backend", "cpu"]].concat());
    assert_eq!(code, 0, "{err}");
    let (plain_code, plain_out, plain_err) = run(plain, &solve);
    assert_eq!(plain_code, 0, "{plain_err}");
    let errors = |text: &str| {
        let json: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
        json["errors"].clone()
    };
    assert_eq!(errors(&out), errors(&plain_out), "the CUDA build's CPU solve differs");

    let (code, _, err) =
        run(&cuda_build, &["solve", "--mesh", "square:4", "--order", "1", "--backend", "cuda"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.starts_with("hdg: error: ") && err.lines().count() == 1, "{err}");
    if driver_installed() {
        // A GPU machine: this build carries no kernels (HDG_CUDA_KERNELS=none) or has none.
        assert!(err.contains("CUDA"), "{err}");
    } else {
        assert!(err.contains("NVIDIA driver library could not be loaded"), "{err}");
        assert!(err.contains("libcuda.so.1"), "{err}");
    }
}
