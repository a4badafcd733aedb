/*
 * A generation that ends while the agents are still forming it. Found by the
 * chaos soak on etcd: two members of a new generation died right after its
 * seal; the others' next() was still inside its memory-tier plan (which
 * waits for every member's record, 30 s by default) when the rendezvous
 * said the generation had ended. The agent dropped that news, then started
 * workers for the dead generation, which nobody ended again: 44 s of
 * silence until a worker was killed.
 *
 * Here the third member is this test's own rendezvous handle: it joins last
 * (so it is neither rank 0 nor the job store's host), never publishes a
 * memory-tier record, and leaves as soon as the generation formed. The two
 * agents must end that generation (the news held and replayed, the plan's
 * wait cut short) and go on as a generation of two, well within the plan's
 * 30 s.
 */
#include "support/agent_harness.h"
#include "support/elasticrun_args.h"
#include "support/etcd_fixture.h"
#include "support/rdzv_fixture.h"
#include "support/rdzv_await_key.h"

#include <signal.h>
#include <sys/stat.h>

#define RUN_ID "forming"

static long read_count(rdzv__backend *b, const char *key)
{
    void *value = NULL;
    size_t len = 0;
    int rc = b->ops->get(b, key, &value, &len);
    long count = rc == 0 && len < 32 ? strtol(value, NULL, 10) : 0;
    elastic_free(value);
    if (rc != 0 && rc != ELASTIC_ENOTFOUND) FAIL("get %s: %s", key, elastic_last_error());
    return count;
}

/* Polls a key of the run until it holds at least `want` (a count) or exists. */
static void await_count(rdzv__backend *b, const char *key, long want, int timeout_ms)
{
    uint64_t deadline = etcd_fixture_now_ms() + (uint64_t)test_scaled_ms(timeout_ms);
    while (read_count(b, key) < want) {
        if (etcd_fixture_now_ms() > deadline)
            FAIL("%s below %ld after %d ms", key, want, timeout_ms);
        struct timespec pause = { 0, 20 * 1000000L };
        nanosleep(&pause, NULL);
    }
}

static pid_t spawn_agent(const etcd_cluster *c, int i, char *events, size_t events_size)
{
    char name[32], dir[512], ckpt[600], trainer[1024];
    /* Copied: test_example_path's buffer is static, and the spawn uses it too. */
    snprintf(trainer, sizeof trainer, "%s", test_example_path("demo_trainer"));
    snprintf(name, sizeof name, "forming-%d", i);
    agent_harness_path(dir, sizeof dir, name);
    mkdir(dir, 0755);
    snprintf(ckpt, sizeof ckpt, "%s/ckpt", dir);
    mkdir(ckpt, 0755);
    snprintf(events, events_size, "%s/events.jsonl", dir);
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    /* No --rdzv-conf: the defaults users get. */
    elasticrun_args_add(&cmd, "--nnodes", "2:3", "--nproc-per-node", "1", "--rdzv-backend", "etcd",
                        "--rdzv-endpoint", c->endpoints, "--rdzv-id", RUN_ID, "--local-addr",
                        "127.0.0.1", "--memory-ckpt", "--memory-ckpt-limit", "64M");
    elasticrun_args_addf(&cmd, "--event-log=%s", events);
    elasticrun_args_add(&cmd, "--no-python", trainer, "--ckpt-dir", ckpt, "--steps", "60",
                        "--step-ms", "20", "--memory-every", "1", "--state-mib", "1");
    return elasticrun_args_spawn(&cmd, NULL, name);
}

/* What an agent said (its stderr) and journaled, for a failure's message. */
static const char *story(int i, const char *events)
{
    static char text[65536];
    char path[600];
    snprintf(path, sizeof path, "%s/forming-%d.err", test_tmpdir(), i);
    char *err = agent_harness_read_file(path), *journal = agent_harness_read_file(events);
    snprintf(text, sizeof text, "stderr:\n%.30000s\nevents:\n%.30000s", err ? err : "",
             journal ? journal : "");
    free(err);
    free(journal);
    return text;
}

static uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

TEST_TIMEOUT(agent_etcd_a_member_lost_while_the_generation_forms_ends_it, 180)
{
    etcd_cluster c;
    etcd_cluster_start(&c, 1);
    rdzv__etcd_conf conf = { .endpoints = c.endpoints, .timeout_ms = test_scaled_ms(5000) };
    rdzv__backend *b = NULL;
    ASSERT_OK(rdzv__backend_etcd_open(&conf, RUN_ID, &b));
    pid_t agents[2];
    char events[2][600];
    for (int i = 0; i < 2; i++) agents[i] = spawn_agent(&c, i, events[i], sizeof events[i]);
    await_count(b, "r/1/count", 2, 60000); /* both agents joined round 1 */

    /* The third member: it completes the round (max_nodes) as its last. */
    rdzv_env unused = { 0 };
    elastic_rdzv_opts o;
    rdzv_test_opts(&o, &unused, RUN_ID, 2, 3);
    o.endpoint = NULL;
    o.backend = ELASTIC_RDZV_BACKEND_ETCD;
    o.etcd_endpoints = c.endpoints;
    o.node_id = "test-member";
    rdzv_node member;
    rdzv_node_open(&member, &o);
    rdzv_node_join(&member);
    rdzv_node_expect_joined(&member, 30000);
    ASSERT_EQ(member.result.generation, 1u);
    ASSERT_EQ(member.result.group_world_size, 3);
    ASSERT_EQ(member.result.group_rank, 2);
    /* The store host published: the agents are in their memory-tier plan,
     * which waits for this member's record. */
    rdzv_await_key(b, "r/1/store", true, 30000);
    uint64_t left_at = wall_ms();
    rdzv_node_close(&member); /* its lease revoked: the generation loses a member */

    for (int i = 0; i < 2; i++) {
        int status = 0;
        if (!agent_harness_wait_exit(agents[i], test_scaled_ms(90000), &status)) {
            kill(agents[0], SIGKILL);
            kill(agents[1], SIGKILL);
            FAIL("agent %d did not finish: generation 1 was never ended here\n%s", i,
                 story(i, events[i]));
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            FAIL("agent %d: status %d\n%s", i, status, story(i, events[i]));
        agents[i] = -1;
    }
    for (int i = 0; i < 2; i++) {
        char line[4096];
        const char *ended[] = { "\"generation_ended\"", "\"generation\":1,", NULL };
        const char *two[] = { "\"generation_formed\"", "\"group_world_size\":2", NULL };
        if (!agent_harness_nth_line(events[i], ended, 0, line, sizeof line))
            FAIL("agent %d: generation 1 did not end:\n%s", i, story(i, events[i]));
        if (!agent_harness_nth_line(events[i], two, 0, line, sizeof line))
            FAIL("agent %d: no generation of two:\n%s", i, story(i, events[i]));
        long long formed_at = agent_harness_json_int(line, "ts_ms");
        ASSERT(formed_at > 0);
        long long took = formed_at - (long long)left_at;
        printf("# agent %d: member left -> generation of two formed in %lld ms\n", i, took);
        /* The plan's wait gives up when the generation ends, not after 30 s. */
        if (took > test_scaled_ms(15000))
            FAIL("agent %d re-formed %lld ms after the member left (the plan waits 30 s)", i, took);
    }
    b->ops->close(b);
    etcd_cluster_stop(&c);
}
