#!/usr/bin/env bash
# elastic.torch.save_state / load_state against torch.save + fsync / torch.load
# on the same model + Adam state (bench/torch_state.py). Env: TORCH_STATE_BYTES
# (default 256 MiB), TORCH_STATE_RUNS (3), CKPT_BENCH_DIR (/var/tmp: a real disk),
# TORCH_PYTHON (/usr/bin/python3). Skipped when that python cannot import torch.
set -euo pipefail
python=${TORCH_PYTHON:-/usr/bin/python3}
bin_dir=${ELASTIC_BIN_DIR:-bin}
here=$(cd "$(dirname "$0")" && pwd)
if ! "$python" -c 'import torch' 2>/dev/null; then
  echo "torch state: $python cannot import torch; skipped" >&2
  exit 0
fi
work=$(mktemp -d "${CKPT_BENCH_DIR:-/var/tmp}/elastic-torch-state.XXXXXX")
trap 'rm -rf "$work"' EXIT
export ELASTIC_LIB_DIR=${ELASTIC_LIB_DIR:-$(cd "$bin_dir/.." && pwd)/lib}
export PYTHONPATH="$here/../bindings/python${PYTHONPATH:+:$PYTHONPATH}"
"$python" "$here/torch_state.py" "$work" "${TORCH_STATE_BYTES:-268435456}" "${TORCH_STATE_RUNS:-3}"
