#!/usr/bin/env bash
# PyTorch DDP recovery: failure -> every rank training again, in-process under
# elasticrun (with and without a warm spare) against a full restart under
# elasticrun and under torchrun, in one
# run (bench/torch_recovery.py). Env: TORCH_RECOVERY_ROUNDS (5), TORCH_RECOVERY_NPROC (3),
# TORCH_PYTHON (/usr/bin/python3). Skipped when that python cannot import torch.
set -euo pipefail
python=${TORCH_PYTHON:-/usr/bin/python3}
bin_dir=${ELASTIC_BIN_DIR:-bin}
here=$(cd "$(dirname "$0")" && pwd)
if ! "$python" -c 'import torch.distributed' 2>/dev/null; then
  echo "torch recovery: $python cannot import torch; skipped" >&2
  exit 0
fi
export ELASTIC_LIB_DIR=${ELASTIC_LIB_DIR:-$(cd "$bin_dir/.." && pwd)/lib}
exec "$python" "$here/torch_recovery.py" "$bin_dir/elasticrun" "${TORCH_RECOVERY_ROUNDS:-5}" \
  "${TORCH_RECOVERY_NPROC:-3}"
