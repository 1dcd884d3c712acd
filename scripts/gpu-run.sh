#!/usr/bin/env bash
# Runs, on a GPU machine, what scripts/gpu-build.sh packed into .gpuz/ (run from the repository
# root; needs the system's libcuda, never the build stub, and no Rust toolchain):
#
#   1. every GPU test binary there (gpu-tests, cuda-lib-tests, matrix-free-tests,
#      cross-backend-tests, pipeline-tests, facade-tests), with
#      --include-ignored (the GPU tests are #[ignore]d so that they never pass without a device);
#   2. CPU-vs-GPU end-to-end solves with hdg;
#   3. the SpMV benchmark with cuSPARSE on the same matrices (HDG_GPU_BENCH=1 only);
#   4. memory: the largest 2D problem at order 3 that fits on the device, with the peak device
#      memory per trace dof (see memory_sweep below).
#
# Sections: HDG_GPU_TESTS=0, HDG_GPU_CLI=0, HDG_GPU_MEMORY=0 skip one; HDG_GPU_BENCH=1 adds the
# benchmark. HDG_GPU_ONLY="cross-backend-tests" runs only the named test binaries. Output goes to
# ${OUT:-/tmp/hdg-gpu}; the exit status is 1 when a test binary failed.
#
# Typical calls (each well under 10 minutes):
#   HDG_GPU_MEMORY=0 bash scripts/gpu-run.sh                    # tests and CLI
#   HDG_GPU_TESTS=0 HDG_GPU_CLI=0 bash scripts/gpu-run.sh       # the memory sweep alone
set -uo pipefail
out="${OUT:-/tmp/hdg-gpu}"
b=/tmp/hdg-bin
rm -rf "$b"
mkdir -p "$out" "$b"
if [ -f .gpuz/bin.tar.xz ]; then
  if command -v xz > /dev/null; then
    xz -dc .gpuz/bin.tar.xz | tar -x -C "$b"
  else
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' .gpuz/bin.tar.xz "$b"
  fi
fi
for gz in .gpuz/*.gz; do # an older build's per-file archives
  [ -e "$gz" ] || continue
  f="$(basename "$gz" .gz)"
  gunzip -c "$gz" > "$b/$f" && chmod +x "$b/$f"
done
[ -f .gpuz/MANIFEST ] && cp .gpuz/MANIFEST "$out/MANIFEST"
# A build with the distributed feature links OpenMPI: its runtime from .mpi/ (scripts/mpi-runtime.sh).
if grep -q "distributed" .gpuz/MANIFEST 2>/dev/null; then
  # shellcheck disable=SC1091
  source scripts/mpi-runtime.sh env
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/device.txt"
status=0

# 1. Tests.
if [ "${HDG_GPU_TESTS:-1}" = 1 ]; then
  for t in ${HDG_GPU_ONLY:-gpu-tests cuda-lib-tests matrix-free-tests cross-backend-tests pipeline-tests facade-tests}; do
    if [ ! -x "$b/$t" ]; then
      echo "== $t: not in .gpuz (not built: its target does not exist yet?), skipped"
      continue
    fi
    echo "== $t"
    start=$SECONDS
    "$b/$t" --include-ignored --test-threads 1 --nocapture > "$out/$t.log" 2>&1
    rc=$?
    grep -E "^test .*(ok|FAILED|ignored)$|^test result" "$out/$t.log"
    if [ $rc -ne 0 ]; then
      echo "!! $t FAILED (exit $rc) in $((SECONDS - start)) s; full log: $out/$t.log"
      echo "   failed tests:"
      sed -n '/^failures:$/,$p' "$out/$t.log" | grep -E '^    [A-Za-z0-9_:]+$' | sort -u
      grep -E "panicked at|minimal failing case|disagree|Error|error" "$out/$t.log" | head -n 20
      status=1
    else
      echo "   $t passed in $((SECONDS - start)) s"
    fi
    # The property tests print their largest differences per quantity.
    grep -A14 "largest differences" "$out/$t.log" | grep -E "largest|^  " || true
  done
fi

# 2. CPU and GPU end to end.
if [ "${HDG_GPU_CLI:-1}" = 1 ]; then
  for k in 2 4; do
    for backend in cpu cuda; do
      "$b/hdg" solve --mesh square:64 --order "$k" --backend "$backend" --json
    done
  done 2>&1 | tee "$out/cli.log"
fi

# 3. SpMV against cuSPARSE.
if [ "${HDG_GPU_BENCH:-0}" = 1 ]; then
  "$b/gpu-bench" --dofs 1e7 --orders 1,2,3,4,5,6 --export /tmp/csr 2>&1 | tee "$out/bench.log" | grep -vE "uploaded|built on|exported"
  python3 crates/hdg-backend-cuda/scripts/cusparse_spmv.py /tmp/csr 2>&1 | tee "$out/cusparse.log"
fi

# 4. Memory: `hdg solve --backend cuda --mesh square:N --order K` for growing N (trace dofs
# doubling: N grows by sqrt 2), then bisection between the last N that fitted and the first
# that ran out of device memory (hdg exits with status 4 on out-of-device-memory). Each run
# prints its peak device memory (sampled every 0.5 ms, above what was in use at its start) and
# its peak host RSS; the sweep stops cleanly before a run whose predicted host memory (host
# bytes per trace dof of the last run times the next run's dofs) would pass 85% of MemTotal,
# and when its time budget is spent. The trace solve is capped (HDG_MEM_ITERS iterations):
# every buffer of the solve is allocated before its first iteration, so the peak does not
# depend on how many it runs (the runs report "not converged", exit status 3, which is fine).
#
#   HDG_MEM_ORDER (3)  HDG_MEM_SOLVER (pcg-block-jacobi)  HDG_MEM_ITERS (50)
#   HDG_MEM_START (512)  HDG_MEM_BISECT (3 steps)  HDG_MEM_BUDGET_S (420)
#   HDG_MEM_PRECISION (f64)  HDG_MEM_OPERATORS ("dbf"; "dbf matrix-free" for both)
#   HDG_MEM_HOST_BYTES (MemTotal of /proc/meminfo: the host memory the 85% rule applies to)
json_number() { # json_number KEY LINE: the first number after "KEY":
  printf '%s\n' "$2" | sed -n "s/.*\"$1\":\([-0-9.eE+]*\).*/\1/p" | head -n1
}

