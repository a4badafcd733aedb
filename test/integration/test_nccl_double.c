/* The nccl module end to end against the test double of NCCL (collectives
 * between worker processes through shared memory), with the probe monitor as
 * the agent: a hung collective is caught within its deadline plus one watchdog
 * poll and named to the agent, the abort unblocks the trainer threads, an
 * async error is reported, and on reconfigure the communicator shrinks when
 * the new group is the old one minus a dead rank and is re-created otherwise. */
#include "support/probe_harness.h"
#include "probe/monitor.h"

#include <dlfcn.h>

#define DEADLINE_MS          800
#define WATCHDOG_INTERVAL_MS 100 /* the library's default */

static void use_double(harness *h)
{
    const char *lib = getenv("ELASTIC_NCCL_DOUBLE");
    if (lib == NULL) SKIP("ELASTIC_NCCL_DOUBLE not set (run through make test)");
    setenv("ELASTIC_NCCL_LIBRARY", lib, 1);
    setenv("ELASTIC_CUDART_LIBRARY", lib, 1);
    setenv("NCCL_DOUBLE_DIR", test_tmpdir(), 1);
    static char program[4200];
    snprintf(program, sizeof program, "%s", test_helper_path("nccl_worker"));
    h->program = program;
}

static bool log_has(harness *h, int local_rank, const char *needle)
{
    return strstr(harness_log(h, local_rank), needle) != NULL;
}

static bool one_failure(harness *h)
{
    return h->failure_count >= 1;
}
static bool two_training(harness *h)
{
    return log_has(h, 0, "training") && log_has(h, 1, "training");
}
static bool both_unblocked(harness *h)
{
    return log_has(h, 0, "collective returned after abort") &&
           log_has(h, 1, "collective returned after abort");
}
/* Where a rank's crash is the fault, a survivor may not have reached the
 * collective yet when the abort comes: it then never blocks in one. */
static bool abort_stopped(harness *h, int local_rank)
{
    return log_has(h, local_rank, "collective returned after abort") ||
           log_has(h, local_rank, "aborted before its collective");
}
static bool both_stopped_by_the_abort(harness *h)
{
    return abort_stopped(h, 0) && abort_stopped(h, 1);
}

static void start_pair(harness *h, const char *timeout)
{
    harness_init(h, 2);
    use_double(h);
    h->opts.hang_timeout_ms = 0; /* only the nccl watchdog may speak */
    harness_start(h);
    const char *args[] = { "--steps", "100000", "--timeout-ms", timeout, NULL };
    harness_spawn(h, 0, 0, args);
    harness_spawn(h, 1, 1, args);
    harness_run_until(h, two_training, 30000, "both workers to build the communicator");
}

TEST_TIMEOUT(nccl_watchdog_catches_hung_collective_within_deadline, 90)
{
    harness h;
    setenv("NCCL_DOUBLE_HANG", "1:5", 1); /* rank 1's fifth collective never ends */
    char timeout[16];
    snprintf(timeout, sizeof timeout, "%d", DEADLINE_MS);
    start_pair(&h, timeout);
    harness_run_until(&h, one_failure, 30000, "the hang to be reported");
    const probe__failure *f = &h.failures[0];
    ASSERT_STR_EQ(f->probe, "nccl_timeout");
    if (strstr(f->reason, "communicator \"dp\", collective 5 not done after") == NULL)
        FAIL("reason: %s", f->reason);
    ASSERT(f->silent_ms > DEADLINE_MS);
    /* The watchdog looks every interval: a hang is caught by the first look past the deadline. */
    if (f->silent_ms > (uint64_t)test_scaled_ms(DEADLINE_MS + WATCHDOG_INTERVAL_MS + 250))
        FAIL("caught after %llu ms", (unsigned long long)f->silent_ms);
    /* Both trainer threads were blocked on the stream; the aborts let them go. */
    harness_run_until(&h, both_unblocked, 20000, "the blocked collectives to return");
    elastic__text text;
    elastic__text_init(&text, 1 << 20);
    monitor__render(h.monitor, &text);
    /* Every rank's watchdog sees the hang; a real agent stops listening after the first. */
    ASSERT(strstr(text.data, "elastic_probe_failures_total{probe=\"nccl_timeout\"} 0") == NULL);
    ASSERT(strstr(text.data, "elastic_probe_failures_total{probe=\"nccl_timeout\"} ") != NULL);
    elastic__text_free(&text);
    harness_stop(&h);
}

