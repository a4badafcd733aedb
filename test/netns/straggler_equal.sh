#!/usr/bin/env bash
# No false verdicts: two equally fast nodes, one of which stalls once for 5 s
# (a checkpoint save, a data-loader hiccup), with a spare waiting and
# --straggler-evict on: nobody is named a straggler or evicted over a dozen
# job-wide exchanges (counted on /metrics), though the scores are computed.
set -euo pipefail
here=$(dirname "$0")
NETNS_TAG=spare
. "$here/netns.sh"
. "$here/cluster.sh"
. "$here/straggler_cluster.sh"
netns_skip_unless_able
spare_start 20 -- 20 150 5000
EXCHANGES=12
deadline=$(( SECONDS + $(cluster_scale 90) ))
rounds=0
while [ "$rounds" -lt "$EXCHANGES" ]; do
    for i in 1 2 3; do
        [ "$(cluster_count "$i" '"event":"(node_straggler|straggler_evicted)"')" = 0 ] ||
            cluster_fail "h$i saw a straggler verdict after $rounds exchanges"
    done
    [ "$SECONDS" -lt "$deadline" ] || cluster_fail "only $rounds job-wide exchanges in time"
    rounds=$(cluster_metric 1 elastic_node_straggler_rounds_total | awk '{ print $2 }')
    rounds=${rounds:-0}
done
grep -q '"event":"generation_formed".*"generation":2' "$(cluster_events 1)" && cluster_fail "generation 1 ended"
# The scores are computed: both nodes scored in some exchange. One exchange
# may lack a node's fresh record (the stalled one's: its score is then not
# shown), so wait for an exchange that has both rather than read the last one.
deadline=$(( SECONDS + $(cluster_scale 30) ))
until [ "$(cluster_metric 1 'elastic_node_straggler_score{' | wc -l)" = 2 ]; do
    [ "$SECONDS" -lt "$deadline" ] ||
        cluster_fail "h1 shows $(cluster_metric 1 'elastic_node_straggler_score{' | wc -l) node scores, not 2, for $(cluster_scale 30) s"
    sleep 0.2
done
for i in 1 2 3; do
    [ "$(cluster_count "$i" '"event":"(node_straggler|straggler_evicted)"')" = 0 ] ||
        cluster_fail "h$i saw a straggler verdict"
done
stalled=$(grep -c '"event":"worker_started"' "$(cluster_events 3)")
[ "$stalled" = 2 ] || cluster_fail "h3's workers restarted"
netns_log "$rounds exchanges, scores: $(cluster_metric 1 'elastic_node_straggler_score{' | tr '\n' ' ')"
echo "equal nodes and a one-off stall: nobody evicted: ok"
