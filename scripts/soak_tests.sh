#!/usr/bin/env bash
# `make soak`: the whole suite (`make test`) RUNS times in a row (default 10) while a CPU hog
# takes one core, the load the timing promises are held to (docs/guarantees.md; the slack is
# tests/timing.py's SLACK times each promise). Stops at the first failed run and keeps every
# run's output in soak-logs/ (git-ignored), one file per run; prints a line per run.
#
#   make soak                      # 10 runs, the hog on the last core
#   RUNS=3 make soak ARGS="tests/reliability"   # fewer runs, some tests (ARGS go to pytest)
#   SOAK_HOG=0 make soak           # no hog (a baseline)
#
# Long: 10 runs of the suite take about 75 minutes on 2 cores. Run it on a machine of your own.
set -uo pipefail
cd "$(dirname "$0")/.."

runs="${RUNS:-10}"
cores="$(nproc)"
logs="soak-logs/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$logs"

hog=""
stop_hog() { [ -n "$hog" ] && kill "$hog" 2>/dev/null; wait "$hog" 2>/dev/null; hog=""; }
trap 'stop_hog; exit 130' INT TERM
trap stop_hog EXIT
if [ "${SOAK_HOG:-1}" != 0 ]; then
  # One busy loop pinned to the last core: the suite's processes keep the others, and share
  # that one with it.
  taskset -c "$((cores - 1))" python3 -c 'while 1: pass' &
  hog=$!
  echo "soak: CPU hog $hog on core $((cores - 1)) of $cores"
fi

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
