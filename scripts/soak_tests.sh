#!/usr/bin/env bash
# `make soak`: the whole suite (`make test`) RUNS times in a row (default 10) while a CPU hog
# takes one core, the load the timing promises are held to (docs/guarantees.md; the slack is
# tests/timing.py's SLACK times each promise). Stops at the first failed run and keeps every
# run's output in soak-logs/ (git-ignored), one file per run; prints a line per run.
#
#   make soak                      # 10 runs, the hog on the last core
#   RUNS=3 make soak ARGS="tests/reliability"   # fewer runs, some tests (ARGS go to pytest)
#   SOAK_HOG=0 make soak           # no hog (a baseline)
#   SOAK_HOG=2 RUNS=3 make soak    # two hogs, one on each of the last two cores
#
# Long: 10 runs of the suite take about 75 minutes on 2 cores. Run it on a machine of your own.
set -uo pipefail
cd "$(dirname "$0")/.."

runs="${RUNS:-10}"
cores="$(nproc)"
logs="soak-logs/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$logs"

hogs=()
stop_hogs() { for h in "${hogs[@]}"; do kill "$h" 2>/dev/null; wait "$h" 2>/dev/null; done; hogs=(); }
trap 'stop_hogs; exit 130' INT TERM
trap stop_hogs EXIT
# SOAK_HOG busy loops (1 unless set), each pinned to a core from the last one down: the suite's
# processes keep the others, and share those with them.
for i in $(seq 1 "${SOAK_HOG:-1}"); do
  core=$(( (cores - i) % cores ))
  taskset -c "$core" python3 -c 'while 1: pass' &
  hogs+=($!)
  echo "soak: CPU hog $! on core $core of $cores"
done

failed=0
for i in $(seq 1 "$runs"); do
  start=$(date +%s)
  if PRESENCE_TIMING_LOG="$PWD/$logs/timings-$i.txt" scripts/test.sh "$@" >"$logs/run-$i.log" 2>&1; then
    outcome=passed
  else
    outcome=FAILED
    failed=1
  fi
  echo "soak: run $i/$runs $outcome in $(( $(date +%s) - start )) s ($(tail -n 1 "$logs/run-$i.log"))"
  [ "$failed" = 1 ] && { echo "soak: see $logs/run-$i.log"; break; }
done
# The measured times against their promises (tests/timing.py), the slowest first: how close
# each test came to its limit under this load.
cat "$logs"/timings-*.txt 2>/dev/null | awk -F'promise [0-9.]+ s, ' '{split($2, a, "x"); print a[1] "x  " $0}' | sort -rn | head -20
exit "$failed"
