#!/usr/bin/env bash
# The worker benchmark: heartbeat cost per call, and in-process recovery
# against a full restart of the same 4-worker job, in one run.
set -euo pipefail
bench="${ELASTIC_BENCH_DIR:-build/release/bench}/worker_bench"
echo "worker heartbeat and in-process recovery ($(nproc) cores)"
"$bench" heartbeat
"$bench" recovery "${ELASTIC_BENCH_ROUNDS:-9}"
