#!/usr/bin/env bash
# Runs, on a GPU machine, what scripts/gpu-build.sh built: the CPU-versus-GPU tests, the SpMV
# benchmark with cuSPARSE on the same matrices, and CPU-vs-GPU end-to-end solves.
# Output goes to ${OUT:-/tmp/hdg-gpu}. Needs the system's libcuda (never the build stub).
set -uo pipefail
out="${OUT:-/tmp/hdg-gpu}"
mkdir -p "$out" /tmp/hdg-bin
for f in gpu-tests gpu-bench hdg; do
  gunzip -c ".gpuz/$f.gz" > "/tmp/hdg-bin/$f" && chmod +x "/tmp/hdg-bin/$f"
done
b=/tmp/hdg-bin
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/device.txt"
"$b/gpu-tests" --ignored --test-threads 1 --nocapture 2>&1 | tee "$out/tests.log" | grep -E "^test .*(ok|FAILED)$|test result"
for k in 2 4; do
  for backend in cpu cuda; do
    "$b/hdg" solve --mesh square:64 --order "$k" --backend "$backend" --json
  done
done 2>&1 | tee "$out/cli.log"
if [ "${HDG_GPU_BENCH:-0}" = 1 ]; then
  "$b/gpu-bench" --dofs 1e7 --orders 1,2,3,4,5,6 --export /tmp/csr 2>&1 | tee "$out/bench.log" | grep -vE "uploaded|built on|exported"
  python3 crates/hdg-backend-cuda/scripts/cusparse_spmv.py /tmp/csr 2>&1 | tee "$out/cusparse.log"
fi
