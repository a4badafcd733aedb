/*
 * Several elasticrun agents on one store (hosted by the test, so any agent
 * may be killed), all on loopback: a killed agent makes the others re-form
 * smaller without consuming budget; a late agent joins the next generation;
 * an exhausted budget ends every agent with the failing rank named; a
 * c10d agent whose endpoint is local hosts the store itself.
 */
#include "support/agent_harness.h"
#include "support/elasticrun_args.h"
#include "test.h"

#include <signal.h>
#include <sys/wait.h>

#define FORM_MS 60000

typedef struct job {
    elastic_store_server *server;
    char endpoint[64];
    char report[512];
    char run_id[64];
} job;

static void job_start_store(job *j, const char *run_id)
{
    ASSERT_OK(elastic_store_server_start(NULL, &j->server));
    snprintf(j->endpoint, sizeof j->endpoint, "127.0.0.1:%d", test_server_port(j->server));
    agent_harness_path(j->report, sizeof j->report, "report");
    snprintf(j->run_id, sizeof j->run_id, "%s", run_id);
}

/* One agent: --nnodes NODES, 2 workers, is_host=0, plus the worker's own args. */
static pid_t job_agent(const job *j, const char *name, const char *nodes, const char *max_restarts,
                       const char *const *worker_args)
{
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--nnodes", nodes, "--nproc-per-node", "2", "--rdzv-backend", "c10d",
                        "--rdzv-endpoint", j->endpoint, "--rdzv-id", j->run_id, "--rdzv-conf",
                        "is_host=0,last_call_timeout=1", "--local-addr", "127.0.0.1",
                        "--max-restarts", max_restarts, "--no-python", agent_harness_worker(),
                        "--report", j->report);
    elasticrun_args_add_list(&cmd, worker_args);
    return elasticrun_args_spawn(&cmd, NULL, name);
}

