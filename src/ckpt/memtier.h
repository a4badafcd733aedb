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
 *
 * Counted, not walked: ROOT/.elastic-memory-count holds a running count that
 * every reservation (in any process, under the marker's flock) raises by what
 * it may allocate, so it is never below what the tree holds but for the small
 * records written without a reservation since the last walk. Removals do not
 * lower it (they happen in several processes and a lowered count that missed
 * one could let the tree past its limit); instead a reservation the count
 * would refuse walks the tree first and decides on the walked total, which
 * then becomes the count. So a reservation walks only near the limit, a
 * stale count costs one walk, never a false "tier full".
 */
#ifndef ELASTIC_CKPT_MEMTIER_H
#define ELASTIC_CKPT_MEMTIER_H

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CKPT_MEM_MARKER      ".elastic-memory-tier"
#define CKPT_MEM_OWN_DIR     "own"
#define CKPT_MEM_PEER_DIR    "peer"
#define CKPT_MEM_STEPS_MAX   64u /* K: steps kept per writer (default 2) */
#define CKPT_MEM_KEEP        ".elastic-memory-keep"
#define CKPT_MEM_KEEP_MAX    4u                      /* steps the keep file may name */
#define CKPT_MEM_COUNT       ".elastic-memory-count" /* the running count (ckpt__mem_reserve) */
#define CKPT_MEM_OWNER       ".elastic-memory-owner" /* flocked by the tier's holder */
#define CKPT_MEM_TIER_PREFIX "elastic-mem-"          /* the agent's tiers: /dev/shm/elastic-mem-* */

typedef struct ckpt_mem_tier {
    char *root;     /* NULL: not in a memory tier */
    uint64_t limit; /* bytes the whole tree may hold */
    unsigned steps; /* K: the step being written and K-1 committed ones */
    int lock_fd;    /* the marker, flocked around each reservation */
} ckpt_mem_tier;

/* Creates own/ and peer/ in ROOT and writes the marker. ROOT is used as
 * the caller made it (mkdtemp; made here, 0700, when absent; its parent
 * must exist), checked through its descriptor: a directory, not a symlink,
 * this user's, mode 0700, empty — else ELASTIC_EPERM / ELASTIC_EEXIST and
 * nothing in it touched. A tier of ours is emptied first: what a previous
 * holder left is not trusted (the agent restarted). */
int ckpt__mem_tier_create(const char *root, uint64_t limit, unsigned steps);
/* Removes the whole tree (depth-bounded) by descriptor (memtier_tree.c):
 * never through a symlink, only this user's files on the tier's device.
 * Missing is fine; a ROOT that is not this user's is refused (ELASTIC_EPERM). */
int ckpt__mem_tier_remove(const char *root);
/* ---- memtier_sweep.c ---- */
/* Holds the tier for this process's life: an exclusive flock on its owner
 * file (*fd, close-on-exec; a forked child that keeps it holds it too),
 * made locked under another name and then renamed into place. */
int ckpt__mem_tier_hold(const char *root, int *fd);
/* Removes the tiers under `dir` ("elastic-mem-*") that are this user's and
 * that nobody holds (their owner file takes the lock): tiers whose agent and
 * reaper both died. Returns how many were removed. */
size_t ckpt__mem_sweep_leaked(const char *dir);
/* ---- memtier_tree.c ---- */
/* ROOT's parent opened, ROOT's last component into name, and ROOT opened
 * from the parent (O_DIRECTORY | O_NOFOLLOW) into *fd. ELASTIC_ENOTFOUND
 * when ROOT is absent (*parent_fd closed). */
int ckpt__mem_tree_open(const char *root, int *parent_fd, char *name, size_t cap, int *fd);
/* A listing of the directory `fd` (which stays the caller's) into *dir;
 * the error names `root`. */
int ckpt__mem_tree_list(int fd, const char *root, DIR **dir);
/* Empties ROOT (at most depth levels) by descriptor, then removes it unless keep_root. */
int ckpt__mem_tree_remove(const char *root, int depth, bool keep_root);
/* Opens the tier whose marker is in `root`. ELASTIC_ENOTFOUND without one. */
int ckpt__mem_tier_open(const char *root, ckpt_mem_tier *tier);
void ckpt__mem_tier_close(ckpt_mem_tier *tier);
/* Bytes the tree holds now (allocated blocks of its files, reservations
 * included): a walk of the whole tree. */
uint64_t ckpt__mem_usage(const char *root);
/* How many such walks this process has made (for tests). */
uint64_t ckpt__mem_walks(void);
/* Reserves [from, from + len) of `fd` (a file in the tree; its size is not
 * changed) when the tree has room for it under the limit: by the running
 * count, else by a walk (see "Counted, not walked" above). ELASTIC_ENOSPC
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
/* The keep file's text: up to CKPT_MEM_KEEP_MAX steps, 0 when not well formed. */
size_t ckpt__mem_keep_parse(const uint8_t *raw, size_t len, uint64_t *steps);
/* The marker's text (NUL-terminated), into tier's limit and steps; path
 * names it in the error. ELASTIC_ECORRUPT when it is not exactly a marker. */
int ckpt__mem_marker_parse(const char *path, const char *text, ckpt_mem_tier *tier);
/* Whether `step` is in the list. */
bool ckpt__mem_keep_has(const uint64_t *steps, size_t n, uint64_t step);

/* The default limit: a quarter of the node's physical memory. */
uint64_t ckpt__mem_default_limit(void);

#endif /* ELASTIC_CKPT_MEMTIER_H */
