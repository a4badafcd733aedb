/*
 * Tests on a real Slurm cluster (slurm-wlm's slurmctld, 4 slurmd and munged
 * in network namespaces, test/slurm/): each TEST runs one bash script of
 * test/slurm/, which skips itself (exit 77, with the reason) when this
 * machine cannot run the cluster (not root, Slurm or munge not installed).
 */
#include "support/script_test.h"
#include "test.h"

/* Runs test/slurm/<script>: passes, skips or fails as the script did. */
static void run_slurm_script(const char *script)
{
    script_test_run("slurm", script);
}

TEST_TIMEOUT(slurm_job_forms_from_the_step_environment_alone, 120)
{
    run_slurm_script("env_job.sh");
}

TEST_TIMEOUT(slurm_crashed_node_is_replaced_by_the_spare_without_node_fail, 150)
{
    run_slurm_script("node_crash.sh");
}

TEST_TIMEOUT(slurm_evicted_straggler_node_is_drained, 180)
{
    run_slurm_script("drain.sh");
}

TEST_TIMEOUT(slurm_too_few_nodes_requeue_resumes_from_the_checkpoint, 180)
{
    run_slurm_script("requeue.sh");
}

/* scancel signals every node's agent at once; the store's host serves until
 * the other nodes have left (it used to leave as soon as its own workers had
 * saved, and a rank on another node still committing its notice save found the
 * store gone: 5 of 6 notices beside other tests). */
TEST_TIMEOUT(slurm_scancel_is_a_notice_every_rank_saves, 120)
{
    run_slurm_script("scancel.sh");
}
