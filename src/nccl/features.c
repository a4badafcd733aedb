/*
 * elastic_has_feature(): what this build and this machine can do. It lives
 * with the NCCL module, the highest layer it asks: "nccl" is answered by the
 * NCCL loader (both libraries found, their versions checked), "cuda" by a
 * dlopen probe; the rest is built in, unless the build left its part out
 * (ELASTIC_AGENT=0: "agent", "store_server"; ELASTIC_ETCD=0: "etcd").
 */
#include "common/common.h"
#include "nccl/nccl.h"

#include <dlfcn.h>

/* True when a shared library can be loaded here (NCCL/CUDA are optional). */
static bool library_loadable(const char *const *names)
{
    for (; *names != NULL; names++) {
        void *handle = dlopen(*names, RTLD_LAZY | RTLD_LOCAL);
        if (handle != NULL) {
            dlclose(handle);
            return true;
        }
    }
    return false;
}

/* The feature names of the parts this build left out (the Makefile's
 * ELASTIC_<PART>=0 knobs define it, e.g. "agent store_server etcd"). */
#ifndef ELASTIC_LEFT_OUT
#define ELASTIC_LEFT_OUT ""
#endif

static bool left_out(const char *name)
{
    size_t len = strlen(name);
    for (const char *p = ELASTIC_LEFT_OUT; *p != '\0'; p += strcspn(p, " "), p += *p == ' ') {
        if (strncmp(p, name, len) == 0 && (p[len] == ' ' || p[len] == '\0')) return true;
    }
    return false;
}

ELASTIC_EXTERN int elastic_has_feature(const char *name)
{
    static const char *const built_in[] = { "store", "auth",  "zstd",        "xxhash",
                                            "etcd",  "agent", "store_server" };
    static const char *const cuda_names[] = { "libcudart.so.13", "libcudart.so.12", "libcudart.so",
                                              NULL };
    if (name == NULL || name[0] == '\0' || left_out(name)) return 0;
    for (size_t i = 0; i < ELASTIC__ARRAY_LEN(built_in); i++)
        if (strcmp(name, built_in[i]) == 0) return 1;
    if (strcmp(name, "nccl") == 0)
        return nccl__loadable(); /* both libraries, their versions checked */
    if (strcmp(name, "cuda") == 0) return library_loadable(cuda_names);
    return 0;
}
