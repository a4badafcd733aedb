/*
 * Finds NCCL and the CUDA runtime at first use with dlopen, so libelastic has
 * no link-time dependency on either: ELASTIC_NCCL_LIBRARY / ELASTIC_CUDART_LIBRARY
 * when set, else the loader's path, else the CUDA toolkit's usual place. Their
 * versions are checked once; the result (or the one line saying why not) is kept.
 */
#include "nccl/nccl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static nccl__api loaded;
static int load_rc;
static char load_error[512];

/* Tries the override alone when set (a wrong override is an error, not a
 * reason to pick up some other copy), else each name in turn. */
static void *open_library(const char *override_var, const char *const *names, char *tried,
                          size_t size)
{
    const char *override = getenv(override_var);
    if (override != NULL && *override != '\0') {
        void *handle = dlopen(override, RTLD_NOW | RTLD_LOCAL);
        if (handle == NULL) snprintf(tried, size, "%s=%s: %s", override_var, override, dlerror());
        return handle;
    }
    size_t used = 0;
    tried[0] = '\0';
    for (; *names != NULL; names++) {
        void *handle = dlopen(*names, RTLD_NOW | RTLD_LOCAL);
        if (handle != NULL) return handle;
        used += (size_t)snprintf(tried + used, used < size ? size - used : 0, "%s%s",
                                 used ? ", " : "", *names);
        if (used >= size) used = size - 1;
    }
    return NULL;
}

