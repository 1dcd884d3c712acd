#!/usr/bin/env bash
# Builds everything the GPU machine runs (it has no Rust toolchain) with the `cuda` feature:
# the GPU test binary, gpu-bench and the hdg program, stripped and compressed into .gpuz/
# (ignored by git, small enough to travel with the working tree).
#
#   scripts/gpu-build.sh            # here
#   bash scripts/gpu-run.sh         # there (from the repository root)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
eval "$(scripts/cuda-toolchain.sh)"
# A separate target directory: a CUDA-linked hdg must never replace the plain one, which
# needs no libcuda on machines without a GPU.
cargo build --release --target-dir target/cuda -p hdg-backend-cuda -p hdg-examples --features hdg-backend-cuda/cuda,hdg-examples/cuda --all-targets
tests="$(ls -t target/cuda/release/deps/gpu-* | grep -v '\.d$' | head -n1)"
mkdir -p .gpuz
for pair in "$tests:gpu-tests" "target/cuda/release/gpu-bench:gpu-bench" "target/cuda/release/hdg:hdg"; do
  src="${pair%%:*}"; name="${pair##*:}"
  strip -o ".gpuz/$name" "$src"
  gzip -f -6 ".gpuz/$name"
done
ls -la .gpuz
