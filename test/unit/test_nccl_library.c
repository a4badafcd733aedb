/* The nccl module against the real NCCL of the CUDA toolkit on a machine
 * without a GPU: it is found and its version read at run time, unique ids are
 * made and exchanged through the store among processes, init without a device
 * fails with one clear line; a missing library is ELASTIC_EUNSUPPORTED; and
 * libelastic.so keeps no link-time dependency on NCCL or CUDA. */
#include "test.h"
#include "nccl/nccl.h"

#include <dlfcn.h>
#include <sys/wait.h>

static void need_real_nccl(void)
{
    unsetenv("ELASTIC_NCCL_LIBRARY");
    unsetenv("ELASTIC_CUDART_LIBRARY");
    if (!elastic_has_feature("nccl")) SKIP("no NCCL and CUDA runtime on this machine");
}

static void alone(void)
{
    static const char *const names[] = { "RANK",
                                         "LOCAL_RANK",
                                         "WORLD_SIZE",
                                         "LOCAL_WORLD_SIZE",
                                         "GROUP_RANK",
                                         "ELASTIC_STORE_ENDPOINT",
                                         "ELASTIC_STORE_PREFIX",
                                         "ELASTIC_AGENT_SOCKET",
                                         "ELASTIC_HEARTBEAT_SHM",
                                         "ELASTIC_HEARTBEAT_SLOT",
                                         "MASTER_ADDR" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) unsetenv(names[i]);
}

/* elastic_has_feature lives in common/; this module registers "nccl" and
 * "cuda" (a constructor in loader.c), so the answers are the loader's own. */
TEST(nccl_feature_probes_are_registered_by_the_module)
{
    unsetenv("ELASTIC_NCCL_LIBRARY");
    unsetenv("ELASTIC_CUDART_LIBRARY");
    ASSERT_EQ(elastic_has_feature("nccl"), nccl__loadable());
    void *cudart = dlopen("libcudart.so.13", RTLD_LAZY | RTLD_LOCAL);
    if (cudart == NULL) cudart = dlopen("libcudart.so.12", RTLD_LAZY | RTLD_LOCAL);
    if (cudart == NULL) SKIP("no CUDA runtime here to compare the \"cuda\" probe with");
    dlclose(cudart);
    ASSERT_EQ(elastic_has_feature("cuda"), 1);
}

TEST(nccl_real_library_loads_with_its_version)
{
    need_real_nccl();
    const nccl__api *api = NULL;
    ASSERT_OK(nccl__load(&api));
    ASSERT(api->version >= NCCL__MIN_VERSION);
    ASSERT(api->cuda_version >= CUDA__MIN_VERSION);
    if (api->version >= NCCL__SHRINK_VERSION) ASSERT(api->comm_shrink != NULL);
    int direct = 0;
    ASSERT_EQ(api->get_version(&direct), 0);
    ASSERT_EQ(direct, api->version);
}

/* One of three processes (forked before the parent has any thread: no lock
 * can be inherited held): waits for the store's endpoint on `in`, takes part
 * in the exchange, writes the id it ended with to `out`. */
static void unique_id_rank(int rank, int in, int out)
{
    char endpoint[64] = "";
    ssize_t got = read(in, endpoint, sizeof endpoint - 1);
    if (got <= 0) _exit(3);
    endpoint[got] = '\0';
    const nccl__api *api = NULL;
    elastic_store *store = NULL;
    nccl__unique_id id;
    if (nccl__load(&api) != 0 || elastic_store_connect(endpoint, NULL, &store) != 0 ||
        nccl__bootstrap_unique_id(api, store, "dp", 0, rank, test_scaled_ms(20000), &id) != 0) {
        fprintf(stderr, "rank %d: %s\n", rank, elastic_last_error());
        _exit(1);
    }
    _exit(write(out, &id, sizeof id) == (ssize_t)sizeof id ? 0 : 1);
}

