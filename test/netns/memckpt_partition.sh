#!/usr/bin/env bash
# A partition during replication: three nodes train (the demo trainer, a
# memory save every step, R = 1) and a spare waits. h3's replica traffic is
# cut first (only the job store still answers it), so its newest steps are
# never memory-committed; then h3 is partitioned off completely. The spare
# takes its rank (generation 2, from the last committed step). h3 heals,
# fences itself and waits as the new spare, its tier still holding
# generation-1 steps newer than the one the job went back to. When h2's agent
# is then SIGKILLed, h3 is promoted: the plan ignores its fenced copies and
# says so, h3's rank comes from a peer, and the job finishes with every
# per-rank shard right.
set -euo pipefail
here=$(dirname "$0")
NETNS_TAG=${NETNS_TAG:-memc}
. "$here/netns.sh"
. "$here/cluster.sh"
netns_skip_unless_able
netns_setup 4
TRAINER=$(cluster_demo_trainer)
ckpt=$CLUSTER_DIR/ckpt
mkdir -p "$ckpt"
CLUSTER_JOB_ID=memc-partition CLUSTER_JOB_NNODES=3:3 CLUSTER_JOB_RESTARTS=5
CLUSTER_JOB_CONF="last_call_timeout=1,join_timeout=90"
CLUSTER_JOB_FLAGS=(--no-python)
start_node() { # start_node I
    cluster_start_memory_node "$1" "$TRAINER" --ckpt-dir "$ckpt" --steps 400 --step-ms 100 \
        --ckpt-every 100000 --memory-every 1 --state-mib 1
}

for i in 1 2 3; do start_node "$i"; done
for i in 1 2 3; do
    cluster_wait "$i" '"event":"generation_formed".*"world_size":3,' 60 || cluster_fail "h$i never joined"
done
start_node 4 # the spare
for i in 1 2 3; do
    cluster_wait_count "$i" '"event":"checkpoint_saved".*"tier":"memory"' 2 30 || cluster_fail "h$i saved nothing"
done
# Replication from and to h3 stops (anything but the job store's port).
netns_exec 3 iptables -w -I OUTPUT -o eth0 -p tcp ! --dport "$CLUSTER_PORT" -j DROP -m comment --comment memc-replica
cluster_wait_count 3 '"event":"checkpoint_saved".*"tier":"memory"' 5 30 || cluster_fail "h3 stopped saving"
netns_partition 3
cluster_wait 4 '"event":"checkpoint_restored"' 90 || cluster_fail "the spare restored nothing"
gen2=$(grep -E '"event":"checkpoint_restored"' "$(cluster_events 4)" | head -1)
echo "$gen2" | grep -q '"source":"peer"' || cluster_fail "the spare's rank did not come from peer memory: $gen2"
netns_unpartition 3
netns_exec 3 iptables -w -D OUTPUT -o eth0 -p tcp ! --dport "$CLUSTER_PORT" -j DROP -m comment --comment memc-replica
cluster_wait 3 '"event":"fenced"' 60 || cluster_fail "h3 did not fence itself after the heal"
cluster_wait 3 '"event":"spare_parked"|"event":"waiting"' 60 || cluster_fail "h3 did not wait as a spare"
cluster_mark
kill -KILL "${CLUSTER_AGENT_PIDS[2]}"
cluster_wait 3 '"event":"restore_planned".*"planned":1' 90 || cluster_fail "h3 was not promoted into a plan"
plan=$(grep -E '"event":"restore_planned".*"planned":1' "$(cluster_events 3)" | tail -1)
echo "$plan" | grep -q 'from a history the job left ignored' || cluster_fail "the plan did not ignore h3's fenced copies: $plan"
cluster_wait 3 '"event":"checkpoint_restored"' 30 || cluster_fail "h3 restored nothing"
restored=$(grep -E '"event":"checkpoint_restored"' "$(cluster_events 3)" | tail -1)
echo "$restored" | grep -q '"source":"peer"' || cluster_fail "h3's rank did not come from a peer: $restored"
step=$(echo "$plan" | sed -n 's/.*"step":\([0-9]*\).*/\1/p')
echo "$restored" | grep -q "\"step\":$step," || cluster_fail "h3 restored another step than the plan's $step"
for i in 1 3 4; do cluster_wait_agent "$i" 120; done
netns_log "fenced copies ignored: $(echo "$plan" | sed -n 's/.*"why":"\([^"]*\)".*/\1/p')"
echo "memckpt partition: ok"