TEST_TIMEOUT(nccl_async_error_is_reported_and_aborts, 90)
{
    harness h;
    setenv("NCCL_DOUBLE_ERROR", "0:3", 1);
    start_pair(&h, "60000");
    harness_run_until(&h, one_failure, 30000, "the async error to be reported");
    ASSERT_OK(probe__monitor_abort_worker(h.monitor, 1,
                                          "rank 0 reported nccl_error")); /* as the agent would */
    const probe__failure *f = &h.failures[0];
    ASSERT_STR_EQ(f->probe, "nccl_error");
    ASSERT_EQ(f->rank, 0);
    if (strstr(f->reason, "rank 0, communicator \"dp\"") == NULL ||
        strstr(f->reason, "remote process exited") == NULL)
        FAIL("reason: %s", f->reason);
    harness_run_until(&h, both_unblocked, 20000, "the blocked collectives to return");
    harness_stop(&h);
}

/* ---- reconfigure: shrink or re-create --------------------------------------------- */

static bool three_training(harness *h)
{
    return log_has(h, 0, "training") && log_has(h, 1, "training") && log_has(h, 2, "training");
}
static bool third_gone(harness *h)
{
    return !h->running[2];
}
static bool two_acked(harness *h)
{
    return h->abort_acks[0] >= 1 && h->abort_acks[1] >= 1;
}
static bool two_done(harness *h)
{
    return !h->running[0] && !h->running[1];
}

static void reconfigure(harness *h, int local_rank, int rank)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "gen/%llu/", (unsigned long long)h->generation);
    channel__worker_env env = { .rank = rank,
                                .local_rank = local_rank,
                                .world_size = 2,
                                .local_world_size = 2,
                                .generation = h->generation,
                                .restart_count = 1,
                                .run_id = "probe-test",
                                .store_endpoint = h->endpoint,
                                .store_prefix = prefix,
                                .heartbeat_shm = probe__monitor_heartbeat_path(h->monitor),
                                .heartbeat_slot = local_rank,
                                .agent_socket = probe__monitor_socket_path(h->monitor) };
    ASSERT_OK(probe__monitor_reconfigure_worker(h->monitor, local_rank, &env));
}

/* Three ranks; rank 2 dies at its 6th step, so ranks 0 and 1 block in that
 * collective until the agent aborts them (or, a survivor that had not reached
 * it yet, find the communicator aborted); the next generation has two ranks
 * (kept in order, or swapped). Returns when both finished 20 good steps. */
static void lose_a_rank(harness *h, bool swap)
{
    harness_init(h, 3);
    use_double(h);
    h->opts.hang_timeout_ms = 0;
    harness_start(h);
    /* (the harness passes at most six arguments; the default collective timeout is 30 s) */
    const char *args[] = { "--steps", "20", "--exit-rank", "2", "--exit-at", "6", NULL };
    for (int i = 0; i < 3; i++) harness_spawn(h, i, i, args);
    harness_run_until(h, three_training, 30000, "three workers to build the communicator");
    harness_run_until(h, third_gone, 30000, "rank 2 to crash");
    ASSERT_OK(probe__monitor_abort_worker(h->monitor, 0, "rank 2 exited with 1"));
    ASSERT_OK(probe__monitor_abort_worker(h->monitor, 1, "rank 2 exited with 1"));
    harness_run_until(h, two_acked, 20000, "abort acknowledgements");
    harness_run_until(h, both_stopped_by_the_abort, 20000,
                      "the survivors' collectives to return or be refused");
    harness_new_generation(h, 2);
    reconfigure(h, 0, swap ? 1 : 0);
    reconfigure(h, 1, swap ? 0 : 1);
    harness_run_until(h, two_done, 60000,
                      "both survivors to finish 20 steps in the new generation");
    if (h->exit_status[0] != 0 || h->exit_status[1] != 0) {
        fprintf(stderr, "--- worker 0:\n%s\n", harness_log(h, 0));
        fprintf(stderr, "--- worker 1:\n%s\n", harness_log(h, 1));
    }
    ASSERT_EQ(h->exit_status[0], 0);
    ASSERT_EQ(h->exit_status[1], 0);
    ASSERT_EQ(h->failure_count, 0);
}

static void expect_method(harness *h, const char *method)
{
    for (int i = 0; i < 2; i++) {
        const char *log = harness_log(h, i);
        const char *line = strstr(log, "reconfigured rank=");
        if (line == NULL || strstr(line, "world=2 generation=2") == NULL ||
            strstr(line, "nccl_ranks=2 method=") == NULL || strstr(line, method) == NULL)
            FAIL("worker %d did not rebuild by %s:\n%s", i, method, log);
        if (strstr(log, "done rank=") == NULL) FAIL("worker %d did not finish:\n%s", i, log);
    }
    elastic__text text;
    elastic__text_init(&text, 1 << 20);
    monitor__render(h->monitor, &text);
    char metric[128];
    snprintf(metric, sizeof metric, "elastic_nccl_comm_build_seconds_count{method=\"%s\"} %d",
             method, strcmp(method, "shrunk") == 0 ? 2 : 5); /* 3 first builds + 2 re-creations */
    if (strstr(text.data, metric) == NULL) FAIL("no %s in the metrics:\n%s", metric, text.data);
    elastic__text_free(&text);
}

