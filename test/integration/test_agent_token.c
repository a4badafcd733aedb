/*
 * The store token across hosts: a multi-node job reads a long token from a
 * file, uncut, and its workers reach the store without the token in their
 * environment; without a token a multi-node job warns once, or refuses
 * under require_token.
 */
#include "support/agent_harness.h"
#include "support/elasticrun_args.h"
#include "test.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define RUN_MS 60000

static int wait_code(pid_t pid, const char *name)
{
    int status = 0;
    if (!agent_harness_wait_exit(pid, RUN_MS, &status)) {
        kill(pid, SIGKILL);
        FAIL("%s did not exit", name);
    }
    ASSERT(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static pid_t agent(const char *endpoint, const char *conf, const char *report, const char *env_dir,
                   const char *const *env, const char *name)
{
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                        "--rdzv-endpoint", endpoint, "--rdzv-id", "tokjob", "--rdzv-conf", conf,
                        "--local-addr", "127.0.0.1", "--no-python", agent_harness_worker(),
                        "--report", report, "--env-dir", env_dir, "--exit-when-world", "2");
    return elasticrun_args_spawn(&cmd, env, name);
}

static int count_lines_with(const char *text, const char *needle)
{
    int n = 0;
    for (const char *at = text; (at = strstr(at, needle)) != NULL; at += strlen(needle)) n++;
    return n;
}

TEST_TIMEOUT(agent_multinode_job_uses_a_long_token_file_uncut, 120)
{
    /* 3000 bytes: far past the old 79-byte cut, within ELASTIC_STORE_TOKEN_MAX. */
    static char token[3001];
    for (size_t i = 0; i < sizeof token - 1; i++) token[i] = (char)('a' + i % 26);
    char token_path[512], report[512], env_dir[512], conf[700];
    agent_harness_path(token_path, sizeof token_path, "token");
    FILE *f = fopen(token_path, "w");
    ASSERT(f != NULL);
    fprintf(f, "%s\n", token);
    fclose(f);
    elastic_store_server_opts o;
    elastic_store_server_opts_init(&o, sizeof o);
    o.token = token;
    elastic_store_server *server = NULL;
    ASSERT_OK(elastic_store_server_start(&o, &server));
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", test_server_port(server));
    agent_harness_path(report, sizeof report, "report");
    agent_harness_path(env_dir, sizeof env_dir, "env");
    mkdir(env_dir, 0700);
    snprintf(conf, sizeof conf, "is_host=0,last_call_timeout=1,token_file=%s", token_path);
    pid_t a = agent(endpoint, conf, report, env_dir, NULL, "agent0");
    pid_t b = agent(endpoint, conf, report, env_dir, NULL, "agent1");
    ASSERT_EQ(wait_code(a, "agent0"), 0);
    ASSERT_EQ(wait_code(b, "agent1"), 0);
    for (int rank = 0; rank < 2; rank++) {
        char path[700];
        snprintf(path, sizeof path, "%s/restart0_rank%d.env", env_dir, rank);
        char *dump = agent_harness_read_file(path);
        if (dump == NULL) FAIL("rank %d wrote no environment", rank);
        ASSERT(strstr(dump, token) == NULL); /* nowhere in the worker's environment */
        ASSERT(strstr(dump, "\nELASTIC_STORE_TOKEN_FILE=") != NULL);
        ASSERT(strstr(dump, "#token_file_mode=600\n") != NULL);
        ASSERT(strstr(dump, "#store_check=ok\n") != NULL);
        free(dump);
    }
    /* A client without the token is refused by the job's store. */
    unsetenv("ELASTIC_STORE_TOKEN");
    unsetenv("ELASTIC_STORE_TOKEN_FILE");
    elastic_store *s = NULL;
    ASSERT_ERR(elastic_store_connect(endpoint, NULL, &s), ELASTIC_EAUTH);
    elastic_store_server_close(server);
}

TEST_TIMEOUT(agent_multinode_without_token_warns_once_or_refuses_when_required, 120)
{
    unsetenv("ELASTIC_STORE_TOKEN");
    unsetenv("ELASTIC_STORE_TOKEN_FILE");
    unsetenv("ELASTIC_REQUIRE_TOKEN");
    elastic_store_server *server = NULL;
    ASSERT_OK(elastic_store_server_start(NULL, &server));
    char endpoint[64], report[512], env_dir[512], err_path[512];
    snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", test_server_port(server));
    agent_harness_path(report, sizeof report, "report");
    agent_harness_path(env_dir, sizeof env_dir, "env");
    mkdir(env_dir, 0700);
    /* Required, by --rdzv-conf and by the environment: refused before joining. */
    pid_t a = agent(endpoint, "is_host=0,require_token=1", report, env_dir, NULL, "conf");
    ASSERT(wait_code(a, "conf") != 0);
    static const char *const require_env[] = { "ELASTIC_REQUIRE_TOKEN=1", NULL };
    pid_t b = agent(endpoint, "is_host=0", report, env_dir, require_env, "env");
    ASSERT(wait_code(b, "env") != 0);
    for (int i = 0; i < 2; i++) {
        agent_harness_path(err_path, sizeof err_path, i == 0 ? "conf.err" : "env.err");
        char *err = agent_harness_read_file(err_path);
        ASSERT(err != NULL);
        if (strstr(err, "require_token") == NULL) FAIL("no reason in %s: %s", err_path, err);
        free(err);
    }
    int64_t keys = 0;
    elastic_store *s = NULL;
    ASSERT_OK(elastic_store_connect(endpoint, NULL, &s));
    ASSERT_OK(elastic_store_num_keys(s, &keys));
    ASSERT_EQ(keys, 0); /* neither joined */
    /* Not required: the job runs, and says once that it has no token. */
    pid_t c = agent(endpoint, "is_host=0,last_call_timeout=1", report, env_dir, NULL, "warn0");
    pid_t d = agent(endpoint, "is_host=0,last_call_timeout=1", report, env_dir, NULL, "warn1");
    ASSERT_EQ(wait_code(c, "warn0"), 0);
    ASSERT_EQ(wait_code(d, "warn1"), 0);
    agent_harness_path(err_path, sizeof err_path, "warn0.err");
    char *err = agent_harness_read_file(err_path);
    ASSERT(err != NULL);
    ASSERT_EQ(count_lines_with(err, "has no token"), 1);
    free(err);
    elastic_store_close(s);
    elastic_store_server_close(server);
}

TEST_TIMEOUT(agent_hosted_store_listens_on_the_endpoint_address_only, 120)
{
    unsetenv("ELASTIC_STORE_TOKEN");
    unsetenv("ELASTIC_STORE_TOKEN_FILE");
    elastic_store_server *probe = NULL; /* a free port for the endpoint */
    ASSERT_OK(elastic_store_server_start(NULL, &probe));
    int port = test_server_port(probe);
    elastic_store_server_close(probe);
    char endpoint[64], elsewhere[64], report[512], env_dir[512];
    snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", port);
    snprintf(elsewhere, sizeof elsewhere, "127.0.0.2:%d",
             port); /* this host too, another address */
    agent_harness_path(report, sizeof report, "report");
    agent_harness_path(env_dir, sizeof env_dir, "env");
    mkdir(env_dir, 0700);
    /* It hosts the store and waits for a second node that never comes. */
    pid_t host = agent(endpoint, "last_call_timeout=1", report, env_dir, NULL, "host");
    elastic_store_opts o;
    elastic_store_opts_init(&o, sizeof o);
    o.connect_timeout_ms = test_scaled_ms(30000);
    elastic_store *s = NULL;
    int rc_up = elastic_store_connect(endpoint, &o, &s);
    elastic_store_close(s);
    s = NULL;
    if (rc_up != 0) kill(host, SIGKILL);
    ASSERT_OK(rc_up);
    o.connect_timeout_ms = 500;
    int rc = elastic_store_connect(elsewhere, &o, &s);
    elastic_store_close(s);
    ASSERT_EQ(kill(host, SIGTERM), 0); /* first: the agent is in its own process group */
    ASSERT_EQ(wait_code(host, "host"), 128 + SIGTERM);
    if (rc == 0) FAIL("the store answered on %s: it listens on every address", elsewhere);
    ASSERT(rc == ELASTIC_ECONNECT || rc == ELASTIC_ETIMEDOUT);
}
