#!/usr/bin/env bash
# A deterministic bug (a ValueError at step 37 in every generation) under
# elasticrun and under torchrun, --max-restarts 10, in one run
# (bench/failure_policy.py): wall time and restarts from the first occurrence
# to the job's end. Env: FAILURE_POLICY_NPROC (2), FAILURE_POLICY_ROUNDS (1),
# TORCH_PYTHON (/usr/bin/python3). Skipped when that python cannot import torch.
set -euo pipefail
python=${TORCH_PYTHON:-/usr/bin/python3}
bin_dir=${ELASTIC_BIN_DIR:-bin}
here=$(cd "$(dirname "$0")" && pwd)
if ! "$python" -c 'import torch.distributed' 2>/dev/null; then
  echo "failure policy: $python cannot import torch; skipped" >&2
  exit 0
fi
export ELASTIC_LIB_DIR=${ELASTIC_LIB_DIR:-$(cd "$bin_dir/.." && pwd)/lib}
exec "$python" "$here/failure_policy.py" "$bin_dir/elasticrun" "${FAILURE_POLICY_NPROC:-2}" \
  "${FAILURE_POLICY_ROUNDS:-1}"
