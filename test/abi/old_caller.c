/*
 * A caller built against an older, shorter copy of the public structs
 * (older_elastic.h) runs against today's shared library: every options struct
 * is accepted with its defaults beyond the caller's size, every output struct
 * is filled only up to the caller's size (a canary right after it must stay),
 * and a struct_size below the first field or absurd is ELASTIC_EINVAL.
 * Exit status 0 when all holds; otherwise each failure is printed.
 */
#include "older_elastic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CANARY       0xA5
#define CANARY_BYTES 64

static int failures;

#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        if (!(cond)) {                                                    \
            failures++;                                                   \
            fprintf(stderr, "old_caller:%d: %s: ", __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                 \
            fprintf(stderr, " (last error: %s)\n", elastic_last_error()); \
        }                                                                 \
    } while (0)
#define CHECK_OK(call)                                                   \
    do {                                                                 \
        int rc_ = (call);                                                \
        CHECK(rc_ == 0, "%s returned %s", #call, elastic_err_name(rc_)); \
    } while (0)

/* A struct followed by bytes the library must never touch. */
#define GUARDED(type)                       \
    struct {                                \
        type value;                         \
        unsigned char canary[CANARY_BYTES]; \
    }

static void arm(unsigned char *canary)
{
    memset(canary, CANARY, CANARY_BYTES);
}

static int intact(const unsigned char *canary)
{
    for (int i = 0; i < CANARY_BYTES; i++)
        if (canary[i] != CANARY) return 0;
    return 1;
}

static void bad_sizes_are_einval(void)
{
    elastic_store_opts small;
    CHECK(elastic_store_opts_init(&small, 3) == ELASTIC_EINVAL, "struct_size 3 accepted");
    CHECK(strstr(elastic_last_error(), "struct_size") != NULL, "message does not name struct_size");
    CHECK(elastic_store_opts_init(&small, (size_t)1 << 30) == ELASTIC_EINVAL,
          "struct_size 1 GiB accepted");
    CHECK_OK(elastic_store_opts_init(&small, sizeof small));
    small.struct_size = 1;
    elastic_store *store = NULL;
    CHECK(elastic_store_connect("127.0.0.1:1", &small, &store) == ELASTIC_EINVAL,
          "connect took struct_size 1");
}

/* Starts a server with a short options struct; returns its port (0 on failure). */
static int start_server(elastic_store_server **server)
{
    GUARDED(elastic_store_server_opts) opts;
    arm(opts.canary);
    CHECK_OK(elastic_store_server_opts_init(&opts.value, sizeof opts.value));
    CHECK(intact(opts.canary), "server opts_init wrote past the caller's struct");
    CHECK(opts.value.struct_size == sizeof opts.value, "struct_size is %zu",
          opts.value.struct_size);
    CHECK(opts.value.max_key_bytes == 4096, "default max_key_bytes missing");
    int port = 0;
    CHECK_OK(elastic_store_server_start(&opts.value, server));
    if (*server != NULL) CHECK_OK(elastic_store_server_get_port(*server, &port));
    return port;
}

static elastic_store *connect_store(const char *endpoint)
{
    GUARDED(elastic_store_opts) opts;
    arm(opts.canary);
    CHECK_OK(elastic_store_opts_init(&opts.value, sizeof opts.value));
    CHECK(intact(opts.canary), "store opts_init wrote past the caller's struct");
    elastic_store *store = NULL;
    CHECK_OK(elastic_store_connect(endpoint, &opts.value, &store));
    if (store == NULL) return NULL;
    /* ELASTIC_TIMEOUT_DEFAULT: the handle's timeout_ms, which this caller's struct lacks. */
    CHECK_OK(elastic_store_set(store, "k", "v", 1));
    void *value = NULL;
    size_t len = 0;
    CHECK_OK(elastic_store_get(store, "k", ELASTIC_TIMEOUT_DEFAULT, &value, &len));
    CHECK(len == 1 && value != NULL && memcmp(value, "v", 1) == 0, "get returned %zu bytes", len);
    elastic_free(value);
    return store;
}

static void rendezvous(elastic_store *store)
{
    GUARDED(elastic_rdzv_opts) opts;
    arm(opts.canary);
    CHECK_OK(elastic_rdzv_opts_init(&opts.value, sizeof opts.value));
    CHECK(intact(opts.canary), "rdzv opts_init wrote past the caller's struct");
    opts.value.run_id = "older-caller";
    opts.value.store = store;
    elastic_rdzv *rdzv = NULL;
    CHECK_OK(elastic_rdzv_open(&opts.value, &rdzv)); /* node_id: beyond the struct, defaulted */
    if (rdzv == NULL) return;
    GUARDED(elastic_rdzv_result) result;
    arm(result.canary);
    result.value.struct_size = sizeof result.value;
    CHECK_OK(elastic_rdzv_next(rdzv, &result.value));
    CHECK(intact(result.canary), "rdzv_next wrote past the caller's result");
    CHECK(result.value.struct_size == sizeof result.value, "result struct_size became %zu",
          result.value.struct_size);
    CHECK(result.value.generation >= 1 && result.value.world_size == 1, "generation %llu world %d",
          (unsigned long long)result.value.generation, result.value.world_size);

    elastic_rdzv_cause cause; /* an input: time_ms is beyond it and gets the default (now) */
    memset(&cause, 0, sizeof cause);
    cause.struct_size = sizeof cause;
    cause.kind = ELASTIC_RDZV_FAILURE;
    cause.rank = 0;
    cause.exit_code = 3;
    snprintf(cause.reason, sizeof cause.reason, "older caller's failure");
    CHECK_OK(elastic_rdzv_end_generation(rdzv, &cause));

    GUARDED(elastic_rdzv_cause) seen;
    arm(seen.canary);
    seen.value.struct_size = sizeof seen.value;
    CHECK_OK(elastic_rdzv_watch(rdzv, 30000, &seen.value));
    CHECK(intact(seen.canary), "rdzv_watch wrote past the caller's cause");
    CHECK(seen.value.kind == ELASTIC_RDZV_FAILURE && seen.value.exit_code == 3,
          "watch saw kind %d exit %d", seen.value.kind, seen.value.exit_code);
    arm(seen.canary);
    seen.value.struct_size = sizeof seen.value;
    CHECK_OK(elastic_rdzv_first_failure(rdzv, &seen.value));
    CHECK(intact(seen.canary), "rdzv_first_failure wrote past the caller's cause");
    CHECK(strcmp(seen.value.reason, "older caller's failure") == 0, "first failure reason \"%s\"",
          seen.value.reason);
    CHECK_OK(elastic_rdzv_end_job(rdzv));
    elastic_rdzv_free(rdzv);
}

static void worker_alone(void)
{
    static const char *const attach_vars[] = { "RANK",
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
    for (size_t i = 0; i < sizeof attach_vars / sizeof attach_vars[0]; i++)
        unsetenv(attach_vars[i]);
    GUARDED(elastic_worker_opts) opts;
    arm(opts.canary);
    CHECK_OK(elastic_worker_opts_init(&opts.value, sizeof opts.value));
    CHECK(intact(opts.canary), "worker opts_init wrote past the caller's struct");
    elastic_worker *w = NULL;
    CHECK_OK(elastic_worker_init(&opts.value, &w));
    if (w == NULL) return;
    GUARDED(elastic_worker_info) info;
    arm(info.canary);
    info.value.struct_size = sizeof info.value;
    CHECK_OK(elastic_worker_get_info(w, &info.value));
    CHECK(intact(info.canary),
          "worker_get_info wrote past the caller's info (master_addr is beyond it)");
    CHECK(info.value.rank == 0 && info.value.world_size == 1, "rank %d world %d", info.value.rank,
          info.value.world_size);
    elastic_worker_close(w);
}

static void checkpoint(const char *dir)
{
    GUARDED(elastic_ckpt_opts) opts;
    arm(opts.canary);
    CHECK_OK(elastic_ckpt_opts_init(&opts.value, sizeof opts.value));
    CHECK(intact(opts.canary), "ckpt opts_init wrote past the caller's struct");
    opts.value.threads = 1;
    elastic_ckpt *ckpt = NULL;
    CHECK_OK(elastic_ckpt_open(dir, &opts.value, &ckpt)); /* max_blob_bytes: beyond, defaulted */
    if (ckpt == NULL) return;
    elastic_ckpt_blob blob = { "weights", "0123456789", 10, 0 };
    CHECK_OK(elastic_ckpt_save(ckpt, 7, &blob, 1));
    uint64_t step = 0;
    CHECK_OK(elastic_ckpt_latest(ckpt, &step));
    CHECK(step == 7, "latest step %llu", (unsigned long long)step);
    elastic_ckpt_close(ckpt);
}

static void agent(void)
{
    GUARDED(elastic_agent_opts) opts;
    arm(opts.canary);
    CHECK_OK(elastic_agent_opts_init(&opts.value, sizeof opts.value));
    CHECK(intact(opts.canary), "agent opts_init wrote past the caller's struct");
    const char *const late_flag[] = { "elasticrun", "--in-process-recovery", "--no-python",
                                      "/bin/true", NULL };
    CHECK(elastic_agent_parse_args(4, late_flag, NULL, &opts.value) == ELASTIC_EINVAL,
          "a flag beyond the caller's struct was accepted (and would be lost)");
    CHECK(intact(opts.canary), "parse_args wrote past the caller's struct");
    const char *const argv[] = { "elasticrun", "--standalone", "--nproc-per-node",
                                 "1",          "--no-python",  "/bin/true",
                                 NULL };
    CHECK_OK(elastic_agent_parse_args(6, argv, NULL, &opts.value));
    CHECK(intact(opts.canary), "parse_args wrote past the caller's struct");
    CHECK(opts.value.standalone == 1 && opts.value.no_python == 1 && opts.value.argc == 1,
          "parsed badly");
    elastic_agent *a = NULL;
    CHECK_OK(elastic_agent_create(&opts.value, &a));
    if (a == NULL) return;
    GUARDED(elastic_agent_result) result; /* no summary[] field: older and much smaller */
    arm(result.canary);
    result.value.struct_size = sizeof result.value;
    CHECK_OK(elastic_agent_run(a, &result.value));
    CHECK(intact(result.canary), "agent_run wrote past the caller's result");
    CHECK(result.value.exit_code == 0 && result.value.generations >= 1, "exit %d generations %llu",
          result.value.exit_code, (unsigned long long)result.value.generations);
    elastic_agent_free(a);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: old_caller SCRATCH_DIR\n");
        return 2;
    }
    bad_sizes_are_einval();
    elastic_store_server *server = NULL;
    int port = start_server(&server);
    if (port > 0) {
        char endpoint[64];
        snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", port);
        elastic_store *store = connect_store(endpoint);
        if (store != NULL) rendezvous(store);
        elastic_store_close(store);
    }
    elastic_store_server_close(server);
    worker_alone();
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/ckpt", argv[1]);
    checkpoint(dir);
    agent();
    if (failures == 0) printf("old_caller: every call worked with the older structs\n");
    return failures == 0 ? 0 : 1;
}
