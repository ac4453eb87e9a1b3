#!/usr/bin/env bash
# Regenerates the shipped fallback profiles in examples/gpt/profiles/ on the CPU:
#   main-1 … main-4     4 baseline runs (branch main) × 3 repeats, fused attention
#   slow-attention      1 candidate run × 3 repeats with --slow-attention
# Each repeat is a fresh process, as `perfci run` would do; traces are gzipped (perfci reads
# .pt.trace.json.gz directly). Takes about a minute and a half on two CPU cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-.venv/bin/python}
OUT=examples/gpt/profiles
REPEATS=${REPEATS:-3}
# A few seconds a repeat, ~130 KB a gzipped trace; a long sequence and a narrow model make
# attention a large share of the step, so the slow variant is ~1.8x slower on a CPU.
BENCH_ARGS=(--steps 4 --layers 2 --seq 384 --dim 64 --batch 4)
RUNS=(main-1 main-2 main-3 main-4 slow-attention)

one_repeat() {  # one_repeat RUN REPEAT
  local run=$1 repeat=$2 tmp
  local extra=()
  [ "$run" = slow-attention ] && extra=(--slow-attention)
  tmp=$(mktemp -d)
  PERFCI_OUTPUT_DIR=$tmp PERFCI_REPEAT=$repeat "$PYTHON" examples/gpt/bench.py \
    "${BENCH_ARGS[@]}" "${extra[@]}" >/dev/null 2>&1
  gzip -9 -n -c "$tmp/gpt.pt.trace.json" > "$OUT/$run/r$repeat.pt.trace.json.gz"
  rm -rf "$tmp"
  echo "  $OUT/$run/r$repeat.pt.trace.json.gz"
}

for run in "${RUNS[@]}"; do
  rm -rf "${OUT:?}/$run"
  mkdir -p "$OUT/$run"
done
# Interleaved (repeat 0 of every run, then repeat 1, ...) so that a busy moment on a shared
# machine slows baseline and candidate alike instead of faking or hiding the regression.
for ((r = 0; r < REPEATS; r++)); do
  for run in "${RUNS[@]}"; do
    one_repeat "$run" "$r"
  done
done
du -sh "$OUT"
