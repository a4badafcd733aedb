/*
 * Job-wide straggler scores with real agents on loopback: two nodes whose
 * workers step at 20 ms and at 60 ms (3x slower); both agents find the slow
 * node through the store's per-node records and name it, and only it.
 */
#include "support/agent_harness.h"
#include "support/elasticrun_args.h"
#include "test.h"

#include <signal.h>
#include <sys/wait.h>

static const char *probe_worker(void)
{
    static char helper[1024];
    snprintf(helper, sizeof helper, "%s", test_helper_path("probe_worker"));
    return helper;
}

static pid_t node_agent(const char *endpoint, const char *events, const char *step_ms,
                        const char *name)
{
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--nnodes", "2", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
                        "--rdzv-endpoint", endpoint, "--rdzv-id", "nodestrag", "--rdzv-conf",
                        "is_host=0,last_call_timeout=1", "--local-addr", "127.0.0.1",
                        "--monitor-interval", "0.2", "--straggler-window", "3",
                        "--straggler-rounds", "3", "--event-log", events, "--no-python",
                        probe_worker(), "steady", step_ms);
    return elasticrun_args_spawn(&cmd, NULL, name);
}

TEST_TIMEOUT(agent_node_straggler_found_job_wide, 120)
{
    elastic_store_server *server = NULL;
    ASSERT_OK(elastic_store_server_start(NULL, &server));
    char endpoint[64], events_fast[512], events_slow[512];
    snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", test_server_port(server));
    agent_harness_path(events_fast, sizeof events_fast, "fast.events");
    agent_harness_path(events_slow, sizeof events_slow, "slow.events");
    pid_t fast = node_agent(endpoint, events_fast, "20", "fast");
    pid_t slow = node_agent(endpoint, events_slow, "60", "slow");
    /* Each agent's verdict; the slow agent names itself ("node" and "straggler" alike). */
    const char *found[] = { "\"event\":\"node_straggler\"", NULL };
    int fast_seen = agent_harness_wait_lines(events_fast, found, 1, test_scaled_ms(60000));
    int slow_seen = agent_harness_wait_lines(events_slow, found, 1, test_scaled_ms(60000));
    char fast_line[1024] = "", slow_line[1024] = "";
    if (fast_seen == 1) agent_harness_nth_line(events_fast, found, 0, fast_line, sizeof fast_line);
    if (slow_seen == 1) agent_harness_nth_line(events_slow, found, 0, slow_line, sizeof slow_line);
    kill(fast, SIGTERM);
    kill(slow, SIGTERM);
    int status;
    if (!agent_harness_wait_exit(fast, 30000, &status)) kill(fast, SIGKILL);
    if (!agent_harness_wait_exit(slow, 30000, &status)) kill(slow, SIGKILL);
    elastic_store_server_close(server);
    ASSERT_EQ(fast_seen, 1);
    ASSERT_EQ(slow_seen, 1);
    /* The slow agent's own node id, from its event's reporter field. */
    const char *reporter = strstr(slow_line, "\"node\":\"");
    ASSERT(reporter != NULL);
    char slow_id[160];
    ASSERT_EQ(sscanf(reporter + 8, "%159[^\"]", slow_id), 1);
    char needle[200];
    snprintf(needle, sizeof needle, "\"straggler\":\"%s\"", slow_id);
    ASSERT(strstr(slow_line, needle) != NULL);
    ASSERT(strstr(fast_line, needle) != NULL); /* the fast node names the slow one, not itself */
}
