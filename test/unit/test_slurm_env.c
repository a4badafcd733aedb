/* Tests of src/slurm/env.c: what elasticrun derives from a Slurm step's
 * environment. The environments are what slurm-wlm 22.05 gives a task of
 * `srun -N3 --ntasks-per-node=1` in an sbatch job (measured on the lab
 * cluster, test/slurm/), then variations; a malformed variable is refused by
 * name and nothing is derived from it. */
#include "slurm/slurm.h"
#include "test.h"

/* A task of step 0 of job 17 on node2 (the second of three), no GPUs. */
static char *step_env[] = {
    "SLURM_JOB_ID=17",
    "SLURM_STEP_ID=0",
    "SLURM_JOB_NODELIST=node[1-3]",
    "SLURM_STEP_NODELIST=node[1-3]",
    "SLURM_JOB_NUM_NODES=3",
    "SLURM_STEP_NUM_NODES=3",
    "SLURMD_NODENAME=node2",
    "SLURM_NODEID=1",
    "SLURM_PROCID=1",
    "SLURM_LOCALID=0",
    "SLURM_NTASKS_PER_NODE=1",
    "SLURM_STEP_TASKS_PER_NODE=1(x3)",
    "SLURM_TASKS_PER_NODE=1(x3)",
    "PATH=/usr/bin",
    NULL,
};

/* step_env with NAME=value replacing (or, value NULL, removing) that variable. */
static char **with(const char *name, const char *value)
{
    static char *env[64];
    static char entry[512];
    size_t n = 0, len = strlen(name);
    for (char **e = step_env; *e != NULL; e++)
        if (!(strncmp(*e, name, len) == 0 && (*e)[len] == '=')) env[n++] = *e;
    if (value != NULL) {
        snprintf(entry, sizeof entry, "%s=%s", name, value);
        env[n++] = entry;
    }
    env[n] = NULL;
    return env;
}

static elastic__slurm_settings derive(char **env)
{
    elastic__slurm_settings s;
    if (elastic__slurm_derive(env, &s) != 0) FAIL("refused: %s", elastic_last_error());
    return s;
}

static void refused(char **env, const char *variable)
{
    elastic__slurm_settings s;
    memset(&s, 0x5a, sizeof s);
    ASSERT_ERR(elastic__slurm_derive(env, &s), ELASTIC_EINVAL);
    ASSERT_EQ(((unsigned char *)&s)[0], 0x5a); /* untouched */
    if (strstr(elastic_last_error(), variable) == NULL)
        FAIL("detail \"%s\" does not name %s", elastic_last_error(), variable);
}

TEST(slurm_derive_outside_slurm_derives_nothing)
{
    char *env[] = { "PATH=/usr/bin", "SLURMD_NODENAME=x", NULL };
    elastic__slurm_settings s = derive(env);
    ASSERT(!s.in_slurm && !s.has_nnodes && !s.has_endpoint && !s.has_nproc && !s.has_rank);
    char *empty[] = { NULL };
    ASSERT(!derive(empty).in_slurm);
}

TEST(slurm_derive_reads_a_step_of_one_task_per_node)
{
    elastic__slurm_settings s = derive(step_env);
    ASSERT(s.in_slurm);
    ASSERT_STR_EQ(s.job_id, "17");
    ASSERT_STR_EQ(s.step_id, "0");
    ASSERT_STR_EQ(s.run_id, "slurm-17.0");
    ASSERT(s.has_nnodes && s.nnodes == 3);
    ASSERT(s.has_endpoint);
    ASSERT_STR_EQ(s.rdzv_host, "node1");
    ASSERT_EQ(s.rdzv_port, 29400 + 17);
    ASSERT(s.has_node_name);
    ASSERT_STR_EQ(s.node_name, "node2");
    ASSERT(!s.is_host);
    ASSERT(s.has_nproc && s.nproc_per_node == 1);
    ASSERT_EQ(s.tasks_on_node, 1);
    ASSERT(s.has_rank && s.preferred_rank == 1);
    char line[512];
    elastic__slurm_describe(&s, line, sizeof line);
    ASSERT_STR_EQ(line, "slurm job 17 step 0: run id slurm-17.0, nnodes 3:3, rdzv c10d "
                        "node1:29417, nproc-per-node 1 (tasks per node), node node2, "
                        "preferred rank 1");
    ASSERT(derive(with("SLURMD_NODENAME", "node1")).is_host);
}

