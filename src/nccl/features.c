/*
 * elastic_has_feature(): what this build and this machine can do. It lives
 * with the NCCL module, the highest layer it asks: "nccl" is answered by the
 * NCCL loader (both libraries found, their versions checked), "cuda" by a
 * dlopen probe; the rest is built in.
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

ELASTIC_EXTERN int elastic_has_feature(const char *name)
{
    static const char *const built_in[] = { "store", "auth", "zstd", "xxhash" };
    static const char *const cuda_names[] = { "libcudart.so.13", "libcudart.so.12", "libcudart.so",
                                              NULL };
    if (name == NULL) return 0;
    if (strcmp(name, "etcd") == 0) return ELASTIC_WITH_ETCD; /* make ELASTIC_ETCD=0 leaves it out */
    for (size_t i = 0; i < ELASTIC__ARRAY_LEN(built_in); i++)
        if (strcmp(name, built_in[i]) == 0) return 1;
    if (strcmp(name, "nccl") == 0)
        return nccl__loadable(); /* both libraries, their versions checked */
    if (strcmp(name, "cuda") == 0) return library_loadable(cuda_names);
    return 0;
}
