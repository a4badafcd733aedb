/*
 * Names of the rendezvous keys, relative to "rdzv/<run_id>/" (the handle's
 * prefix). The layout and who writes what is in docs/RDZV.md.
 */
#include "rdzv/rdzv.h"

#include <inttypes.h>
#include <stdio.h>

/* r/<round>/<name>: per-round counters and records. */
void rdzv__key_round(char *buf, size_t cap, uint64_t round, const char *name)
{
    snprintf(buf, cap, "r/%" PRIu64 "/%s", round, name);
}

/* r/<round>/n/<slot>/<name>: one node's area in a round; with name "" it is
 * the prefix that node's watcher follows (the trailing '/' keeps slot 1 from
 * matching slot 12). */
void rdzv__key_slot(char *buf, size_t cap, uint64_t round, int slot, const char *name)
{
    snprintf(buf, cap, "r/%" PRIu64 "/n/%d/%s", round, slot, name);
}
