/* Tests of src/slurm/drain.c against stand-ins for scontrol
 * (ELASTIC_SCONTROL): the exact command a drain runs, a refusal for want of
 * rights as one clear line (EPERM), a scontrol that never answers killed at
 * the deadline, a missing one, and the reason made one safe line. */
#include "common/clock.h"
#include "slurm/slurm.h"
#include "test.h"

#include <fcntl.h>
#include <sys/stat.h>

static const char *fake_scontrol(const char *name, const char *body)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", test_tmpdir(), name);
    FILE *file = fopen(path, "w");
    ASSERT(file != NULL);
    fprintf(file, "#!/bin/sh\n%s\n", body);
    fclose(file);
    ASSERT_EQ(chmod(path, 0755), 0);
    setenv("ELASTIC_SCONTROL", path, 1);
    setenv("SLURM_JOB_NODELIST", "node[1-3],nodeX", 1); /* the job's nodes, as Slurm gives them */
    return path;
}

TEST(slurm_drain_runs_scontrol_update_with_the_reason)
{
    char body[4400], args[4096];
    snprintf(args, sizeof args, "%s/args", test_tmpdir());
    snprintf(body, sizeof body, "for a in \"$@\"; do echo \"[$a]\"; done > %s", args);
    fake_scontrol("ok", body);
    char detail[256];
    ASSERT_OK(elastic__slurm_drain("node3", "crash loop: 4 failures in 60 s", 5000, detail,
                                   sizeof detail));
    ASSERT_STR_EQ(detail, "drained node3 (Reason=\"elastic: crash loop: 4 failures in 60 s\")");
    char got[512] = "";
    FILE *file = fopen(args, "r");
    ASSERT(file != NULL);
    size_t n = fread(got, 1, sizeof got - 1, file);
    fclose(file);
    got[n] = '\0';
    ASSERT_STR_EQ(got, "[update]\n[NodeName=node3]\n[State=DRAIN]\n"
                       "[Reason=elastic: crash loop: 4 failures in 60 s]\n");
}

TEST(slurm_drain_without_rights_is_one_clear_line)
{
    fake_scontrol("denied", "echo 'slurm_update error: Access/permission denied' >&2; exit 1");
    char detail[256];
    ASSERT_EQ(elastic__slurm_drain("node2", "evicted straggler", 5000, detail, sizeof detail),
              ELASTIC_EPERM);
    ASSERT_STR_EQ(detail, "cannot drain node2: scontrol says \"slurm_update error: "
                          "Access/permission denied\" (draining needs Slurm operator rights); "
                          "the job goes on");
    fake_scontrol("other", "echo 'slurm_update error: Invalid node name specified' >&2; exit 1");
    ASSERT_EQ(elastic__slurm_drain("nodeX", "x", 5000, detail, sizeof detail), ELASTIC_EIO);
    ASSERT(strstr(detail, "exit 1): slurm_update error: Invalid node name specified") != NULL);
}

TEST(slurm_drain_kills_a_scontrol_that_never_answers)
{
    fake_scontrol("hang", "exec sleep 30");
    char detail[256];
    uint64_t start = elastic__now_ms();
    ASSERT_EQ(elastic__slurm_drain("node2", "x", 300, detail, sizeof detail), ELASTIC_ETIMEDOUT);
    uint64_t took = elastic__now_ms() - start;
    ASSERT(took >= 300);
    ASSERT_LT(took, test_scaled_ms(3000));
    ASSERT(strstr(detail, "did not answer within 300 ms") != NULL);
    /* Output closed early, the process lingers: the same deadline holds. */
    fake_scontrol("linger", "exec >/dev/null 2>&1; exec sleep 30");
    ASSERT_EQ(elastic__slurm_drain("node2", "x", 300, detail, sizeof detail), ELASTIC_ETIMEDOUT);
}

