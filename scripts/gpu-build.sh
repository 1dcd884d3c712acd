#!/usr/bin/env bash
# Builds everything the GPU machine runs (it has no Rust toolchain) with the `cuda` feature,
# stripped, into one archive .gpuz/bin.tar.xz (.gpuz/ is ignored by git and must stay small
# enough to travel with the working tree: the script fails above 60 MiB):
#
#   gpu-tests            crates/hdg-backend-cuda/tests/gpu.rs (CPU-vs-GPU, fixed cases)
#   cuda-lib-tests       the unit tests of hdg-backend-cuda built with `cuda` (the modules that
#                        exist only there, e.g. the built-in operators' table; no device needed,
#                        but the CUDA build, which CI does not have)
#   matrix-free-tests    crates/hdg-backend-cuda/tests/matrix_free.rs (when that target exists)
#   cross-backend-tests  tests/tests/cross_backend.rs (CPU-vs-GPU property tests, proptest)
#   pipeline-tests       tests/tests/pipeline/ (the pipeline tests, each run per backend)
#   facade-tests         crates/hdg/tests/facade.rs (the embedding API, CUDA against CPU)
#   gpu-bench            SpMV benchmark
#   condense-bench       condensation benchmark (when that target exists)
#   coefficient-bench    cost of coefficients at points and Neumann/Robin faces
#   hdg                  the program, with --backend cuda
#
# With HDG_GPU_DISTRIBUTED=1 everything is built with the `distributed` feature as well (MPI
# ranks, one GPU each; every binary then links OpenMPI, which the GPU machine gets from
# scripts/mpi-runtime.sh: carry .mpi), and two more binaries are packed:
#
#   distributed-tests     crates/hdg/tests/distributed.rs (its cases run mpirun themselves)
#   distributed-cli-tests crates/hdg-examples/tests/distributed_cli.rs
#
# and .gpuz/MANIFEST (what was packed, from which commit, what was skipped).
#
# Every binary embeds the same kernel images (PTX and sm_90 SASS, some 60 MB), so the binaries
# are compressed together, by xz with a dictionary larger than one binary: the second and later
# copies of the kernels cost next to nothing (6 binaries of 65-70 MB: about 10 MB; gzip per
# file: 12 MB each). gpu-run.sh unpacks it with xz, or with Python's lzma where xz is missing.
#
#   scripts/gpu-build.sh            # here
#   bash scripts/gpu-run.sh         # there (from the repository root)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
eval "$(scripts/cuda-toolchain.sh)"
# A separate target directory: a CUDA-linked hdg must never replace the plain one, which
# needs no libcuda on machines without a GPU.
target=target/cuda
# Staging outside .gpuz/, then moved in: two builds at once never mix their files.
artifacts="$(mktemp)"
stage="$(mktemp -d)"
trap 'rm -rf "$artifacts" "$stage"' EXIT
# One cargo invocation for every target, so that all binaries share one build of
# hdg-backend-cuda (one feature set: the same kernels in every binary, and nvcc runs once).
# Targets that other work adds are taken when they are declared.
targets=(--test gpu --test cross_backend --test pipeline --test facade --bin hdg --bin gpu-bench)
declared() { grep -q "^name = \"$1\"" crates/hdg-backend-cuda/Cargo.toml crates/hdg-bench/Cargo.toml; }
declared matrix_free && targets+=(--test matrix_free)
declared condense-bench && targets+=(--bin condense-bench)
declared coefficient-bench && targets+=(--bin coefficient-bench)
features=hdg-backend-cuda/cuda,hdg-examples/cuda,hdg-bench/cuda,tests/cuda,hdg/cuda
if [ "${HDG_GPU_DISTRIBUTED:-0}" = 1 ]; then
  features+=,hdg/distributed,hdg-examples/distributed
  targets+=(--test distributed --test distributed_cli)
fi
# JSON messages on stdout (the artifacts and their executables), diagnostics on stderr.
cargo build --release --target-dir "$target" -p hdg-backend-cuda -p hdg-examples -p hdg-bench -p tests -p hdg \
  --features "$features" "${targets[@]}" \
  --message-format=json-render-diagnostics > "$artifacts"
# The library's own unit tests with `cuda`: a second invocation with the same features reuses the
# build above (build.rs and nvcc do not run again).
cargo test --no-run --release --target-dir "$target" -p hdg-backend-cuda --features cuda --lib \
  --message-format=json-render-diagnostics >> "$artifacts"

# (kind, target name) -> packed name; the executables from this build's messages (never a stale
# binary from an older build lying in target/cuda/release/deps).
wanted="test:gpu:gpu-tests lib:hdg_backend_cuda:cuda-lib-tests test:matrix_free:matrix-free-tests test:cross_backend:cross-backend-tests
test:pipeline:pipeline-tests test:facade:facade-tests
bin:gpu-bench:gpu-bench bin:condense-bench:condense-bench bin:coefficient-bench:coefficient-bench
bin:hdg:hdg test:distributed:distributed-tests test:distributed_cli:distributed-cli-tests"
executables="$(python3 - "$artifacts" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        t = m["target"]
        print(f'{t["kind"][0]}:{t["name"]} {m["executable"]}')
EOF
)"

mkdir -p "$stage/bin"
manifest="$stage/MANIFEST"
{
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) from $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (with uncommitted changes)')"
  [ "${HDG_GPU_DISTRIBUTED:-0}" = 1 ] && echo "features: $features"
} > "$manifest"
for entry in $wanted; do
  key="${entry%:*}"; name="${entry##*:}"
  src="$(printf '%s\n' "$executables" | awk -v k="$key" '$1 == k { print $2 }' | tail -n1)"
  if [ -z "$src" ] || [ ! -f "$src" ]; then
    echo "skipped $name: no target ${key#*:} (${key%%:*}) in this tree" | tee -a "$manifest" >&2
    continue
  fi
  strip -o "$stage/bin/$name" "$src"
  echo "$name <- ${src#"$root"/} ($(stat -c %s "$stage/bin/$name") bytes stripped)" >> "$manifest"
done
# Preset 2 (fast match finder) with a 192 MiB dictionary: 30 s on one core, and the copies of the
# kernel images across binaries are found (the dictionary spans more than one binary).
(cd "$stage/bin" && tar -cf - -- *) | xz -T1 --lzma2=preset=2,dict=192MiB > "$stage/bin.tar.xz"
mkdir -p .gpuz
rm -rf .gpuz/stage .gpuz/*.gz # what older versions of this script left
mv -f "$stage/bin.tar.xz" .gpuz/bin.tar.xz
mv -f "$manifest" .gpuz/MANIFEST
cat .gpuz/MANIFEST
total="$(du -cb .gpuz | tail -n1 | cut -f1)"
echo "total: $total bytes in .gpuz/"
if [ "$total" -gt $((60 << 20)) ]; then
  echo "error: .gpuz/ is over 60 MiB (the working tree carried to the GPU machine is capped at 64 MiB)" >&2
  exit 1
fi
