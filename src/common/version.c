/*
 * Version queries and the allocator the caller frees library memory with.
 * (Feature probes are src/nccl/features.c: the answer needs the NCCL loader.)
 */
#include "common/common.h"

#include <stdlib.h>

#define ELASTIC__STR2(x) #x
#define ELASTIC__STR(x)  ELASTIC__STR2(x)

ELASTIC_EXTERN unsigned elastic_version(void)
{
    return ELASTIC_VERSION_HEX;
}

ELASTIC_EXTERN const char *elastic_version_string(void)
{
    return ELASTIC__STR(ELASTIC_VERSION_MAJOR) "." ELASTIC__STR(
        ELASTIC_VERSION_MINOR) "." ELASTIC__STR(ELASTIC_VERSION_PATCH);
}

ELASTIC_EXTERN void elastic_free(void *ptr)
{
    free(ptr);
}

char *elastic__strdup(const char *s)
{
    if (s == NULL) return NULL;
    size_t len = strlen(s) + 1;
    char *copy = malloc(len);
    if (copy != NULL) memcpy(copy, s, len);
    return copy;
}
