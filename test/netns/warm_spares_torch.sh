#!/usr/bin/env bash
# Warm spares across hosts with PyTorch: gloo DDP (examples/python/ddp_inprocess.py)
# on two hosts, 2 ranks and 1 warm spare each, --in-process-recovery with
# the memory tier (a save every step). A rank on h2 is SIGKILLed once h2's
# spare has parked: that spare (its pid from before the kill) takes the rank,
# the survivors on both hosts keep their processes, every rank restores one
# step from local memory, and the final weights equal a fault-free run's
# (the same trainer, 4 ranks on one host). Skipped without torch.
# (Which ranks h2 runs is the rendezvous' choice: the higher of them is killed.)
set -euo pipefail
here=$(dirname "$0")
NETNS_TAG=${NETNS_TAG:-spr}
PYTHON=${TORCH_PYTHON:-/usr/bin/python3}
"$PYTHON" -c 'import torch.distributed' 2>/dev/null || { echo "SKIP: $PYTHON cannot import torch" >&2; exit 77; }
. "$here/netns.sh"
. "$here/cluster.sh"
. "$here/spares_cluster.sh"
netns_skip_unless_able
netns_setup 2
ROOT=$(cd "$here/../.." && pwd)
EXAMPLE=$ROOT/examples/python/ddp_inprocess.py
export PYTHON_EXEC=$PYTHON PYTHONPATH=$ROOT/bindings/python GLOO_SOCKET_IFNAME=eth0
export ELASTIC_LIB_DIR=${ELASTIC_LIB_DIR:-$ROOT/lib}
[ -x "$ELASTICRUN" ] || { echo "FAIL: build first (make)" >&2; exit 1; }
STEPS=60
# Disk only at the end (as in warm_spares.sh: the restore comes from memory).
TRAIN=(--steps "$STEPS" --every 1000 --memory-every 1 --step-seconds 0.1 --no-fsync)
spares_job torch-spares 120

mkdir -p "$CLUSTER_DIR/ckpt" "$CLUSTER_DIR/clean"
for i in 1 2; do
    cluster_start_memory_node "$i" "$EXAMPLE" --dir "$CLUSTER_DIR/ckpt" --out "$CLUSTER_DIR/faulty.pt" "${TRAIN[@]}"
done
spares_wait_running 120 120
spares_kill_and_check_recovery 180
# The fault-free run: 4 ranks on h1.
GLOO_SOCKET_IFNAME=lo netns_exec 1 "$ELASTICRUN" --standalone --nproc-per-node 4 "$EXAMPLE" \
    --dir "$CLUSTER_DIR/clean" --out "$CLUSTER_DIR/clean.pt" --steps "$STEPS" --every 5 --no-fsync \
    >"$CLUSTER_DIR/clean.log" 2>&1 || { tail -n 30 "$CLUSTER_DIR/clean.log" >&2; cluster_fail "the fault-free run failed"; }
"$PYTHON" - "$CLUSTER_DIR/clean.pt" "$CLUSTER_DIR/faulty.pt" <<'PY' || cluster_fail "the weights differ from a fault-free run's"
import sys, torch
want, got = torch.load(sys.argv[1]), torch.load(sys.argv[2])
assert list(want) == list(got), (list(want), list(got))
for name in want:
    assert torch.equal(want[name], got[name]), name
PY
netns_log "restored step $SPARES_RESTORED_STEP from local memory; promoted pid $SPARES_PARKED; weights equal"
echo "torch warm spares across hosts: ok"
