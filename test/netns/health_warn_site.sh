#!/usr/bin/env bash
# Warnings do not evict: a hot, throttled GPU on a narrow PCIe link is an
# event, a metric and a line in `elasticctl status`, and the node keeps
# running for several periods. Then the site health command starts failing:
# fatal at the next period, the node steps aside and the spare takes over.
set -euo pipefail
here=$(dirname "$0")
NETNS_TAG=health
. "$here/netns.sh"
. "$here/cluster.sh"
. "$here/health_cluster.sh"
netns_skip_unless_able
HEALTH_INTERVAL=1
sick="$CLUSTER_DIR/h3.sick"
health_start --health-check-cmd "if [ -e $sick ]; then echo 'prolog: /scratch is read-only'; exit 1; fi"
cluster_mark
health_state 3 'gpus 8\ntemp 3 95\nthrottle 3 0x40\npcie_width 6 8 16\n'
cluster_wait 3 '"event":"health_check".*"check":"temperature".*"verdict":"warning"' "$(cluster_scale 20)" ||
    cluster_fail "no temperature warning on h3"
for check in throttle pcie_width; do
    grep -qE "\"event\":\"health_check\".*\"check\":\"$check\".*\"verdict\":\"warning\"" "$(cluster_events 3)" ||
        cluster_fail "no $check warning on h3"
done
# Four more periods: the warnings stand, nobody steps aside or restarts.
rounds=$(health_metric 3 elastic_health_check_rounds_total | awk '{ print $2 }')
deadline=$(( SECONDS + $(cluster_scale 30) ))
until [ "$(health_metric 3 elastic_health_check_rounds_total | awk '{ print $2 }')" -ge $(( ${rounds:-0} + 4 )) ]; do
    [ "$SECONDS" -lt "$deadline" ] || cluster_fail "h3's checks did not run four more rounds"
    sleep 0.2
done
[ "$(cluster_count 3 '"event":"health_stepped_aside"')" = 0 ] || cluster_fail "a warning made h3 step aside"
[ "$(cluster_count 3 '"event":"generation_formed"')" = 0 ] || cluster_fail "a warning restarted the job"
[ "$(cluster_count 3 '"event":"health_check".*"check":"temperature"')" = 1 ] ||
    cluster_fail "the standing warning was reported more than once"
health_metric 3 'elastic_gpu_temperature_celsius{gpu="3"' | grep -q ' 95$' || cluster_fail "no temperature metric for GPU 3"
health_metric 3 'elastic_node_health' | grep -q ' 1$' || cluster_fail "h3's health metric is not a warning"
status=$(netns_exec 3 "${ELASTICRUN%/*}/elasticctl" status --endpoint "127.0.0.1:$CLUSTER_METRICS_PORT" 2>&1) ||
    cluster_fail "elasticctl status failed: $status"
grep -q 'node checks: warning' <<<"$status" || cluster_fail "elasticctl status does not show the warning: $status"
# Now the site command fails: fatal at the next round, the spare takes over.
cluster_mark
touch "$sick"
cluster_wait 3 '"event":"health_check".*"check":"site_cmd".*"verdict":"fatal"' "$(cluster_scale 20)" ||
    cluster_fail "the failing site command was not fatal"
grep -E '"event":"health_check".*"check":"site_cmd"' "$(cluster_events 3)" |
    grep -q 'exit 1: prolog: /scratch is read-only' || cluster_fail "the event does not carry the command's first line"
cluster_wait 3 '"event":"health_stepped_aside"' "$(cluster_scale 20)" || cluster_fail "h3 did not step aside"
health_spare_takes_over
echo "warnings kept h3 running; its failing site command handed it to the spare: ok"
