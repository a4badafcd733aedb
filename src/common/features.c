/*
 * elastic_has_feature(): what this build and this machine can do (see
 * features.h). Built-in parts answer 1 unless the build left them out
 * (ELASTIC_AGENT=0: "agent", "store_server"; ELASTIC_ETCD=0: "etcd");
 * "nccl" and "cuda" are answered by the probes src/nccl/ registers.
 */
#include "common/common.h"
#include "common/features.h"

#include <stdatomic.h>

/* The feature names of the parts this build left out (the Makefile's
 * ELASTIC_<PART>=0 knobs define it, e.g. "agent store_server etcd"). */
#ifndef ELASTIC_LEFT_OUT
#define ELASTIC_LEFT_OUT ""
#endif

#define MAX_PROBES 8

static struct {
    const char *name;
    elastic__feature_probe probe;
} probes[MAX_PROBES];
static atomic_size_t probe_count;

void elastic__feature_register(const char *name, elastic__feature_probe probe)
{
    size_t n = atomic_load_explicit(&probe_count, memory_order_acquire);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(probes[i].name, name) == 0) {
            probes[i].probe = probe;
            return;
        }
    }
    if (n == MAX_PROBES) return; /* src/nccl/ registers two: room to spare */
    probes[n].name = name;
    probes[n].probe = probe;
    atomic_store_explicit(&probe_count, n + 1, memory_order_release);
}

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
    if (name == NULL || name[0] == '\0' || left_out(name)) return 0;
    for (size_t i = 0; i < ELASTIC__ARRAY_LEN(built_in); i++)
        if (strcmp(name, built_in[i]) == 0) return 1;
    size_t n = atomic_load_explicit(&probe_count, memory_order_acquire);
    for (size_t i = 0; i < n; i++)
        if (strcmp(name, probes[i].name) == 0) return probes[i].probe() != 0;
    return 0;
}
