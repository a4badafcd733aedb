/*
 * The struct_size rule of docs/ABI.md with today's header: a caller's struct
 * may be shorter (older) or longer (newer) than the library's; the library
 * never writes past the caller's struct_size, reads only what it covers, and
 * refuses a size below the first field or an absurd one.
 */
#include "test.h"

#include <stddef.h>

/* A newer caller: today's struct followed by fields this library does not know. */
typedef struct newer_store_opts {
    elastic_store_opts known;
    int64_t future_field;
    unsigned char canary[32];
} newer_store_opts;

TEST(abi_opts_init_writes_only_the_callers_size)
{
    unsigned char buffer[sizeof(elastic_store_opts) + 32];
    memset(buffer, 0xA5, sizeof buffer);
    size_t older = offsetof(elastic_store_opts, connect_timeout_ms); /* no timeouts yet */
    ASSERT_OK(elastic_store_opts_init((elastic_store_opts *)(void *)buffer, older));
    for (size_t i = older; i < sizeof buffer; i++) ASSERT_EQ(buffer[i], 0xA5);
    elastic_store_opts seen;
    memcpy(&seen, buffer, sizeof seen);
    ASSERT_EQ(seen.struct_size, older);
    ASSERT_STR_EQ(seen.prefix, "");
}

TEST(abi_opts_init_zeroes_a_newer_callers_tail)
{
    newer_store_opts opts;
    memset(&opts, 0xA5, sizeof opts);
    ASSERT_OK(elastic_store_opts_init(&opts.known, offsetof(newer_store_opts, canary)));
    ASSERT_EQ(opts.known.struct_size, offsetof(newer_store_opts, canary));
    ASSERT_EQ(opts.known.timeout_ms, 30000);
    ASSERT_EQ(opts.future_field, 0);
    for (size_t i = 0; i < sizeof opts.canary; i++) ASSERT_EQ(opts.canary[i], 0xA5);
}

TEST(abi_bad_struct_size_is_einval_naming_the_struct)
{
    elastic_worker_opts opts;
    ASSERT_ERR(elastic_worker_opts_init(&opts, sizeof(size_t) - 1), ELASTIC_EINVAL);
    ASSERT(strstr(elastic_last_error(), "elastic_worker_opts.struct_size") != NULL);
    ASSERT_ERR(elastic_worker_opts_init(&opts, (size_t)1 << 40), ELASTIC_EINVAL);
    ASSERT(strstr(elastic_last_error(), "not initialised") != NULL);
    ASSERT_ERR(elastic_worker_opts_init(NULL, sizeof opts), ELASTIC_EINVAL);
    ASSERT_OK(elastic_worker_opts_init(&opts, sizeof opts));
    opts.struct_size = 0;
    elastic_worker *w = NULL;
    ASSERT_ERR(elastic_worker_init(&opts, &w), ELASTIC_EINVAL);
    ASSERT(w == NULL);
}

TEST(abi_output_struct_is_filled_up_to_the_callers_size)
{
    static const char *const attach_vars[] = { "RANK",
                                               "LOCAL_RANK",
                                               "WORLD_SIZE",
                                               "LOCAL_WORLD_SIZE",
                                               "GROUP_RANK",
                                               "TORCHELASTIC_RUN_ID",
                                               "MASTER_ADDR",
                                               "MASTER_PORT",
                                               "ELASTIC_STORE_ENDPOINT",
                                               "ELASTIC_AGENT_SOCKET",
                                               "ELASTIC_HEARTBEAT_SHM",
                                               "ELASTIC_HEARTBEAT_SLOT" };
    for (size_t i = 0; i < sizeof attach_vars / sizeof attach_vars[0]; i++)
        unsetenv(attach_vars[i]);
    elastic_worker *w = NULL;
    ASSERT_OK(elastic_worker_init(NULL, &w));
    /* Older: stops before run_id; the library must not write it. */
    elastic_worker_info info;
    memset(&info, 0xA5, sizeof info);
    info.struct_size = offsetof(elastic_worker_info, run_id);
    ASSERT_OK(elastic_worker_get_info(w, &info));
    ASSERT_EQ(info.struct_size, offsetof(elastic_worker_info, run_id));
    ASSERT_EQ(info.world_size, 1);
    ASSERT_EQ((unsigned char)info.run_id[0], 0xA5);
    /* Newer: larger than the library's; struct_size comes back as what was filled. */
    struct {
        elastic_worker_info known;
        int64_t future_field;
    } newer;
    memset(&newer, 0xA5, sizeof newer);
    newer.known.struct_size = sizeof newer;
    ASSERT_OK(elastic_worker_get_info(w, &newer.known));
    ASSERT_EQ(newer.known.struct_size, sizeof(elastic_worker_info));
    ASSERT_EQ(newer.future_field, 0);
    /* Unset: refused before anything is written. */
    memset(&info, 0, sizeof info);
    ASSERT_ERR(elastic_worker_get_info(w, &info), ELASTIC_EINVAL);
    elastic_worker_close(w);
}

TEST(abi_null_options_mean_all_defaults)
{
    elastic_store_server *server = NULL;
    ASSERT_OK(elastic_store_server_start(NULL, &server));
    int port = 0;
    ASSERT_OK(elastic_store_server_get_port(server, &port));
    ASSERT(port > 0 && port < 65536);
    ASSERT_ERR(elastic_store_server_get_port(server, NULL), ELASTIC_EINVAL);
    elastic_store_server_close(server);
}
