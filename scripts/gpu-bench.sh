#!/usr/bin/env bash
# The GPU benchmarks of BENCHMARKS.md, section by section, from the binaries that
# scripts/gpu-build.sh packed (run from the repository root on the GPU machine, after
# scripts/gpu-run.sh has unpacked them to /tmp/hdg-bin, or with HDG_UNPACK=1).
#
#   bash scripts/gpu-bench.sh condense      # condensation designs, 2D and 3D, and PyTorch
#   bash scripts/gpu-bench.sh spmv3d        # 3D DBF SpMV against the copy (k = 1..4, 2e6 dofs)
#   bash scripts/gpu-bench.sh matrix-free   # matrix-free operator against the DBF SpMV
#   bash scripts/gpu-bench.sh e2e3d         # 3D end to end, cuda against all CPU cores
#   bash scripts/gpu-bench.sh e2e2d         # 2D end to end at 1e7 dofs, cuda against all cores
#                                           # (HDG_E2E_ORDERS="2:1054 4:816", HDG_E2E_BACKENDS="cuda:dbf cpu:dbf")
#   bash scripts/gpu-bench.sh mg            # pcg-mg against pcg-block-jacobi at 1e7 dofs (2D k = 2,
#                                           # 4; 3D k = 3), and the DBF SpMV of the same sizes
#                                           # (HDG_MG_CASES="square:1054:2 ...", HDG_MG_SOLVERS)
#
# Output goes to ${OUT:-/tmp/hdg-gpu}.
set -uo pipefail
out="${OUT:-/tmp/hdg-gpu}"
b=/tmp/hdg-bin
mkdir -p "$out"
if [ "${HDG_UNPACK:-0}" = 1 ] || [ ! -x "$b/hdg" ]; then
  rm -rf "$b" && mkdir -p "$b"
  xz -dc .gpuz/bin.tar.xz | tar -x -C "$b"
fi
solve() { # solve LABEL ARGS...: one hdg solve, its JSON kept
  local label="$1"; shift
  echo "== hdg solve $*" >&2
  "$b/hdg" solve "$@" --json 2>>"$out/e2e-stderr.log" | tee -a "$out/$label.jsonl"
}
for section in "$@"; do
  case "$section" in
    condense)
      for d in 2 3; do
        "$b/condense-bench" --dims "$d" --export "/tmp/cx$d" ${HDG_CONDENSE_ARGS:-} 2>&1 | tee "$out/condense-$d.log"
        python3 crates/hdg-backend-cuda/scripts/torch_condense.py "/tmp/cx$d" 2>&1 | tee "$out/torch-$d.log"
      done ;;
    spmv3d)
      "$b/gpu-bench" --dim 3 --dofs "${HDG_DOFS_3D:-2e6}" --orders 1,2,3,4 2>&1 | tee "$out/spmv3d.log" ;;
    matrix-free)
      "$b/gpu-bench" --matrix-free --dofs 1e7 --orders 1,2,3,4,5,6 2>&1 | tee "$out/matrix-free-2d.log"
      "$b/gpu-bench" --matrix-free --dim 3 --dofs 2e6 --orders 1,2,3 2>&1 | tee "$out/matrix-free-3d.log" ;;
    e2e3d)
      # About 1e6 trace dofs or more: cube:N with 12 N^3 faces of (k+1)(k+2)/2 unknowns.
      for kn in 1:30 2:24 3:21 4:18; do
        k="${kn%:*}"; n="${kn#*:}"
        for backend in cuda cpu; do
          solve e2e3d --mesh "cube:$n" --order "$k" --backend "$backend" --solver pcg-block-jacobi --tol 1e-9
        done
      done ;;
    e2e2d)
      # HDG_E2E_BACKENDS picks the runs (default: both CUDA operators, then the CPU); the CUDA
      # runs print the phases of their setup and error norms (HDG_CUDA_PROFILE) to the log.
      for kn in ${HDG_E2E_ORDERS:-2:1054 4:816}; do
        k="${kn%:*}"; n="${kn#*:}"
        for backend in ${HDG_E2E_BACKENDS:-cuda:dbf cuda:matrix-free cpu:dbf}; do
          HDG_CUDA_PROFILE=1 solve e2e2d --mesh "square:$n" --order "$k" --backend "${backend%:*}" \
            --operator "${backend#*:}" --solver pcg-jacobi --tol 1e-9
        done
      done ;;
    mg)
      # About 1e7 trace dofs: square:N has (k+1)(3N^2-2N), cube:N about 12 N^3 (k+1)(k+2)/2.
      # Tolerance 1e-9: at 1e7 dofs 1e-10 lies below the f64 attainable accuracy.
      for case in ${HDG_MG_CASES:-square:1054:2 square:816:4 cube:44:3}; do
        mesh="${case%:*}"; k="${case##*:}"
        for solver in ${HDG_MG_SOLVERS:-pcg-mg pcg-block-jacobi}; do
          solve mg --mesh "$mesh" --order "$k" --backend cuda --solver "$solver" --tol 1e-9
        done
      done
      "$b/gpu-bench" --dofs 1e7 --orders 2,4 2>&1 | tee "$out/mg-spmv-2d.log"
      "$b/gpu-bench" --dim 3 --dofs 1e7 --orders 3 2>&1 | tee "$out/mg-spmv-3d.log" ;;
    *) echo "unknown section $section" >&2; exit 2 ;;
  esac
done