TEST_TIMEOUT(nccl_rebuild_shrinks_when_the_group_lost_a_rank, 120)
{
    harness h;
    lose_a_rank(&h, false);
    expect_method(&h, "shrunk");
    harness_stop(&h);
}

TEST_TIMEOUT(nccl_rebuild_recreates_when_ranks_change_order, 120)
{
    harness h;
    lose_a_rank(&h, true);
    expect_method(&h, "created");
    harness_stop(&h);
}

TEST_TIMEOUT(nccl_rebuild_recreates_when_nccl_cannot_shrink, 120)
{
    harness h;
    setenv("NCCL_DOUBLE_VERSION", "22600", 1); /* 2.26: no ncclCommShrink */
    lose_a_rank(&h, false);
    expect_method(&h, "created");
    harness_stop(&h);
}

/* The release call and its 1.0.0 name: elastic_nccl_comm_close ends a
 * healthy communicator with ncclCommDestroy, and elastic_nccl_comm_destroy
 * (deprecated, kept for older callers) does exactly the same. In-process,
 * against the double: a worker alone is a group of one, so a communicator
 * forms at once; the double counts the NCCL calls that ended one. */
TEST_TIMEOUT(nccl_comm_close_and_its_deprecated_alias_both_release, 60)
{
    const char *lib = getenv("ELASTIC_NCCL_DOUBLE");
    if (lib == NULL) SKIP("ELASTIC_NCCL_DOUBLE not set (run through make test)");
    static const char *const agent_env[] = { "RANK",
                                             "LOCAL_RANK",
                                             "WORLD_SIZE",
                                             "LOCAL_WORLD_SIZE",
                                             "GROUP_RANK",
                                             "ELASTIC_STORE_ENDPOINT",
                                             "ELASTIC_AGENT_SOCKET",
                                             "ELASTIC_HEARTBEAT_SHM" };
    for (size_t i = 0; i < sizeof agent_env / sizeof agent_env[0]; i++) unsetenv(agent_env[i]);
    setenv("ELASTIC_NCCL_LIBRARY", lib, 1);
    setenv("ELASTIC_CUDART_LIBRARY", lib, 1);
    setenv("NCCL_DOUBLE_DIR", test_tmpdir(), 1);
    elastic_worker *w = NULL;
    ASSERT_OK(elastic_worker_init(NULL, &w));
    elastic_nccl_opts opts;
    ASSERT_OK(elastic_nccl_opts_init(&opts, sizeof opts));
    opts.init_timeout_ms = test_scaled_ms(20000);
    opts.tag = "closed";
    elastic_nccl_comm *comm = NULL;
    ASSERT_OK(elastic_nccl_comm_init(w, &opts, &comm));
    ASSERT(elastic_nccl_comm_get(comm) != NULL);
    ASSERT_OK(elastic_nccl_comm_check(comm));

    /* the double is loaded now (by the library); its counters are one dlsym away */
    void *handle = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
    ASSERT(handle != NULL);
    void (*calls)(int *, int *) = (void (*)(int *, int *))dlsym(handle, "nccl_double_calls");
    ASSERT(calls != NULL);
    int destroyed = -1, aborted = -1;
    calls(&destroyed, &aborted);
    ASSERT_EQ(destroyed, 0);
    ASSERT_EQ(aborted, 0);

    elastic_nccl_comm_close(comm);
    calls(&destroyed, &aborted);
    ASSERT_EQ(destroyed, 1); /* healthy: destroyed, not aborted */
    ASSERT_EQ(aborted, 0);

    opts.tag = "destroyed";
    comm = NULL;
    ASSERT_OK(elastic_nccl_comm_init(w, &opts, &comm));
    ASSERT(elastic_nccl_comm_get(comm) != NULL);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    elastic_nccl_comm_destroy(comm); /* the old name: the compiler warns, the call still works */
    elastic_nccl_comm_destroy(NULL);
#pragma GCC diagnostic pop
    calls(&destroyed, &aborted);
    ASSERT_EQ(destroyed, 2);
    ASSERT_EQ(aborted, 0);
    dlclose(handle);
    elastic_worker_close(w);
}
