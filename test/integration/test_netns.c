/*
 * Multi-host tests on simulated hosts (network namespaces, test/netns/): each
 * TEST runs one bash script of test/netns/, which skips itself (exit 77, with
 * the reason) when this machine cannot make namespaces, e.g. not root.
 */
#include "support/script_test.h"
#include "test.h"

#include <stdlib.h>

/* Runs test/netns/<script>: passes, skips or fails as the script did. */
static void run_netns_script(const char *script)
{
    script_test_run("netns", script);
}

TEST_TIMEOUT(netns_harness_cuts_partitions_delays_and_tears_down, 90)
{
    run_netns_script("selftest.sh");
}

/* The multi-host fault suite (scripts in test/netns/, three hosts, 2 workers each). */
TEST_TIMEOUT(netns_partitioned_node_fences_itself_and_rejoins_after_heal, 120)
{
    run_netns_script("partition.sh");
}

TEST_TIMEOUT(netns_killed_store_host_is_loud_and_fast, 120)
{
    run_netns_script("store_host_lost.sh");
}

TEST_TIMEOUT(netns_store_host_lost_while_a_node_rejoins_is_the_root_cause, 120)
{
    run_netns_script("store_host_lost_while_rejoining.sh");
}

TEST_TIMEOUT(netns_killed_node_is_replaced_at_once, 120)
{
    run_netns_script("kill_node.sh");
}

/* The memory checkpoint tier across hosts (issue 23). */
TEST_TIMEOUT(netns_memckpt_spare_restores_a_lost_nodes_rank_from_peer_memory, 180)
{
    run_netns_script("memckpt_spare.sh");
}

/* The same on etcd: the plan through each generation's job store. */
TEST_TIMEOUT(netns_memckpt_spare_on_etcd_restores_from_peer_memory, 180)
{
    if (!elastic_has_feature("etcd")) SKIP("built without etcd (ELASTIC_ETCD=0)");
    run_netns_script("memckpt_spare_etcd.sh");
}

/* Silent data corruption (issue 36): --corrupt 2:120 on one of three hosts;
 * the divergence is found at the save of step 120, that host steps aside for
 * the spare, the job restores a step before 120 and ends with the fault-free
 * result. Memory tier, then store-mode disk. */
TEST_TIMEOUT(netns_divergence_memory_the_corrupted_node_is_replaced_by_the_spare, 240)
{
    run_netns_script("divergence_spare.sh");
}

TEST_TIMEOUT(netns_divergence_disk_store_mode_the_corrupted_node_is_replaced_by_the_spare, 240)
{
    setenv("DIVERGENCE_TIER", "disk", 1);
    run_netns_script("divergence_spare.sh");
}

/* A partition during replication: the fenced node's copies are never used.
 * Alone: the script kills h2 once h3 waits as a spare and expects generation 2
 * to have memory-committed a step newer than any h3 holds by then; beside
 * other tests generation 2 committed none (step 24 "passed over"), the job
 * went back to step 12 of generation 1, which h3 legitimately holds, and h3
 * restored it locally ("did not come from a peer"). */
TEST_ALONE(netns_memckpt_partition_during_replication_never_uses_the_fenced_nodes_copies, 300)
{
    run_netns_script("memckpt_partition.sh");
}

/* Two nodes lost with R = 1: no memory step is complete; disk, and why. */
TEST_TIMEOUT(netns_memckpt_two_nodes_lost_fall_back_to_disk_and_say_why, 180)
{
    run_netns_script("memckpt_two_lost.sh");
}

/* Warm spares across hosts (issue 24): 2 hosts x 2 ranks + 1 spare each, a rank killed on h2. */
TEST_TIMEOUT(netns_warm_spare_takes_a_killed_ranks_place_and_survivors_on_both_hosts_stay, 240)
{
    run_netns_script("warm_spares.sh");
}

/* The same with gloo DDP (skipped without torch): a survivor blocked in a
 * collective on another survivor is woken by the agent's abort. */
TEST_TIMEOUT(netns_torch_warm_spare_takes_a_killed_ranks_place_and_survivors_on_both_hosts_stay, 240)
{
    /* The trainer loads libelastic into /usr/bin/python3, as the pytest suite does. */
    const char *lib_dir = getenv("ELASTIC_LIB_DIR");
    if (lib_dir != NULL &&
        (strstr(lib_dir, "/build/asan") != NULL || strstr(lib_dir, "/build/tsan") != NULL))
        SKIP("the library is built with a sanitizer and cannot be loaded into an unsanitized "
             "python");
    run_netns_script("warm_spares_torch.sh");
}