#define BIND(handle, field, name, required)                                              \
    do {                                                                                 \
        *(void **)&loaded.field = dlsym(handle, name);                                   \
        if (loaded.field == NULL && (required)) {                                        \
            snprintf(load_error, sizeof load_error, "nccl: %s lacks %s", #handle, name); \
            return ELASTIC_EUNSUPPORTED;                                                 \
        }                                                                                \
    } while (0)

static int bind_nccl(void *libnccl)
{
    BIND(libnccl, get_version, "ncclGetVersion", true);
    BIND(libnccl, get_unique_id, "ncclGetUniqueId", true);
    BIND(libnccl, comm_init_rank_config, "ncclCommInitRankConfig", true);
    BIND(libnccl, comm_get_async_error, "ncclCommGetAsyncError", true);
    BIND(libnccl, comm_abort, "ncclCommAbort", true);
    BIND(libnccl, comm_destroy, "ncclCommDestroy", true);
    BIND(libnccl, get_error_string, "ncclGetErrorString", true);
    BIND(libnccl, comm_revoke, "ncclCommRevoke", false);
    BIND(libnccl, comm_shrink, "ncclCommShrink", false);
    BIND(libnccl, get_last_error, "ncclGetLastError", false);
    return 0;
}

static int bind_cudart(void *libcudart)
{
    BIND(libcudart, cuda_get_device_count, "cudaGetDeviceCount", true);
    BIND(libcudart, cuda_set_device, "cudaSetDevice", true);
    BIND(libcudart, cuda_event_create_with_flags, "cudaEventCreateWithFlags", true);
    BIND(libcudart, cuda_event_record, "cudaEventRecord", true);
    BIND(libcudart, cuda_event_query, "cudaEventQuery", true);
    BIND(libcudart, cuda_event_destroy, "cudaEventDestroy", true);
    BIND(libcudart, cuda_get_error_string, "cudaGetErrorString", true);
    BIND(libcudart, cuda_runtime_get_version, "cudaRuntimeGetVersion", true);
    return 0;
}

static int check_versions(void)
{
    int rc = loaded.get_version(&loaded.version);
    if (rc != NCCL__SUCCESS || loaded.version < NCCL__MIN_VERSION) {
        snprintf(load_error, sizeof load_error,
                 "nccl: NCCL version %d is older than the %d this library needs", loaded.version,
                 NCCL__MIN_VERSION);
        return ELASTIC_EUNSUPPORTED;
    }
    if (loaded.version < NCCL__SHRINK_VERSION)
        loaded.comm_shrink = NULL; /* present but not the one we know */
    rc = loaded.cuda_runtime_get_version(&loaded.cuda_version);
    if (rc != CUDA__SUCCESS || loaded.cuda_version < CUDA__MIN_VERSION) {
        snprintf(load_error, sizeof load_error, "nccl: CUDA runtime version %d is older than %d",
                 loaded.cuda_version, CUDA__MIN_VERSION);
        return ELASTIC_EUNSUPPORTED;
    }
    return 0;
}

static void load(void)
{
    static const char *const nccl_names[] = { "libnccl.so.2", "libnccl.so",
                                              "/usr/local/cuda/lib64/libnccl.so.2",
                                              "/usr/local/cuda/lib/libnccl.so.2", NULL };
    static const char *const cudart_names[] = { "libcudart.so.13",
                                                "libcudart.so.12",
                                                "libcudart.so",
                                                "/usr/local/cuda/lib64/libcudart.so.13",
                                                "/usr/local/cuda/lib64/libcudart.so.12",
                                                "/usr/local/cuda/lib/libcudart.so",
                                                NULL };
    char tried[384];
    void *libnccl = open_library("ELASTIC_NCCL_LIBRARY", nccl_names, tried, sizeof tried);
    if (libnccl == NULL) {
        snprintf(load_error, sizeof load_error, "nccl: NCCL not found (tried %s)", tried);
        load_rc = ELASTIC_EUNSUPPORTED;
        return;
    }
    void *libcudart = open_library("ELASTIC_CUDART_LIBRARY", cudart_names, tried, sizeof tried);
    if (libcudart == NULL) {
        snprintf(load_error, sizeof load_error, "nccl: the CUDA runtime not found (tried %s)",
                 tried);
        load_rc = ELASTIC_EUNSUPPORTED;
        return;
    }
    /* The handles stay open for the life of the process: NCCL's own threads
     * may outlive any communicator. */
    load_rc = bind_nccl(libnccl);
    if (load_rc == 0) load_rc = bind_cudart(libcudart);
    if (load_rc == 0) load_rc = check_versions();
    if (load_rc == 0)
        ELASTIC_LOG_I("nccl", "NCCL %d and CUDA runtime %d loaded%s", loaded.version,
                      loaded.cuda_version, loaded.comm_shrink != NULL ? " (shrink available)" : "");
}

int nccl__load(const nccl__api **api)
{
    pthread_once(&load_once, load);
    if (load_rc != 0) return elastic__fail(load_rc, "%s", load_error);
    *api = &loaded;
    return 0;
}

int nccl__loadable(void)
{
    pthread_once(&load_once, load);
    return load_rc == 0;
}

void nccl__config_init(nccl__config *config, const char *name)
{
    const int undef = NCCL__CONFIG_UNDEF_INT;
    *config = (nccl__config){ .size = sizeof *config,
                              .magic = NCCL__CONFIG_MAGIC,
                              .version = 22809,
                              .blocking = 0,
                              .cga_cluster_size = undef,
                              .min_ctas = undef,
                              .max_ctas = undef,
                              .split_share = undef,
                              .traffic_class = undef,
                              .comm_name = name,
                              .collnet_enable = undef,
                              .cta_policy = undef,
                              .shrink_share = undef,
                              .nvls_ctas = undef,
                              .channels_per_net_peer = undef,
                              .nvlink_centric_sched = undef };
}

int nccl__fail(const nccl__api *api, void *comm, int result, const char *what)
{
    const char *text = api->get_error_string != NULL ? api->get_error_string(result) : NULL;
    const char *last =
        comm != NULL && api->get_last_error != NULL ? api->get_last_error(comm) : NULL;
    return elastic__fail(ELASTIC_EIO, "nccl: %s: %s (%d)%s%s", what,
                         text != NULL ? text : "NCCL error", result,
                         last != NULL && *last != '\0' ? ": " : "", last != NULL ? last : "");
}
