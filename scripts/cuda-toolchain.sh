#!/usr/bin/env bash
# Installs what the `cuda` feature needs to BUILD (not to run) on a machine without CUDA:
# nvcc 13.0 from the Python package registry into .cuda/venv, and an empty libcuda in
# .cuda/stub for cust's `-lcuda` (the driver loader, crates/hdg-backend-cuda/driver/, defines
# every driver entry point and opens the real libcuda.so.1 at run time; an empty library here
# makes the link fail if an entry point is missing from its list). Idempotent and fast when
# already done. Prints the environment to export.
#
#   eval "$(scripts/cuda-toolchain.sh)"               # then: cargo build --features cuda ...
#   eval "$(scripts/cuda-toolchain.sh --link-only)"   # no nvcc: with HDG_CUDA_KERNELS=none
#
# With a real CUDA install (/usr/local/cuda) none of this is needed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/.cuda"
venv="$dir/venv"
stub="$dir/stub"

link_only=false
[ "${1:-}" = "--link-only" ] && link_only=true

if ! $link_only && { [ -x /usr/local/cuda/bin/nvcc ] && [ -e /usr/local/cuda/lib64/stubs/libcuda.so ] || [ -e /usr/local/cuda/lib64/libcuda.so ]; }; then
  echo "export HDG_NVCC=/usr/local/cuda/bin/nvcc"
  exit 0
fi

# cust_raw's build script (find_cuda_helper) links from "$CUDA_LIBRARY_PATH/lib64".
if [ ! -e "$stub/lib64/libcuda.a" ] || [ -e "$stub/lib64/libcuda.so" ]; then
  rm -rf "$stub"
  mkdir -p "$stub/lib64"
  ar rcs "$stub/lib64/libcuda.a"
fi
echo "export CUDA_LIBRARY_PATH=$stub"
if $link_only; then
  echo "export HDG_CUDA_KERNELS=none"
  exit 0
fi

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" >&2
fi
nvcc="$(ls "$venv"/lib/python3*/site-packages/nvidia/cu13/bin/nvcc 2>/dev/null | head -n1 || true)"
if [ -z "$nvcc" ]; then
  # 13.0 exactly: the GPU machines' driver (580, CUDA 13.0) cannot JIT PTX from a newer nvcc.
  "$venv/bin/pip" install --quiet "nvidia-cuda-nvcc==13.0.*" "nvidia-nvvm==13.0.*" \
    "nvidia-cuda-crt==13.0.*" "nvidia-cuda-runtime==13.0.*" >&2
  nvcc="$(ls "$venv"/lib/python3*/site-packages/nvidia/cu13/bin/nvcc | head -n1)"
fi
cu13="$(dirname "$(dirname "$nvcc")")"

echo "export HDG_NVCC=$nvcc"
echo "export CUDA_PATH=$cu13"
