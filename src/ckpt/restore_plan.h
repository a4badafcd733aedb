/*
 * Choosing the one step the whole job restores, and where each shard of it
 * is read from (docs/CHECKPOINT.md, "Memory tier"). A pure function of what
 * the live nodes report holding and of the job's generation history: no I/O,
 * no clock, so every agent that runs it on the same inputs gets the same
 * answer, and the tests can drive it directly.
 *
 * A copy is one rank's shard of one step, written by one generation, held in
 * some node's memory (its own shard or a replica) or on disk. The plan picks
 * the newest step whose every shard has a usable copy among the live nodes,
 * and orders each shard's copies cheapest first for a given reader: its own
 * node's memory, then a peer's memory, then disk.
 *
 * "Usable" is the fence: a copy written by generation g at step s belongs to
 * a history the job has left when a later generation restored from a step
 * before s (that generation went back, so what g wrote after that point was
 * never the job's). Such copies never win, whatever their step: a node cut
 * off during replication and back later cannot bring its newer steps in.
 */
#ifndef ELASTIC_CKPT_RESTORE_PLAN_H
#define ELASTIC_CKPT_RESTORE_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CKPT_TIER_MEMORY 0
#define CKPT_TIER_DISK   1

/* The node of a copy on storage every node reads (a shared checkpoint directory). */
#define CKPT_NODE_SHARED UINT32_MAX

/* Where a reader gets a copy from, cheapest first. */
typedef enum {
    CKPT_SOURCE_LOCAL = 0, /* memory on the reader's own node */
    CKPT_SOURCE_PEER = 1,  /* another live node's memory */
    CKPT_SOURCE_DISK = 2,  /* the disk tier */
} ckpt_source;

/* One shard copy a live node reports. */
typedef struct ckpt_copy {
    uint64_t step;
    uint64_t generation; /* the generation that wrote the step */
    uint32_t world;      /* ranks of that generation (shards of the step) */
    uint32_t rank;       /* this shard's rank, < world */
    uint32_t node;       /* the node holding it; CKPT_NODE_SHARED for shared disk */
    int tier;            /* CKPT_TIER_MEMORY or CKPT_TIER_DISK */
    uint64_t bytes;      /* the shard's size (reported, not trusted: read bounds it again) */
} ckpt_copy;

/* A generation the job entered and where it started: the fence's input. */
typedef struct ckpt_generation_start {
    uint64_t generation;
    bool restored;         /* false: started without a checkpoint */
    uint64_t restore_step; /* when restored */
} ckpt_generation_start;

/* A job-wide record of a step (a memory-committed step: every node's
 * shards of it had their R peer copies; replica.h, "memory commit"). */
typedef struct ckpt_step_ref {
    uint64_t step;
    uint64_t generation; /* the generation that wrote it */
} ckpt_step_ref;

typedef struct ckpt_plan_input {
    const ckpt_copy *copies;
    size_t n_copies;
    /* Memory-committed steps the live nodes know of (any order, repeats
     * fine). A step with such a record, or on disk (the disk tier has only
     * committed steps), always wins over a newer one without: a step that
     * is complete among the live nodes but was never memory-committed is
     * restored only when no committed step is complete. */
    const ckpt_step_ref *committed;
    size_t n_committed;
    const ckpt_generation_start *history; /* every earlier generation; any order */
    size_t n_history;
    uint64_t generation; /* the generation planning (copies from later ones are refused) */
} ckpt_plan_input;

typedef struct ckpt_plan {
    bool found;
    bool committed; /* the chosen step is memory-committed or on disk */
    uint64_t step, generation; /* the chosen step and the generation that wrote it */
    uint32_t world;
    ckpt_copy *copies; /* the chosen step's usable copies, grouped by rank */
    size_t n_copies;
    size_t *rank_first; /* world + 1 offsets into copies */
    char why[512];      /* what was passed over and why; empty when the newest step won */
} ckpt_plan;

/* Fills *plan (free it with ckpt__plan_free). 0, or ELASTIC_ENOMEM. No step
 * is not an error: plan->found is false and plan->why says what is missing. */
int ckpt__plan_restore(const ckpt_plan_input *in, ckpt_plan *plan);
void ckpt__plan_free(ckpt_plan *plan);

/* Up to `max` copies of `rank`'s shard of the chosen step in the order
 * `reader_node` should try them: its own memory, peers' memory (in node
 * order), disk (its own or the shared one; never another node's local
 * disk, which the reader cannot see). Returns how many were written;
 * sources[i] (may be NULL) says which kind each is. */
size_t ckpt__plan_sources(const ckpt_plan *plan, uint32_t rank, uint32_t reader_node,
                          ckpt_copy *out, ckpt_source *sources, size_t max);

/* Whether a copy of (step, generation) belongs to the job's history. */
bool ckpt__plan_copy_usable(const ckpt_plan_input *in, uint64_t step, uint64_t generation);

#endif /* ELASTIC_CKPT_RESTORE_PLAN_H */