/* Rank 0 of three processes makes the id; all three read the same 128 bytes. */
TEST_TIMEOUT(nccl_real_unique_id_exchanged_through_store, 60)
{
    need_real_nccl();
    int to_child[3][2], from_child[3][2];
    pid_t pids[3];
    for (int rank = 0; rank < 3; rank++) {
        ASSERT_EQ(pipe(to_child[rank]), 0);
        ASSERT_EQ(pipe(from_child[rank]), 0);
        pids[rank] = fork();
        ASSERT(pids[rank] >= 0);
        if (pids[rank] == 0) unique_id_rank(rank, to_child[rank][0], from_child[rank][1]);
        close(to_child[rank][0]);
        close(from_child[rank][1]);
    }
    elastic_store_server *server = NULL;
    ASSERT_OK(elastic_store_server_start(NULL, &server));
    char endpoint[64];
    int port = 0;
    ASSERT_OK(elastic_store_server_get_port(server, &port));
    int length = snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", port);
    for (int rank = 0; rank < 3; rank++) {
        ASSERT_EQ(write(to_child[rank][1], endpoint, (size_t)length), length);
        close(to_child[rank][1]);
    }
    nccl__unique_id ids[3];
    for (int rank = 0; rank < 3; rank++) {
        int status = 0;
        ASSERT_EQ(read(from_child[rank][0], &ids[rank], sizeof ids[rank]),
                  (ssize_t)sizeof ids[rank]);
        ASSERT_EQ(waitpid(pids[rank], &status, 0), pids[rank]);
        ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    static const nccl__unique_id zero;
    ASSERT(memcmp(&ids[0], &zero, sizeof zero) != 0);
    ASSERT_MEM_EQ(&ids[0], &ids[1], sizeof ids[0]);
    ASSERT_MEM_EQ(&ids[0], &ids[2], sizeof ids[0]);
    elastic_store_server_close(server);
}

TEST(nccl_real_init_without_device_is_unsupported)
{
    need_real_nccl();
    const nccl__api *api = NULL;
    ASSERT_OK(nccl__load(&api));
    int count = 0;
    if (api->cuda_get_device_count(&count) == 0 && count > 0) SKIP("this machine has a GPU");
    alone();
    elastic_worker *w = NULL;
    ASSERT_OK(elastic_worker_init(NULL, &w));
    elastic_nccl_comm *comm = (elastic_nccl_comm *)1;
    ASSERT_ERR(elastic_nccl_comm_init(w, NULL, &comm), ELASTIC_EUNSUPPORTED);
    ASSERT(comm == NULL);
    if (strstr(elastic_last_error(), "no CUDA device") == NULL)
        FAIL("unclear error: %s", elastic_last_error());
    elastic_worker_close(w);
}

TEST(nccl_missing_library_is_unsupported_with_one_line)
{
    setenv("ELASTIC_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
    ASSERT_EQ(elastic_has_feature("nccl"), 0);
    alone();
    elastic_worker *w = NULL;
    ASSERT_OK(elastic_worker_init(NULL, &w));
    elastic_nccl_comm *comm = NULL;
    ASSERT_ERR(elastic_nccl_comm_init(w, NULL, &comm), ELASTIC_EUNSUPPORTED);
    const char *why = elastic_last_error();
    if (strstr(why, "ELASTIC_NCCL_LIBRARY=/nonexistent/libnccl.so.2") == NULL ||
        strchr(why, '\n') != NULL)
        FAIL("not one clear line: %s", why);
    elastic_worker_close(w);
}

TEST(nccl_opts_init_writes_no_further_than_struct_size)
{
    unsigned char raw[sizeof(elastic_nccl_opts) + 8];
    memset(raw, 0xab, sizeof raw);
    size_t small = offsetof(elastic_nccl_opts, device); /* an older caller's struct: size and tag */
    ASSERT_OK(elastic_nccl_opts_init((elastic_nccl_opts *)raw, small));
    for (size_t i = small; i < sizeof raw; i++) ASSERT_EQ(raw[i], 0xab);
    elastic_nccl_opts opts;
    ASSERT_ERR(elastic_nccl_opts_init(&opts, 2), ELASTIC_EINVAL);
    ASSERT_OK(elastic_nccl_opts_init(&opts, sizeof opts));
    ASSERT_EQ(opts.struct_size, sizeof opts);
    ASSERT_STR_EQ(opts.tag, "default");
    ASSERT_EQ(opts.device, -1);
    ASSERT(opts.collective_timeout_ms > 0 && opts.collective_timeout_ms < 600000);
}

TEST(nccl_bad_options_are_refused)
{
    alone();
    elastic_worker *w = NULL;
    ASSERT_OK(elastic_worker_init(NULL, &w));
    elastic_nccl_opts opts;
    elastic_nccl_opts_init(&opts, sizeof opts);
    opts.tag = "a/b";
    elastic_nccl_comm *comm = NULL;
    ASSERT_ERR(elastic_nccl_comm_init(w, &opts, &comm), ELASTIC_EINVAL);
    opts.tag = "dp";
    opts.init_timeout_ms = 0; /* a slip, not a choice: < 0 is the way to say no limit */
    ASSERT_ERR(elastic_nccl_comm_init(w, &opts, &comm), ELASTIC_EINVAL);
    ASSERT_ERR(elastic_nccl_comm_init(NULL, NULL, &comm), ELASTIC_EINVAL);
    ASSERT(elastic_nccl_comm_get(NULL) == NULL);
    elastic_nccl_comm_close(NULL);
    elastic_worker_close(w);
}

/* The shared library must load on machines without NCCL: no NEEDED entry. */
TEST(nccl_libelastic_has_no_link_time_dependency_on_nccl_or_cuda)
{
    const char *dir = getenv("ELASTIC_LIB_DIR");
    if (dir == NULL) SKIP("ELASTIC_LIB_DIR not set");
    char command[4400];
    snprintf(command, sizeof command, "readelf -d '%s/libelastic.so' 2>&1", dir);
    FILE *pipe_in = popen(command, "r");
    ASSERT(pipe_in != NULL);
    char line[512];
    int needed = 0;
    while (fgets(line, sizeof line, pipe_in) != NULL) {
        if (strstr(line, "(NEEDED)") == NULL) continue;
        needed++;
        if (strstr(line, "nccl") != NULL || strstr(line, "cuda") != NULL)
            FAIL("link-time dependency: %s", line);
    }
    int status = pclose(pipe_in);
    if (status != 0 && needed == 0) SKIP("readelf is not available");
    ASSERT(needed > 0);
}
