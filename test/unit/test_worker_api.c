/* The worker API without an agent: alone it is a group of one with a private
 * store; under plain torchrun it has ranks but no store; a bad environment is
 * refused with the variable named. */
#include "test.h"

static void clear_launch_env(void)
{
    static const char *const names[] = { "RANK",
                                         "LOCAL_RANK",
                                         "WORLD_SIZE",
                                         "LOCAL_WORLD_SIZE",
                                         "GROUP_RANK",
                                         "TORCHELASTIC_RESTART_COUNT",
                                         "TORCHELASTIC_RUN_ID",
                                         "MASTER_ADDR",
                                         "MASTER_PORT",
                                         "ELASTIC_STORE_ENDPOINT",
                                         "ELASTIC_STORE_PREFIX",
                                         "ELASTIC_GENERATION",
                                         "ELASTIC_RUN_ID",
                                         "ELASTIC_HEARTBEAT_SHM",
                                         "ELASTIC_HEARTBEAT_SLOT",
                                         "ELASTIC_AGENT_SOCKET" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) unsetenv(names[i]);
}

TEST(worker_alone_runs_as_world_size_one)
{
    clear_launch_env();
    elastic_worker *w = NULL;
    ASSERT_OK(elastic_worker_init(NULL, &w));
    elastic_worker_info info = { .struct_size = sizeof info };
    ASSERT_OK(elastic_worker_get_info(w, &info));
    ASSERT_EQ(info.rank, 0);
    ASSERT_EQ(info.world_size, 1);
    ASSERT_EQ(info.local_world_size, 1);
    ASSERT_EQ(info.attached, 0);
    elastic_store *store = NULL;
    ASSERT_OK(elastic_worker_get_store(w, &store));
    ASSERT(store != NULL);
    ASSERT_OK(elastic_store_set(store, "nccl/id", "abc", 3));
    void *value = NULL;
    size_t len = 0;
    ASSERT_OK(elastic_store_get(store, "nccl/id", 1000, &value, &len));
    ASSERT_EQ(len, 3);
    elastic_free(value);
    for (uint64_t step = 1; step <= 100; step++) {
        ASSERT_OK(elastic_worker_heartbeat(w, step));
        ASSERT_OK(elastic_worker_poll(w));
    }
    ASSERT_OK(elastic_worker_report_step_time(w, 1000));
    ASSERT_OK(elastic_worker_barrier(w, 5000));
    ASSERT_OK(elastic_worker_barrier(w, 5000));
    elastic_worker_close(w);
    elastic_worker_close(NULL);
}

TEST(worker_under_torchrun_takes_ranks_without_store)
{
    clear_launch_env();
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("LOCAL_RANK", "1", 1);
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", "29500", 1);
    elastic_worker *w = NULL;
    ASSERT_OK(elastic_worker_init(NULL, &w));
    elastic_worker_info info = { .struct_size = sizeof info };
    ASSERT_OK(elastic_worker_get_info(w, &info));
    ASSERT_EQ(info.rank, 1);
    ASSERT_EQ(info.world_size, 2);
    ASSERT_EQ(info.master_port, 29500);
    elastic_store *store = (elastic_store *)1;
    ASSERT_ERR(elastic_worker_get_store(w, &store), ELASTIC_ENOTFOUND);
    ASSERT(store == NULL);
    ASSERT_ERR(elastic_worker_barrier(w, 100), ELASTIC_EUNSUPPORTED);
    ASSERT_OK(elastic_worker_heartbeat(w, 1));
    ASSERT_OK(elastic_worker_poll(w));
    elastic_worker_close(w);
}

TEST(worker_init_refuses_bad_environment)
{
    clear_launch_env();
    setenv("RANK", "4", 1);
    setenv("WORLD_SIZE", "4", 1);
    elastic_worker *w = (elastic_worker *)&w;
    ASSERT_ERR(elastic_worker_init(NULL, &w), ELASTIC_EINVAL);
    ASSERT(w == NULL);
    ASSERT(strstr(elastic_last_error(), "RANK") != NULL);
    setenv("RANK", "0", 1);
    setenv("ELASTIC_STORE_ENDPOINT", "127.0.0.1:1", 1);
    ASSERT_ERR(elastic_worker_init(NULL, &w), ELASTIC_EINVAL);
}

TEST(worker_init_reports_unreachable_agent)
{
    clear_launch_env();
    elastic_store_server *server = NULL;
    ASSERT_OK(elastic_store_server_start(NULL, &server));
    char endpoint[64], socket_path[512];
    snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", test_server_port(server));
    snprintf(socket_path, sizeof socket_path, "%s/none.sock", test_tmpdir());
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "1", 1);
    setenv("ELASTIC_STORE_ENDPOINT", endpoint, 1);
    setenv("ELASTIC_STORE_PREFIX", "g/1/", 1);
    setenv("ELASTIC_GENERATION", "1", 1);
    setenv("ELASTIC_AGENT_SOCKET", socket_path, 1);
    elastic_worker *w = NULL;
    ASSERT_ERR(elastic_worker_init(NULL, &w), ELASTIC_ECONNECT);
    ASSERT(strstr(elastic_last_error(), "none.sock") != NULL);
    elastic_store_server_close(server);
}

TEST(worker_opts_are_checked)
{
    clear_launch_env();
    elastic_worker_opts opts;
    elastic_worker_opts_init(&opts, sizeof opts);
    ASSERT_EQ(opts.struct_size, sizeof opts);
    opts.stack_dump_signal = 9; /* SIGKILL */
    elastic_worker *w = NULL;
    ASSERT_ERR(elastic_worker_init(&opts, &w), ELASTIC_EINVAL);
    elastic_worker_opts_init(&opts, sizeof opts);
    opts.store_timeout_ms = 0;
    ASSERT_ERR(elastic_worker_init(&opts, &w), ELASTIC_EINVAL);
    opts.struct_size = 0;
    ASSERT_ERR(elastic_worker_init(&opts, &w), ELASTIC_EINVAL);
    ASSERT_ERR(elastic_worker_init(NULL, NULL), ELASTIC_EINVAL);
    ASSERT_ERR(elastic_worker_heartbeat(NULL, 1), ELASTIC_EINVAL);
    ASSERT_ERR(elastic_worker_poll(NULL), ELASTIC_EINVAL);
}
