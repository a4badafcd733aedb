#!/usr/bin/env bash
# Loss and latency are not failures: 5 % packet loss on one node, and one node
# talking to the store through 100 ms of added latency each way, for several
# keep-alive timeouts, must end no generation and fence no one.
set -euo pipefail
here=$(dirname "$0")
. "$here/netns.sh"
. "$here/cluster.sh"
netns_skip_unless_able
netns_setup 3
# h3 reaches the store through a delaying proxy of its own.
netns_delay_proxy 3 7001 "$(netns_addr 1)" "$CLUSTER_PORT" 100
cluster_start_agent 1
cluster_start_agent 2
cluster_start_agent 3 "$(netns_addr 3):7001"
for i in 1 2 3; do
    cluster_wait "$i" '"event":"generation_formed".*"world_size":6,' 60 || cluster_fail "h$i never joined"
done
cluster_mark
netns_loss 2 0.05
sleep 8 # observation window: four keep-alive timeouts under fire
netns_loss 2 0
for i in 1 2 3; do
    [ "$(cluster_count "$i" '"event":"(fenced|generation_ended|generation_formed)"')" = 0 ] ||
        cluster_fail "h$i saw a false failure under loss/latency"
done
echo "loss and latency: ok"
