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
# Disk only at the end (see warm_spares.sh: a plan older than a disk step).
TRAIN=(--steps "$STEPS" --every 1000 --memory-every 1 --step-seconds 0.1 --no-fsync)

start_node() { # start_node I
    local host=$1 conf="last_call_timeout=1,join_timeout=120"
    [ "$host" = 1 ] && conf="$conf,is_host=1" || conf="$conf,is_host=0"
    rm -f "$(cluster_events "$host")"
    netns_spawn "$host" "$(cluster_log "$host")" env ELASTIC_LOG_LEVEL=warn "$ELASTICRUN" \
        --nnodes 2:2 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint "$(netns_addr 1):$CLUSTER_PORT" \
        --rdzv-id torch-spares --rdzv-conf "$conf" --local-addr "$(netns_addr "$host")" --max-restarts 3 \
        --in-process-recovery --warm-spares 1 --memory-ckpt --memory-ckpt-limit 256M \
        --event-log "$(cluster_events "$host")" \
        "$EXAMPLE" --dir "$CLUSTER_DIR/ckpt" --out "$CLUSTER_DIR/faulty.pt" "${TRAIN[@]}"
    CLUSTER_AGENT_PIDS[$host]=$NETNS_LAST_PID
}

mkdir -p "$CLUSTER_DIR/ckpt" "$CLUSTER_DIR/clean"
for i in 1 2; do start_node "$i"; done
for i in 1 2; do
    cluster_wait "$i" '"event":"generation_formed".*"world_size":4,' 120 || cluster_fail "h$i never joined"
    cluster_wait "$i" '"event":"spare_parked"' 120 || cluster_fail "h$i's spare never parked"
    cluster_wait_count "$i" '"event":"checkpoint_saved".*"tier":"memory"' 2 120 || cluster_fail "h$i saved nothing"
done
# Which host runs which rank is the rendezvous' choice: read it from the events.
spares_ranks 4
victim=$(spares_victim 4)
parked=$(spares_event_pid 2 '"event":"spare_parked"')
cluster_mark
netns_log "killing rank $victim (pid ${SPARES_PID[$victim]}) on h2; h2's parked spare is pid $parked"
kill -KILL "${SPARES_PID[$victim]}"
spares_check_recovery 4 "$victim" "$parked"
for i in 1 2; do spares_wait_agent "$i" 180; done
spares_none_cold_started
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
netns_log "restored step $SPARES_RESTORED_STEP from local memory; promoted pid $parked; weights equal"
echo "torch warm spares across hosts: ok"