TEST_TIMEOUT(netns_frozen_node_fences_on_thaw_and_rejoins, 120)
{
    run_netns_script("freeze.sh");
}

TEST_TIMEOUT(netns_loss_and_latency_evict_no_one, 120)
{
    run_netns_script("loss_latency.sh");
}

TEST_TIMEOUT(netns_worker_failure_while_cut_off_never_stalls_the_agent, 120)
{
    run_netns_script("fail_while_cut_off.sh");
}

/* The same fault on etcd: the job's store is re-hosted and the job goes on. */
TEST_TIMEOUT(netns_etcd_job_survives_losing_its_store_host, 120)
{
    if (!elastic_has_feature("etcd")) SKIP("built without etcd (ELASTIC_ETCD=0)");
    run_netns_script("etcd_store_host_lost.sh");
}

TEST_TIMEOUT(netns_straggler_node_is_replaced_by_the_waiting_spare, 150)
{
    run_netns_script("straggler_spare.sh");
}

TEST_TIMEOUT(netns_straggler_equal_nodes_and_a_stall_evict_no_one, 150)
{
    run_netns_script("straggler_equal.sh");
}

TEST_TIMEOUT(netns_straggler_node_is_replaced_by_the_waiting_spare_on_etcd, 150)
{
    if (!elastic_has_feature("etcd")) SKIP("built without etcd (ELASTIC_ETCD=0)");
    run_netns_script("straggler_spare_etcd.sh");
}

TEST_TIMEOUT(netns_quarantined_node_learns_the_job_ended_and_exits_0, 150)
{
    run_netns_script("straggler_quarantined_as_job_ends.sh");
}

TEST_TIMEOUT(netns_straggler_leaves_when_min_nodes_allow_and_quarantine_is_0, 150)
{
    run_netns_script("straggler_leave.sh");
}

/* Overlapping faults with a spare (issue 26): h2 cut off, then h3 frozen as
 * h2 heals; h3, left out when the job succeeds, exits 0 and says so. */
TEST_TIMEOUT(netns_spare_left_out_by_overlapping_faults_exits_0_and_says_so, 180)
{
    run_netns_script("spare_overlap.sh");
}

/* c10d (issue 26): a node cut off as the job ends learns it succeeded (the
 * store's host serves until it did) and exits 0; a dead node holds no one up. */
TEST_TIMEOUT(netns_node_cut_off_as_the_c10d_job_ends_learns_it_succeeded_and_exits_0, 180)
{
    run_netns_script("cut_off_as_job_ends.sh");
}

/* Node health checks with the NVML double (test/netns/health_*.sh). */
TEST_TIMEOUT(netns_health_xid_79_hands_the_node_to_the_waiting_spare, 150)
{
    run_netns_script("health_xid_spare.sh");
}

/* The same with --max-restarts 0 (issue 37): the step-aside for the spare
 * is the hardware's, not a failure of the job's, so it spends no budget and
 * the job goes on (the script asserts restart_count 0 and the spare running). */
TEST_TIMEOUT(netns_health_xid_79_with_max_restarts_0_the_spare_takes_over, 150)
{
    setenv("HEALTH_MAX_RESTARTS", "0", 1);
    run_netns_script("health_xid_spare.sh");
    unsetenv("HEALTH_MAX_RESTARTS");
}

TEST_TIMEOUT(netns_health_missing_gpu_or_hanging_site_check_never_joins, 150)
{
    run_netns_script("health_join.sh");
}

TEST_TIMEOUT(netns_health_warnings_do_not_evict_a_failing_site_check_does, 150)
{
    run_netns_script("health_warn_site.sh");
}

/* A deterministic bug on every rank of a three-host job (issue 37): one
 * decision (most_ranks) stops every node in the first generation (at the
 * latest at the second occurrence, when agents hear the first end before
 * their own rank's failure), exit 70, the cause said and named by the
 * others, `elasticctl explain` names the rule. */
TEST_TIMEOUT(netns_deterministic_bug_on_every_host_stops_every_node_with_one_decision, 150)
{
    run_netns_script("deterministic_bug.sh");
}
