/*
 * Version queries, feature probes, the options-struct copier and the
 * allocator the caller frees library memory with.
 */
#include "common/common.h"
#include "nccl/nccl.h"

#include <dlfcn.h>
#include <stdlib.h>

#define ELASTIC__STR2(x) #x
#define ELASTIC__STR(x) ELASTIC__STR2(x)

ELASTIC_EXTERN unsigned elastic_version(void) { return ELASTIC_VERSION_HEX; }

ELASTIC_EXTERN const char *elastic_version_string(void)
{
    return ELASTIC__STR(ELASTIC_VERSION_MAJOR) "." ELASTIC__STR(ELASTIC_VERSION_MINOR) "." ELASTIC__STR(
        ELASTIC_VERSION_PATCH);
}

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
    static const char *const built_in[] = {"store", "auth", "zstd", "xxhash", "etcd"};
    static const char *const cuda_names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so", NULL};
    if (name == NULL) return 0;
    for (size_t i = 0; i < ELASTIC__ARRAY_LEN(built_in); i++)
        if (strcmp(name, built_in[i]) == 0) return 1;
    if (strcmp(name, "nccl") == 0) return nccl__loadable(); /* both libraries, their versions checked */
    if (strcmp(name, "cuda") == 0) return library_loadable(cuda_names);
    return 0;
}

ELASTIC_EXTERN void elastic_free(void *ptr) { free(ptr); }

char *elastic__strdup(const char *s)
{
    if (s == NULL) return NULL;
    size_t len = strlen(s) + 1;
    char *copy = malloc(len);
    if (copy != NULL) memcpy(copy, s, len);
    return copy;
}