memory_sweep() {
  local operator="$1"
  local k="${HDG_MEM_ORDER:-3}" solver="${HDG_MEM_SOLVER:-pcg-block-jacobi}"
  local iters="${HDG_MEM_ITERS:-50}" precision="${HDG_MEM_PRECISION:-f64}"
  local budget="${HDG_MEM_BUDGET_S:-420}" bisect="${HDG_MEM_BISECT:-3}"
  local host_total host_per_dof="" n="${HDG_MEM_START:-512}" lo=0 hi=0 steps=0 t0=$SECONDS
  local log="$out/memory-$operator.log" table="$out/memory-$operator.md"
  host_total="${HDG_MEM_HOST_BYTES:-$(awk '/^MemTotal:/ { printf "%d", $2 * 1024 }' /proc/meminfo)}"
  echo "== memory: square:N, order $k, $precision, $solver (at most $iters iterations), trace operator $operator; host $((host_total >> 30)) GiB"
  {
    echo "| N | trace dofs | device peak GiB | device bytes/dof | host peak RSS GiB | host bytes/dof | wall s | result |"
    echo "|---|---|---|---|---|---|---|---|"
  } | tee "$table"
  : > "$log"
  while :; do
    local dofs=$(( (k + 1) * (3 * n * n - 2 * n) ))
    if [ -n "$host_per_dof" ]; then
      local need
      need=$(awk -v a="$host_per_dof" -v d="$dofs" 'BEGIN { printf "%d", a * d }')
      if [ "$need" -gt $((host_total / 100 * 85)) ]; then
        echo "stop: square:$n ($dofs dofs) would need about $((need >> 30)) GiB of host memory (85% of $((host_total >> 30)) GiB is the limit)" | tee -a "$table"
        break
      fi
    fi
    if [ $((SECONDS - t0)) -gt "$budget" ]; then
      echo "stop: time budget of $budget s spent" | tee -a "$table"
      break
    fi
    local start=$SECONDS line rc
    line="$("$b/hdg" solve --mesh "square:$n" --order "$k" --backend cuda --precision "$precision" \
      --solver "$solver" --max-iterations "$iters" --operator "$operator" --json 2>>"$log")"
    rc=$?
    printf 'square:%s rc=%s %s\n' "$n" "$rc" "$line" >> "$log"
    local wall=$((SECONDS - start)) result
    if [ $rc -eq 0 ] || [ $rc -eq 3 ]; then
      local peak per_dof rss trace_dofs
      peak=$(json_number peak_bytes "$line")
      per_dof=$(json_number peak_bytes_per_trace_dof "$line")
      rss=$(json_number host_peak_rss_bytes "$line")
      trace_dofs=$(json_number trace_dofs "$line")
      host_per_dof=$(awk -v r="$rss" -v d="$trace_dofs" 'BEGIN { printf "%.1f", r / d }')
      awk -v n="$n" -v d="$trace_dofs" -v p="$peak" -v pd="$per_dof" -v r="$rss" -v hd="$host_per_dof" -v w="$wall" \
        'BEGIN { printf "| %d | %d | %.3f | %.1f | %.3f | %.1f | %d | fits |\n", n, d, p / 2^30, pd, r / 2^30, hd, w }' | tee -a "$table"
      lo=$n
    elif [ $rc -eq 4 ]; then
      echo "| $n | $dofs | - | - | - | - | $wall | out of device memory |" | tee -a "$table"
      grep "out of device memory" "$log" | tail -n1
      hi=$n
    else
      echo "| $n | $dofs | - | - | - | - | $wall | failed (exit $rc) |" | tee -a "$table"
      tail -n 3 "$log"
      [ $rc -ge 128 ] && echo "(killed by signal $((rc - 128)): host out of memory?)"
      hi=$n
    fi
    if [ "$hi" -eq 0 ]; then
      n=$(awk -v n="$n" 'BEGIN { printf "%d", n * 1.41421356 / 8 + 0.5 }'); n=$((n * 8))
    else
      [ "$lo" -eq 0 ] && { echo "stop: the first size did not fit (set HDG_MEM_START lower)" | tee -a "$table"; break; }
      steps=$((steps + 1))
      if [ "$steps" -gt "$bisect" ] || [ $((hi - lo)) -le 16 ]; then break; fi
      n=$(( (lo + hi) / 2 ))
    fi
  done
  if [ "$lo" -gt 0 ]; then
    echo "largest that fits: square:$lo, order $k, $(( (k + 1) * (3 * lo * lo - 2 * lo) )) trace dofs ($operator, $precision)$([ "$hi" -gt 0 ] && echo "; square:$hi did not")" | tee -a "$table"
  fi
}

if [ "${HDG_GPU_MEMORY:-1}" = 1 ]; then
  for operator in ${HDG_MEM_OPERATORS:-dbf}; do
    memory_sweep "$operator"
  done
fi
exit $status
