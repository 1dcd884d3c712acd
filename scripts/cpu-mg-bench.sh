#!/usr/bin/env bash
# The CPU benchmark of the multigrid preconditioner (BENCHMARKS.md, section 'The multigrid
# preconditioner'), in one run on this machine: `hdg solve --solver pcg-mg` on square:N
# (N = 64..1024, k = 1..4) and cube:N, against our direct and block-Jacobi solvers (up to the
# sizes they finish in the time given) and NGSolve's BDDC-preconditioned CG
# (../shared/baselines/ngsolve_hdg.py, in a virtual environment of its own: NGSOLVE_PY, default
# /work/.ngs/bin/python).
#
#   bash scripts/cpu-mg-bench.sh [sections...]    # sections: mg2d mg3d reference ngsolve
#
# Every hdg run prints one JSON line (hdg solve --json) into ${OUT:-/tmp/hdg-cpu}/NAME.jsonl;
# the summary tables are printed at the end (python3).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${OUT:-/tmp/hdg-cpu}"
mkdir -p "$out"
hdg="$root/target/release/hdg"
[ -x "$hdg" ] || (cd "$root" && cargo build --release --bin hdg)
solve() { # solve FILE ARGS...
  local file="$1"; shift
  echo "== hdg solve $*" >&2
  timeout "${HDG_RUN_LIMIT_S:-600}" "$hdg" solve "$@" --json 2>/dev/null | tee -a "$out/$file.jsonl"
}
sections="${*:-mg2d mg3d reference ngsolve}"
for section in $sections; do
  case "$section" in
    mg2d)
      for n in 64 128 256 512 1024; do
        for k in 1 2 3 4; do
          solve mg2d --mesh "square:$n" --order "$k" --solver pcg-mg
        done
      done ;;
    mg3d)
      for n in 4 8 16 24; do
        for k in 1 2 3; do
          solve mg3d --mesh "cube:$n" --order "$k" --solver pcg-mg
        done
      done ;;
    reference)
      for n in 64 128 256 512; do
        for solver in direct pcg-block-jacobi; do
          solve reference --mesh "square:$n" --order 3 --solver "$solver"
        done
      done ;;
    ngsolve)
      py="${NGSOLVE_PY:-/work/.ngs/bin/python}"
      # The script's defaults (interior-penalty HDG, CG to 1e-12 in its preconditioned norm), as
      # for the figures in ../shared/baselines/README.md.
      "$py" "$root/../shared/baselines/ngsolve_hdg.py" --form "${NGSOLVE_FORM:-iphdg}" --threads 2 \
        --n 256 512 --k 3 --reps 1 --csv "$out/ngsolve.csv" 2>&1 | tee "$out/ngsolve.log" ;;
    *) echo "unknown section $section" >&2; exit 2 ;;
  esac
done