static int wait_code(pid_t pid, const char *name)
{
    int status = 0;
    if (!agent_harness_wait_exit(pid, FORM_MS, &status)) {
        kill(pid, SIGKILL);
        FAIL("%s did not exit", name);
    }
    ASSERT(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void assert_ranks(const char *report, const char *world_needle, int world)
{
    for (int rank = 0; rank < world; rank++) {
        char needle[32];
        snprintf(needle, sizeof needle, "rank=%d ", rank);
        const char *wanted[] = { "start ", world_needle, needle, NULL };
        if (agent_harness_wait_lines(report, wanted, 1, 1000) < 1)
            FAIL("no worker of rank %d in %s", rank, world_needle);
    }
}

TEST_TIMEOUT(agent_survivors_reform_smaller_after_an_agent_is_killed, 180)
{
    job j;
    job_start_store(&j, "shrink");
    const char *worker[] = { "--exit-when-world", "4", NULL };
    pid_t agents[3];
    char names[3][32];
    for (int i = 0; i < 3; i++) {
        snprintf(names[i], sizeof names[i], "agent%d", i);
        agents[i] = job_agent(&j, names[i], "2:3", "0", worker);
    }
    const char *full[] = { "start ", "world=6 ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(j.report, full, 6, FORM_MS), 6);
    ASSERT_EQ(kill(agents[2], SIGKILL), 0);
    int status;
    ASSERT(agent_harness_wait_exit(agents[2], 10000, &status));
    ASSERT_EQ(wait_code(agents[0], "agent0"),
              0); /* --max-restarts 0: a lost node costs no budget */
    ASSERT_EQ(wait_code(agents[1], "agent1"), 0);
    const char *smaller[] = { "start ", "world=4 ", "restart=0 ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(j.report, smaller, 4, 1000), 4);
    assert_ranks(j.report, "world=4 ", 4);
    elastic_store_server_close(j.server);
}

TEST_TIMEOUT(agent_late_agent_joins_the_next_generation, 180)
{
    job j;
    job_start_store(&j, "grow");
    const char *worker[] = { "--exit-when-world", "8", NULL };
    pid_t agents[4];
    char names[4][32];
    for (int i = 0; i < 3; i++) {
        snprintf(names[i], sizeof names[i], "agent%d", i);
        agents[i] = job_agent(&j, names[i], "3:4", "0", worker);
    }
    const char *three[] = { "start ", "world=6 ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(j.report, three, 6, FORM_MS), 6);
    snprintf(names[3], sizeof names[3], "agent3");
    agents[3] = job_agent(&j, names[3], "3:4", "0", worker);
    for (int i = 0; i < 4; i++) ASSERT_EQ(wait_code(agents[i], names[i]), 0);
    const char *four[] = { "start ", "world=8 ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(j.report, four, 8, 1000), 8);
    assert_ranks(j.report, "world=8 ", 8);
    elastic_store_server_close(j.server);
}

TEST_TIMEOUT(agent_budget_exhausted_on_another_node_names_the_rank_everywhere, 180)
{
    job j;
    job_start_store(&j, "budget");
    const char *worker[] = { "--fail-rank", "3", "--fail-code", "5", NULL };
    pid_t first = job_agent(&j, "agent0", "2", "1", worker);
    pid_t second = job_agent(&j, "agent1", "2", "1", worker);
    ASSERT_NE(wait_code(first, "agent0"), 0);
    ASSERT_NE(wait_code(second, "agent1"), 0);
    for (int i = 0; i < 2; i++) {
        char err_path[512], name[32];
        snprintf(name, sizeof name, "agent%d.err", i);
        char *err = agent_harness_read_file(agent_harness_path(err_path, sizeof err_path, name));
        ASSERT(err != NULL);
        if (strstr(err, "restart budget exhausted") == NULL || strstr(err, "rank 3 ") == NULL ||
            strstr(err, "exit code 5") == NULL ||
            strstr(err, "worker rank 3 fails on purpose") == NULL)
            FAIL("agent%d's summary misses the root cause:\n%s", i, err);
        free(err);
    }
    elastic_store_server_close(j.server);
}

TEST_TIMEOUT(agent_c10d_hosts_the_store_at_a_local_endpoint, 120)
{
    /* A free port for the endpoint: a throwaway server tells us one. */
    elastic_store_server *probe;
    ASSERT_OK(elastic_store_server_start(NULL, &probe));
    char endpoint[64], report[512];
    snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", test_server_port(probe));
    elastic_store_server_close(probe);
    agent_harness_path(report, sizeof report, "report");
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                        "--rdzv-endpoint", endpoint, "--rdzv-id", "hosted", "--local-addr",
                        "127.0.0.1", "--no-python", agent_harness_worker(), "--report", report,
                        "--exit-when-world", "2");
    pid_t host = elasticrun_args_spawn(&cmd, NULL, "host");
    pid_t other = elasticrun_args_spawn(&cmd, NULL, "other");
    ASSERT_EQ(wait_code(other, "other"), 0);
    ASSERT_EQ(wait_code(host, "host"), 0);
    const char *started[] = { "start ", "world=2 ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(report, started, 2, 1000), 2);
}

TEST_TIMEOUT(agent_sigterm_during_the_rendezvous_exits_promptly, 120)
{
    job j;
    job_start_store(&j, "lonely");
    const char *worker[] = { NULL };
    pid_t agent =
        job_agent(&j, "agent", "2", "0", worker); /* waits for a second node that never comes */
    /* It has joined once its record is in the store. */
    elastic_store *store;
    ASSERT_OK(elastic_store_connect(j.endpoint, NULL, &store));
    uint64_t revision = 0;
    while (revision == 0) {
        int rc = elastic_store_watch(store, "rdzv/lonely/", 0, test_scaled_ms(30000), &revision);
        if (rc != 0) FAIL("the agent never joined: %s", elastic_err_name(rc));
    }
    ASSERT_EQ(kill(agent, SIGTERM), 0);
    ASSERT_EQ(wait_code(agent, "agent"), 128 + SIGTERM);
    elastic_store_close(store);
    elastic_store_server_close(j.server);
}

TEST_TIMEOUT(agent_static_backend_node_rank_0_hosts_the_store, 120)
{
    elastic_store_server *probe; /* a free port for --master-port */
    ASSERT_OK(elastic_store_server_start(NULL, &probe));
    char port[16], report[512];
    snprintf(port, sizeof port, "%d", test_server_port(probe));
    elastic_store_server_close(probe);
    agent_harness_path(report, sizeof report, "report");
    pid_t agents[2];
    for (int node = 0; node < 2; node++) {
        char name[32], rank[16];
        snprintf(name, sizeof name, "node%d", node);
        snprintf(rank, sizeof rank, "%d", node);
        elasticrun_args cmd;
        elasticrun_args_init(&cmd);
        elasticrun_args_add(&cmd, "--nnodes", "2", "--nproc-per-node", "2", "--node-rank", rank,
                            "--master-addr", "127.0.0.1", "--master-port", port, "--rdzv-id",
                            "static", "--local-addr", "127.0.0.1", "--no-python",
                            agent_harness_worker(), "--report", report, "--exit-when-world", "4");
        agents[node] = elasticrun_args_spawn(&cmd, NULL, name);
    }
    ASSERT_EQ(wait_code(agents[1], "node1"), 0);
    ASSERT_EQ(wait_code(agents[0], "node0"), 0);
    assert_ranks(report, "world=4 ", 4);
}