TEST(slurm_derive_prefers_gpus_and_the_steps_node_list)
{
    elastic__slurm_settings s = derive(with("SLURM_GPUS_ON_NODE", "8"));
    ASSERT_EQ(s.nproc_per_node, 8);
    ASSERT_STR_EQ(s.nproc_source, "SLURM_GPUS_ON_NODE");
    ASSERT_EQ(derive(with("SLURM_GPUS_ON_NODE", "0")).nproc_per_node, 1); /* no GPU: tasks */
    /* A step on part of the allocation: its agents, not the batch host, can host the store. */
    s = derive(with("SLURM_STEP_NODELIST", "gpu[07-09],cpu5"));
    ASSERT_STR_EQ(s.rdzv_host, "gpu07");
    ASSERT_EQ(s.nnodes, 4);
    s = derive(with("SLURM_STEP_NODELIST", NULL));
    ASSERT_STR_EQ(s.rdzv_host, "node1");
    /* The batch script itself: no step, run id is the job's, port from the job id. */
    char *batch[] = { "SLURM_JOB_ID=123456", "SLURM_JOB_NODELIST=n[08-11]", NULL };
    s = derive(batch);
    ASSERT_STR_EQ(s.run_id, "slurm-123456");
    ASSERT_STR_EQ(s.step_id, "");
    ASSERT_STR_EQ(s.rdzv_host, "n08");
    ASSERT_EQ(s.rdzv_port, 29400 + 456);
    ASSERT_EQ(s.nnodes, 4);
    ASSERT(!s.has_node_name && !s.is_host && !s.has_rank);
}

TEST(slurm_derive_several_tasks_per_node_name_the_node_not_the_task)
{
    /* srun started 2 elasticrun per node (sbatch --ntasks-per-node=2): local
     * task 0 runs 2 workers as node 1; local task 1 stands aside. */
    static char *env[] = {
        "SLURM_JOB_ID=5",
        "SLURM_STEP_ID=2",
        "SLURM_STEP_NODELIST=node[1-3]",
        "SLURM_NODEID=1",
        "SLURM_PROCID=3",
        "SLURM_LOCALID=1",
        "SLURM_STEP_TASKS_PER_NODE=2(x3)",
        "SLURMD_NODENAME=node2",
        NULL,
    };
    elastic__slurm_settings s = derive(env);
    ASSERT_EQ(s.tasks_on_node, 2);
    ASSERT_EQ(s.nproc_per_node, 2);
    ASSERT_EQ(s.local_id, 1);
    ASSERT(s.has_rank && s.preferred_rank == 1);
    ASSERT_STR_EQ(s.run_id, "slurm-5.2");
}

TEST(slurm_derive_refuses_malformed_variables_by_name)
{
    refused(with("SLURM_JOB_ID", "17x"), "SLURM_JOB_ID");
    refused(with("SLURM_JOB_ID", "0"), "SLURM_JOB_ID");
    refused(with("SLURM_JOB_ID", ""), "SLURM_JOB_ID");
    refused(with("SLURM_JOB_ID", "99999999999"), "SLURM_JOB_ID");
    refused(with("SLURM_STEP_ID", "-1"), "SLURM_STEP_ID");
    refused(with("SLURM_STEP_NODELIST", "node[1-"), "SLURM_STEP_NODELIST");
    refused(with("SLURM_STEP_NODELIST", ""), "SLURM_STEP_NODELIST");
    refused(with("SLURMD_NODENAME", "no de"), "SLURMD_NODENAME");
    refused(with("SLURMD_NODENAME", ""), "SLURMD_NODENAME");
    refused(with("SLURM_NODEID", "one"), "SLURM_NODEID");
    refused(with("SLURM_STEP_TASKS_PER_NODE", "1"), "SLURM_STEP_TASKS_PER_NODE"); /* no node 1 */
    refused(with("SLURM_STEP_TASKS_PER_NODE", "1(x3"), "SLURM_STEP_TASKS_PER_NODE");
    refused(with("SLURM_PROCID", "1.5"), "SLURM_PROCID");
    refused(with("SLURM_LOCALID", "-3"), "SLURM_LOCALID");
    refused(with("SLURM_GPUS_ON_NODE", "8 "), "SLURM_GPUS_ON_NODE");
    refused(with("SLURM_GPUS_ON_NODE", "100000"), "SLURM_GPUS_ON_NODE");
}
