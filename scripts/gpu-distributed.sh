#!/usr/bin/env bash
# GPU ranks on a machine of several GPUs, from what `HDG_GPU_DISTRIBUTED=1 scripts/gpu-build.sh`
# packed into .gpuz/ and OpenMPI's runtime in .mpi/ (scripts/mpi-runtime.sh fetch; the device
# tool's call carries .mpi). Run from the repository root:
#
#   bash scripts/gpu-distributed.sh tests          # CUDA ranks against the CPU (1 to 4 ranks)
#   bash scripts/gpu-distributed.sh weak2d         # 1e7 trace unknowns per GPU, square, k = 3
#   bash scripts/gpu-distributed.sh weak3d         # the same on cube meshes
#   bash scripts/gpu-distributed.sh strong3d       # cube:63 k = 3 (3.0e7) on 1, 2, 4 GPUs
#   bash scripts/gpu-distributed.sh largest3d="N .." # cube:N k = 3 on every GPU, for each N
#
# Several sections in one call run one after the other (tests weak2d ...).
#
# Each run prints one line: configuration, wall seconds of the whole mpirun, and the program's
# JSON (rank 0's). Output also goes to ${OUT:-/tmp/hdg-dist}. One rank per GPU: the program
# takes device (rank on the node) mod (devices).
set -uo pipefail
out="${OUT:-/tmp/hdg-dist}"
b=/tmp/hdg-bin
mkdir -p "$out"
if [ ! -x "$b/hdg" ]; then
  mkdir -p "$b"
  if command -v xz > /dev/null; then
    xz -dc .gpuz/bin.tar.xz | tar -x -C "$b"
  else
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' .gpuz/bin.tar.xz "$b"
  fi
fi
# shellcheck disable=SC1091
source scripts/mpi-runtime.sh env
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/device.txt"
threads=$(( $(nproc) / $(nvidia-smi -L | wc -l) ))

# run NP MESH [extra hdg arguments]: one mpirun of `hdg solve --backend cuda --order 3`.
run() {
  local np="$1" mesh="$2"
  shift 2
  local t0=$EPOCHREALTIME line
  line="$(mpirun -np "$np" --bind-to none -x RAYON_NUM_THREADS="$threads" "$b/hdg" solve \
    --mesh "$mesh" --order 3 --backend cuda --json "$@" 2>>"$out/stderr.log")"
  local rc=$?
  local wall
  wall=$(python3 -c "print(round($EPOCHREALTIME - $t0, 3))")
  echo "np=$np mesh=$mesh rc=$rc wall=$wall $line" | tee -a "$out/runs.log"
}

# plain MESH: the same program without mpirun (one process, one GPU): the baseline.
plain() {
  local t0=$EPOCHREALTIME line
  line="$(RAYON_NUM_THREADS="$threads" "$b/hdg" solve --mesh "$1" --order 3 --backend cuda --json \
    2>>"$out/stderr.log")"
  local rc=$?
  echo "plain mesh=$1 rc=$rc wall=$(python3 -c "print(round($EPOCHREALTIME - $t0, 3))") $line" |
    tee -a "$out/runs.log"
}

# fits NP: whether the machine has NP GPUs.
fits() { [ "$1" -le "$gpus" ]; }
gpus=$(nvidia-smi -L | wc -l)

for section in "$@"; do
case "$section" in
  tests)
    "$b/distributed-tests" --ignored --exact cuda_ranks_agree_with_the_cpu --nocapture \
      --test-threads 1 2>&1 | tee "$out/tests.log" | grep -E "^test |test result|rank |panicked"
    ;;
  weak2d)
    plain square:913
    for c in "1 square:913" "2 square:1291" "4 square:1826"; do fits $c && run $c; done
    ;;
  weak3d)
    plain cube:44
    for c in "1 cube:44" "2 cube:55" "4 cube:69"; do fits $c && run $c; done
    ;;
  strong3d)
    plain cube:63
    for np in 1 2 4; do fits "$np" && run "$np" cube:63; done
    ;;
  largest3d=*)
    # Device memory in use on each GPU, sampled every 100 ms by nvidia-smi during the run; the
    # peak per GPU (above what was in use before it) follows the run's line.
    for n in ${section#largest3d=}; do
      nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits -lms 100 \
        > "$out/memory-$n.csv" &
      sampler=$!
      run "$gpus" "cube:$n"
      kill "$sampler"
      awk -F', ' '{ if ($2 > peak[$1]) peak[$1] = $2 } END { for (g in peak) printf "gpu %s peak %d MiB\n", g, peak[g] }' \
        "$out/memory-$n.csv" | sort | tee -a "$out/runs-memory.log"
    done
    ;;
  *)
    echo "usage: scripts/gpu-distributed.sh [tests|weak2d|weak3d|strong3d|largest3d=\"N ..\"]..." >&2
    exit 2
    ;;
esac
done
