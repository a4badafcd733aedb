#!/usr/bin/env bash
# The adoption benchmark (issue 35): PyTorch's DDP tutorial script, 3 ranks on
# gloo, rank 1 SIGKILLed mid-epoch, medians of ADOPT_ROUNDS (3) runs each:
# ddp_plain.py under torchrun --monitor_interval 0.1 and under elasticrun,
# ddp_elastic.py (elastic.torch.Job) and the hand-written ddp_inprocess.py
# under elasticrun --memory-ckpt --in-process-recovery --warm-spares=1.
# Prints the table (bench/adopt_bench.py says what each column measures).
# Env: TORCH_PYTHON (/usr/bin/python3: Debian's python3-torch), ADOPT_ROUNDS,
# ADOPT_EPOCHS (4), ADOPT_STEP_SLEEP (0.05 s a batch), ADOPT_ONLY (a set-up's
# name part), ADOPT_JSON (the rows as JSON too).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
bin_dir=${ELASTIC_BIN_DIR:-$root/bin}
python=${TORCH_PYTHON:-/usr/bin/python3}
if ! "$python" -c 'import torch.distributed' 2>/dev/null; then
    echo "run_adopt.sh: $python cannot import torch (apt-get install python3-torch)" >&2
    exit 1
fi
[ -x "$bin_dir/elasticrun" ] || { echo "run_adopt.sh: $bin_dir/elasticrun missing (make first)" >&2; exit 1; }
export ELASTIC_LIB_DIR=${ELASTIC_LIB_DIR:-$root/lib}
args=(--elasticrun "$bin_dir/elasticrun" --python "$python" --rounds "${ADOPT_ROUNDS:-3}"
      --epochs "${ADOPT_EPOCHS:-4}" --step-sleep "${ADOPT_STEP_SLEEP:-0.05}")
[ -n "${ADOPT_ONLY:-}" ] && args+=(--only "$ADOPT_ONLY")
[ -n "${ADOPT_JSON:-}" ] && args+=(--json "$ADOPT_JSON")
exec "$python" "$here/adopt_bench.py" "${args[@]}"
