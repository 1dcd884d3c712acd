#!/usr/bin/env bash
# The whole process on one GPU, the build before against this one in the same call: for each
# case, `hdg solve --backend cuda --tol 1e-9 --json`, the wall time measured from outside
# (start to exit) beside the pipeline's total and the program's own account of its wall time
# (`process` in the JSON, this build only). Run from the repository root, carrying .gpuz (this
# build, HDG_GPU_DISTRIBUTED=0 or 1) and .gpuz-old/hdg-old.tar.xz (the earlier program alone):
#
#   bash scripts/gpu-host-work.sh "square:2800 3" "square:1054 2" ...   # (mesh order) pairs
#
# Output: one line per run, also in ${OUT:-/tmp/hdg-host}/runs.log, and each run's JSON there.
set -uo pipefail
out="${OUT:-/tmp/hdg-host}"
b=/tmp/hdg-bin
mkdir -p "$out" "$b"
unpack() { xz -dc "$1" 2>/dev/null | tar -x -C "$b" ||
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' "$1" "$b"; }
[ -x "$b/hdg" ] || unpack .gpuz/bin.tar.xz
[ -x "$b/hdg-old" ] || unpack .gpuz-old/hdg-old.tar.xz
if [ -d .mpi ] && ldd "$b/hdg" | grep -q libmpi; then
  # shellcheck disable=SC1091
  source scripts/mpi-runtime.sh env
fi
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1 | tee "$out/device.txt"
for case in "$@"; do
  read -r mesh order <<< "$case"
  for program in hdg-old hdg; do
    t0=$EPOCHREALTIME
    line="$(CUDA_VISIBLE_DEVICES=0 "$b/$program" solve --mesh "$mesh" --order "$order" \
      --backend cuda --tol 1e-9 --json 2>>"$out/stderr.log")"
    rc=$?
    printf '%s\n' "$line" > "$out/$program-${mesh/:/-}-k$order.json"
    wall=$(python3 -c "print(round($EPOCHREALTIME - $t0, 3))")
    summary="$(python3 -c '
import json, sys
try:
    v = json.loads(sys.argv[1])
except ValueError:
    print("no JSON"); sys.exit()
t = v["timings_s"]; p = v.get("process") or {}; d = v.get("device_memory") or {}
stages = " ".join(f"{k}={t[k]:.3f}" for k in ("setup", "condense", "solve", "postprocess", "total"))
proc = " ".join(f"{k[:-2]}={x:.3f}" for k, x in p.items())
bpd = d.get("peak_bytes_per_trace_dof")
at = d.get("peak_at_s")
dofs, its, u = v["trace_dofs"], v["iterations"], v["errors"]["u"]
print(f"dofs={dofs:.3e} its={its} {stages} u={u:.4e}"
      + (f" device_bytes_per_dof={bpd:.1f}" if bpd else "")
      + (f" peak_at={at:.3f}" if at is not None else "")
      + (f" process: {proc}" if proc else ""))
' "$line")"
    echo "$program mesh=$mesh k=$order rc=$rc wall=$wall $summary" | tee -a "$out/runs.log"
  done
done
