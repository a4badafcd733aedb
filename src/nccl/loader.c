/*
 * Finds NCCL and the CUDA runtime at first use with dlopen, so libelastic has
 * no link-time dependency on either: ELASTIC_NCCL_LIBRARY / ELASTIC_CUDART_LIBRARY
 * when set, else the loader's path, else the CUDA toolkit's usual place. Their
 * versions are checked once; the result (or the one line saying why not) is kept.
 */
#include "nccl/nccl.h"
#include "common/dynlib.h"
#include "common/features.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static nccl__api loaded;
static int load_rc;
static char load_error[512];

#define SYM(field, required, name) ELASTIC__DYNSYM(&loaded.field, required, name)

static int bind_nccl(const elastic__dynlib *libnccl)
{
    const elastic__dynsym syms[] = {
        SYM(get_version, true, "ncclGetVersion"),
        SYM(get_unique_id, true, "ncclGetUniqueId"),
        SYM(comm_init_rank_config, true, "ncclCommInitRankConfig"),
        SYM(comm_get_async_error, true, "ncclCommGetAsyncError"),
        SYM(comm_abort, true, "ncclCommAbort"),
        SYM(comm_destroy, true, "ncclCommDestroy"),
        SYM(get_error_string, true, "ncclGetErrorString"),
        SYM(comm_revoke, false, "ncclCommRevoke"),
        SYM(comm_shrink, false, "ncclCommShrink"),
        SYM(get_last_error, false, "ncclGetLastError"),
    };
    char why[384];
    if (elastic__dynlib_bind(libnccl, syms, ELASTIC__ARRAY_LEN(syms), why, sizeof why) == 0)
        return 0;
    snprintf(load_error, sizeof load_error, "nccl: %s", why);
    return ELASTIC_EUNSUPPORTED;
}

static int bind_cudart(const elastic__dynlib *libcudart)
{
    const elastic__dynsym syms[] = {
        SYM(cuda_get_device_count, true, "cudaGetDeviceCount"),
        SYM(cuda_set_device, true, "cudaSetDevice"),
        SYM(cuda_event_create_with_flags, true, "cudaEventCreateWithFlags"),
        SYM(cuda_event_record, true, "cudaEventRecord"),
        SYM(cuda_event_query, true, "cudaEventQuery"),
        SYM(cuda_event_destroy, true, "cudaEventDestroy"),
        SYM(cuda_get_error_string, true, "cudaGetErrorString"),
        SYM(cuda_runtime_get_version, true, "cudaRuntimeGetVersion"),
    };
    char why[384];
    if (elastic__dynlib_bind(libcudart, syms, ELASTIC__ARRAY_LEN(syms), why, sizeof why) == 0)
        return 0;
    snprintf(load_error, sizeof load_error, "nccl: %s", why);
    return ELASTIC_EUNSUPPORTED;
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

static const char *const cudart_names[] = { "libcudart.so.13",
                                            "libcudart.so.12",
                                            "libcudart.so",
                                            "/usr/local/cuda/lib64/libcudart.so.13",
                                            "/usr/local/cuda/lib64/libcudart.so.12",
                                            "/usr/local/cuda/lib/libcudart.so",
                                            NULL };

/* Opens one of the two libraries; a failure says which and why. */
static int open_one(elastic__dynlib *lib, const char *what, const char *override_var,
                    const char *const *names)
{
    char why[384];
    if (elastic__dynlib_open(lib, override_var, names, RTLD_NOW | RTLD_LOCAL, why, sizeof why) == 0)
        return 0;
    snprintf(load_error, sizeof load_error, "nccl: %s not found (%s)", what, why);
    return ELASTIC_EUNSUPPORTED;
}

static void load(void)
{
    static const char *const nccl_names[] = { "libnccl.so.2", "libnccl.so",
                                              "/usr/local/cuda/lib64/libnccl.so.2",
                                              "/usr/local/cuda/lib/libnccl.so.2", NULL };
    /* The handles stay open for the life of the process: NCCL's own threads
     * may outlive any communicator. */
    elastic__dynlib libnccl, libcudart;
    load_rc = open_one(&libnccl, "NCCL", "ELASTIC_NCCL_LIBRARY", nccl_names);
    if (load_rc == 0)
        load_rc = open_one(&libcudart, "the CUDA runtime", "ELASTIC_CUDART_LIBRARY", cudart_names);
    if (load_rc == 0) load_rc = bind_nccl(&libnccl);
    if (load_rc == 0) load_rc = bind_cudart(&libcudart);
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

/* "cuda": the runtime can be loaded here (no version check, no NCCL needed). */
static int cuda_loadable(void)
{
    return elastic__dynlib_loadable(cudart_names);
}

/* elastic_has_feature lives in common/ (features.h): this module answers
 * "nccl" (both libraries found, their versions checked) and "cuda". */
__attribute__((constructor)) static void register_features(void)
{
    elastic__feature_register("nccl", nccl__loadable);
    elastic__feature_register("cuda", cuda_loadable);
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
