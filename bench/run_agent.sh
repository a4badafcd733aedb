#!/usr/bin/env bash
# Recovery latency and memory: elasticrun against torchrun (Debian's, run as
# /usr/bin/python3 -m torch.distributed.run) on the same worker, 4 and 16
# local workers; and a hung worker (no heartbeat for --hang-timeout) to its
# group restarted, against the timeout. Run by `make bench`.
set -euo pipefail
bench_dir=${ELASTIC_BENCH_DIR:-build/release/bench}
bin_dir=${ELASTIC_BIN_DIR:-bin}
"$bench_dir/agent_bench" --elasticrun "$bin_dir/elasticrun" --worker "$bench_dir/agent_bench_worker" \
    --sizes "${AGENT_BENCH_SIZES:-4,16}" --crashes "${AGENT_BENCH_CRASHES:-7}" \
    --hang-timeout "${AGENT_BENCH_HANG_TIMEOUT:-2}"
