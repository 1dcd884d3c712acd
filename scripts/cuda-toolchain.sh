#!/usr/bin/env bash
# Installs what the `cuda` feature needs to BUILD (not to run) on a machine without CUDA:
# nvcc 13.0 from the Python package registry into .cuda/venv, and a link-only stub of
# libcuda.so in .cuda/stub (cust links -lcuda; the real driver library is loaded at run time
# on a GPU machine). Idempotent and fast when already done. Prints the environment to export.
#
#   eval "$(scripts/cuda-toolchain.sh)"   # then: cargo build --features cuda ...
#
# With a real CUDA install (/usr/local/cuda) none of this is needed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/.cuda"
venv="$dir/venv"
stub="$dir/stub"

if [ -x /usr/local/cuda/bin/nvcc ] && [ -e /usr/local/cuda/lib64/stubs/libcuda.so ] || [ -e /usr/local/cuda/lib64/libcuda.so ]; then
  echo "export HDG_NVCC=/usr/local/cuda/bin/nvcc"
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

# cust_raw's build script (find_cuda_helper) links from "$CUDA_LIBRARY_PATH/lib64", so the stub
# lives in .cuda/stub/lib64 and CUDA_LIBRARY_PATH names .cuda/stub.
if [ ! -e "$stub/lib64/libcuda.so" ]; then
  mkdir -p "$stub/lib64"
  # Every cu* entry point that cust_raw binds, as a dummy: enough to link, never to run.
  src="$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/cust_raw-*/src 2>/dev/null | head -n1 || true)"
  if [ -z "$src" ]; then
    (cd "$root" && cargo fetch >&2)
    src="$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/cust_raw-*/src | head -n1)"
  fi
  grep -ho 'pub fn cu[A-Za-z0-9_]*' "$src"/*.rs | sort -u | sed 's/pub fn \(.*\)/int \1(void) { return 999; }/' > "$stub/stub.c"
  gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$stub/lib64/libcuda.so" "$stub/stub.c" >&2
fi

echo "export HDG_NVCC=$nvcc"
echo "export CUDA_LIBRARY_PATH=$stub"
echo "export CUDA_PATH=$cu13"
