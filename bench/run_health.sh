#!/usr/bin/env bash
# The CPU cost of one periodic health check round with the NVML double at 8
# GPUs (every check of every GPU read through it; the double re-reads its
# state file only when it changes). Run by `make bench`; the real device's
# figure comes from test/gpu/run.sh.
set -euo pipefail
bench_dir=${ELASTIC_BENCH_DIR:-build/release/bench}
double=${ELASTIC_NVML_DOUBLE:-build/release/test/libnvml_double.so}
[ -f "$double" ] || make --no-print-directory "$double" >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf 'gpus 8\n' > "$work/state"
ELASTIC_NVML_LIBRARY=$(realpath "$double") NVML_DOUBLE_STATE="$work/state" \
    "$bench_dir/health_bench" --rounds "${HEALTH_BENCH_ROUNDS:-500}"
