/*
 * Tests on a real Slurm cluster (slurm-wlm's slurmctld, 4 slurmd and munged
 * in network namespaces, test/slurm/): each TEST runs one bash script of
 * test/slurm/, which skips itself (exit 77, with the reason) when this
 * machine cannot run the cluster (not root, Slurm or munge not installed).
 */
#include "test.h"

#include <sys/wait.h>

/* Runs test/slurm/<script> with bash; passes, skips or fails as the script did. */
static void run_slurm_script(const char *script)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/test/slurm/%s", test_source_dir(), script);
    fflush(NULL);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        setenv("TMPDIR", test_tmpdir(), 1);
        execlp("bash", "bash", path, (char *)NULL);
        fprintf(stderr, "cannot run bash %s\n", path);
        _exit(127);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77) _exit(77); /* it printed "SKIP: why" */
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        FAIL("%s failed (status 0x%x); its output is above", script, status);
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

TEST_TIMEOUT(slurm_scancel_is_a_notice_every_rank_saves, 120)
{
    run_slurm_script("scancel.sh");
}
