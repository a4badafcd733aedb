#!/usr/bin/env bash
# A node turning 3x slow: time to the waiting spare's workers running and the
# job's steps/s before, during and after, elasticrun --straggler-evict against
# torchrun in one run (bench/straggler_bench.py). Env: STRAGGLER_ROUNDS (3),
# TORCH_PYTHON (/usr/bin/python3; torchrun is skipped when it lacks torch).
set -euo pipefail
bin_dir=${ELASTIC_BIN_DIR:-bin}
helper_dir=${ELASTIC_HELPER_DIR:-build/release/test/helpers}
here=$(cd "$(dirname "$0")" && pwd)
[ -x "$helper_dir/probe_worker" ] || { echo "run_straggler: no $helper_dir/probe_worker (make test builds it)" >&2; exit 1; }
exec python3 "$here/straggler_bench.py" "$bin_dir/elasticrun" "$helper_dir/probe_worker" "${STRAGGLER_ROUNDS:-3}"
