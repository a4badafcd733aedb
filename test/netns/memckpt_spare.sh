#!/usr/bin/env bash
# The memory checkpoint tier across hosts: three nodes train (the demo
# trainer, 100 ms steps, a memory save every step with a per-rank 1 MiB shard
# it checks after every restore, no disk step in reach) and a spare waits. h3's agent
# is SIGKILLed: the survivors and the spare agree on one restore step, the
# spare's rank comes back from its peer copy (peer memory), the others from
# memory too, and the job finishes with every per-rank shard right.
# MEMCKPT_BACKEND=etcd (memckpt_spare_etcd.sh): the rendezvous on etcd (on
# h1), so the plan goes through each generation's job store. No --local-addr:
# the agents find their addresses (the route to the rendezvous endpoint).
set -euo pipefail
here=$(dirname "$0")
NETNS_TAG=${NETNS_TAG:-memckpt}
MEMCKPT_BACKEND=${MEMCKPT_BACKEND:-c10d}
. "$here/netns.sh"
. "$here/cluster.sh"
. "$here/straggler_cluster.sh" # spare_start_etcd
netns_skip_unless_able
netns_setup 4
[ "$MEMCKPT_BACKEND" = etcd ] && spare_start_etcd
TRAINER=$(cluster_demo_trainer)
ckpt=$CLUSTER_DIR/ckpt
mkdir -p "$ckpt"
CLUSTER_JOB_ID=memckpt-job CLUSTER_JOB_NNODES=3:3 CLUSTER_JOB_BACKEND=$MEMCKPT_BACKEND
CLUSTER_JOB_CONF="last_call_timeout=1,join_timeout=60"
[ "$MEMCKPT_BACKEND" = etcd ] && CLUSTER_JOB_CONF="$CLUSTER_JOB_CONF,keep_alive_interval=0.5,keep_alive_max_attempt=4"
CLUSTER_JOB_FLAGS=(--no-python)
CLUSTER_JOB_LOCAL_ADDR=0 # as users start it: each agent finds the address its peers reach it at
start_node() { # start_node I
    cluster_start_memory_node "$1" "$TRAINER" --ckpt-dir "$ckpt" --steps 150 --step-ms 100 \
        --ckpt-every 100000 --memory-every 1 --state-mib 1
}

for i in 1 2 3; do start_node "$i"; done
for i in 1 2 3; do
    cluster_wait "$i" '"event":"generation_formed".*"world_size":3,' 60 || cluster_fail "h$i never joined"
done
start_node 4 # the spare: waits, the job is full
# Memory steps replicated: every node has saved for a while.
for i in 1 2 3; do
    cluster_wait_count "$i" '"event":"checkpoint_saved".*"tier":"memory"' 2 30 || cluster_fail "h$i saved nothing"
done
cluster_mark
kill -KILL "${CLUSTER_AGENT_PIDS[3]}"
cluster_wait 4 '"event":"checkpoint_restored"' 60 || cluster_fail "the spare restored nothing"
grep -E '"event":"checkpoint_restored".*"source":"peer"' "$(cluster_events 4)" >/dev/null ||
    cluster_fail "the spare's rank did not come from peer memory"
# The survivors restore too: from local memory, or from a peer when the
# new generation gave them another rank than before.
for i in 1 2; do
    cluster_wait "$i" '"event":"checkpoint_restored".*"source":"(local|peer)"' 30 || cluster_fail "h$i did not restore from memory"
done
grep -q "from peer memory (node " "$(cluster_log 4)" || cluster_fail "the spare's console did not say where its restore came from"
# All restored the same step.
steps=$(for i in 1 2 4; do grep -E '"event":"checkpoint_restored"' "$(cluster_events "$i")" |
        sed -n 's/.*"step":\([0-9]*\).*/\1/p' | head -1; done | sort -u | wc -l)
[ "$steps" = 1 ] || cluster_fail "the nodes restored different steps"
for i in 1 2 4; do cluster_wait_agent "$i" 90; done
netns_log "spare restored from peer memory: $(grep -h 'resumed at step' "$(cluster_log 4)" | tail -1)"
echo "memckpt spare: ok"
