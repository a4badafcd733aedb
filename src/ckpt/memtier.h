/*
 * The memory tier (docs/CHECKPOINT.md, "Memory tier"): checkpoint shards in
 * shared memory that the node's agent holds, in the disk tier's format.
 *
 * A tier is a directory on tmpfs (by default under /dev/shm) that the agent
 * creates and owns:
 *
 *   ROOT/.elastic-memory-tier   the marker: limit and steps kept; also the lock
 *   ROOT/own/                   a checkpoint directory: this node's ranks' shards
 *   ROOT/peer/<node>/           replicas of other nodes' shards (same layout)
 *
 * Files on tmpfs are memory that outlives the process that wrote it: a worker
 * that crashes leaves its shards for its replacement, which reads them at
 * memcpy speed through the ordinary reader (same checksums, read_shard,
 * resharding). The agent removes the tree when it leaves (its reaper when it
 * is killed), so a restarted agent starts empty.
 *
 * Bounded: every writer into the tree (the node's workers, the agent's
 * replica receiver) reserves room before it writes (fallocate under the
 * marker's flock, counting what the tree already holds), so the tier never
 * holds more than its limit: a save over it fails with ELASTIC_ENOSPC and a
 * message naming the limit, never with the kernel's OOM killer.
 */
#ifndef ELASTIC_CKPT_MEMTIER_H
#define ELASTIC_CKPT_MEMTIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CKPT_MEM_MARKER    ".elastic-memory-tier"
#define CKPT_MEM_OWN_DIR   "own"
#define CKPT_MEM_PEER_DIR  "peer"
#define CKPT_MEM_STEPS_MAX 64u /* K: steps kept per writer (default 2) */
#define CKPT_MEM_KEEP      ".elastic-memory-keep"
#define CKPT_MEM_KEEP_MAX  4u /* steps the keep file may name */

typedef struct ckpt_mem_tier {
    char *root;     /* NULL: not in a memory tier */
    uint64_t limit; /* bytes the whole tree may hold */
    unsigned steps; /* K: the step being written and K-1 committed ones */
    int lock_fd;    /* the marker, flocked around each reservation */
} ckpt_mem_tier;

/* Creates ROOT (mode 0700; its parent must exist), own/ and peer/, and
 * writes the marker. An existing tier is emptied first: what a previous
 * holder left is not trusted (the agent restarted). */
int ckpt__mem_tier_create(const char *root, uint64_t limit, unsigned steps);
/* Removes the whole tree (depth-bounded). Missing is fine. */
int ckpt__mem_tier_remove(const char *root);
/* Opens the tier whose marker is in `root`. ELASTIC_ENOTFOUND without one. */
int ckpt__mem_tier_open(const char *root, ckpt_mem_tier *tier);
void ckpt__mem_tier_close(ckpt_mem_tier *tier);
/* Bytes the tree holds now (allocated blocks of its files, reservations included). */
uint64_t ckpt__mem_usage(const char *root);
/* Reserves [from, from + len) of `fd` (a file in the tree; its size is not
 * changed) when the tree has room for it under the limit. ELASTIC_ENOSPC
 * naming the limit, what is held and `what` (e.g. "step 7, rank 2") when not. */
int ckpt__mem_reserve(const ckpt_mem_tier *tier, int fd, uint64_t from, uint64_t len,
                      const char *what);
/* Gives back what was reserved past the file's final size. */
void ckpt__mem_release_tail(int fd, uint64_t size, uint64_t reserved_end);
/* The keep file (ROOT/.elastic-memory-keep, written by the agent): steps
 * retention never removes from any directory of the tier, whatever K says —
 * the job's last memory-committed step, and the step the job is replicating
 * now (docs/CHECKPOINT.md, "Memory-committed"). One decimal step per line.
 * Writes it atomically; `n` 0 empties it. */
int ckpt__mem_keep_write(const char *root, const uint64_t *steps, size_t n);
/* Reads up to CKPT_MEM_KEEP_MAX steps; 0 of them when there is no file or
 * it is not well formed (nothing is then kept beyond K). */
size_t ckpt__mem_keep_read(const char *root, uint64_t *steps);
/* Whether `step` is in the list. */
bool ckpt__mem_keep_has(const uint64_t *steps, size_t n, uint64_t step);

/* The default limit: a quarter of the node's physical memory. */
uint64_t ckpt__mem_default_limit(void);

#endif /* ELASTIC_CKPT_MEMTIER_H */