TEST(slurm_drain_without_scontrol_says_so)
{
    char missing[4096];
    snprintf(missing, sizeof missing, "%s/no-such-scontrol", test_tmpdir());
    setenv("ELASTIC_SCONTROL", missing, 1);
    setenv("SLURM_JOB_NODELIST", "node[1-3]", 1);
    char detail[256];
    ASSERT_EQ(elastic__slurm_drain("node2", "x", 1000, detail, sizeof detail), ELASTIC_ENOTFOUND);
    ASSERT(strstr(detail, "cannot run") != NULL);
}

TEST(slurm_drain_reason_is_one_plain_line)
{
    char reason[64];
    elastic__slurm_drain_reason("bad \"quote\"\nand\\more", reason, sizeof reason);
    ASSERT_STR_EQ(reason, "elastic: bad  quote  and more");
    elastic__slurm_drain_reason(NULL, reason, sizeof reason);
    ASSERT_STR_EQ(reason, "elastic: gave up on it");
    elastic__slurm_drain_reason("a very long reason that goes on and on and on and on", reason, 20);
    ASSERT_EQ(strlen(reason), 19);
}

/* A peer's node id reaches scontrol when that peer is lost: a host list
 * expression would drain every node it names (scontrol expands it). Only a
 * plain host name of this job's own node list is drained; scontrol never
 * runs for anything else. */
TEST(slurm_drain_refuses_a_host_list_and_a_node_outside_the_job)
{
    char body[4400], ran[4096];
    snprintf(ran, sizeof ran, "%s/ran", test_tmpdir());
    snprintf(body, sizeof body, "echo \"$@\" >> %s", ran);
    fake_scontrol("record", body);
    char detail[256];
    ASSERT_EQ(elastic__slurm_drain("gpu[001-512],login01", "lost", 5000, detail, sizeof detail),
              ELASTIC_EPERM);
    ASSERT(strstr(detail, "not a plain host name") != NULL);
    ASSERT_EQ(elastic__slurm_drain("node1 login01", "lost", 5000, detail, sizeof detail),
              ELASTIC_EPERM);
    ASSERT_EQ(elastic__slurm_drain("-node1", "lost", 5000, detail, sizeof detail), ELASTIC_EPERM);
    /* A plain name, but not one of this job's nodes (a login node, another job's). */
    ASSERT_EQ(elastic__slurm_drain("login01", "lost", 5000, detail, sizeof detail), ELASTIC_EPERM);
    ASSERT_STR_EQ(detail, "will not drain login01: not a node of this job (SLURM_JOB_NODELIST)");
    /* No node list to check against: nothing drained. */
    unsetenv("SLURM_JOB_NODELIST");
    ASSERT_EQ(elastic__slurm_drain("node2", "lost", 5000, detail, sizeof detail), ELASTIC_EPERM);
    ASSERT(strstr(detail, "not set") != NULL);
    struct stat st;
    ASSERT(stat(ran, &st) != 0); /* scontrol never ran */
    setenv("SLURM_JOB_NODELIST", "node[1-3]", 1);
    ASSERT_OK(elastic__slurm_drain("node2", "lost", 5000, detail, sizeof detail));
    ASSERT(stat(ran, &st) == 0);
}

/* scontrol gets the agent's environment without its secrets. */
TEST(slurm_drain_runs_scontrol_without_the_agents_secrets)
{
    char body[4400], seen[4096];
    snprintf(seen, sizeof seen, "%s/env.out", test_tmpdir());
    snprintf(body, sizeof body, "env > %s", seen);
    fake_scontrol("env", body);
    setenv("ELASTIC_STORE_TOKEN", "the-token", 1);
    setenv("ELASTIC_ETCD_PASSWORD", "the-password", 1);
    char detail[256];
    ASSERT_OK(elastic__slurm_drain("node2", "x", 5000, detail, sizeof detail));
    FILE *file = fopen(seen, "r");
    ASSERT(file != NULL);
    char got[65536];
    size_t n = fread(got, 1, sizeof got - 1, file);
    fclose(file);
    got[n] = '\0';
    ASSERT(strstr(got, "SLURM_JOB_NODELIST=") != NULL); /* the rest is there */
    ASSERT(strstr(got, "the-token") == NULL);
    ASSERT(strstr(got, "the-password") == NULL);
}
