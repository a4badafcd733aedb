/*
 * The restore planner (restore_plan.h): the newest step every shard of which
 * has a usable copy, and each shard's copies cheapest first. Pure: sorts and
 * counts what it is given.
 */
#include "ckpt/restore_plan.h"

#include "ckpt/ckpt.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

bool ckpt__plan_copy_usable(const ckpt_plan_input *in, uint64_t step, uint64_t generation)
{
    if (generation > in->generation) return false; /* from the future: not this job's */
    for (size_t i = 0; i < in->n_history; i++) {
        const ckpt_generation_start *g = &in->history[i];
        if (g->generation <= generation) continue;
        /* A later generation went back to before this step (or started
         * afresh): what `generation` wrote at `step` was abandoned. */
        if (!g->restored || g->restore_step < step) return false;
    }
    return true;
}

static bool copy_well_formed(const ckpt_copy *c)
{
    return c->world > 0 && c->world <= CKPT_MAX_WORLD && c->rank < c->world &&
           (c->tier == CKPT_TIER_MEMORY || c->tier == CKPT_TIER_DISK);
}

/* Newest step first; within a step the newest generation; then world, rank,
 * memory before disk, node order: each candidate step is one run, its ranks
 * in order, each rank's copies cheapest first. */
static int compare_copies(const void *pa, const void *pb)
{
    const ckpt_copy *a = pa, *b = pb;
#define CMP_DESC(f) \
    if (a->f != b->f) return a->f > b->f ? -1 : 1
#define CMP_ASC(f) \
    if (a->f != b->f) return a->f < b->f ? -1 : 1
    CMP_DESC(step);
    CMP_DESC(generation);
    CMP_ASC(world);
    CMP_ASC(rank);
    CMP_ASC(tier);
    CMP_ASC(node);
    return 0;
#undef CMP_DESC
#undef CMP_ASC
}

static bool same_candidate(const ckpt_copy *a, const ckpt_copy *b)
{
    return a->step == b->step && a->generation == b->generation && a->world == b->world;
}

/* The first rank of the candidate [begin, end) without a copy, or world when complete. */
static uint32_t first_missing_rank(const ckpt_copy *c, size_t begin, size_t end)
{
    uint32_t want = 0;
    for (size_t i = begin; i < end; i++) {
        if (c[i].rank > want) return want;
        if (c[i].rank == want) want++;
    }
    return want;
}

static void note(ckpt_plan *plan, const char *fmt, ...) ELASTIC__PRINTF(2, 3);
static void note(ckpt_plan *plan, const char *fmt, ...)
{
    size_t used = strlen(plan->why);
    if (used + 1 >= sizeof plan->why) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(plan->why + used, sizeof plan->why - used, fmt, ap);
    va_end(ap);
}

/* Says which fenced copies were left out (the newest of them). */
static void note_fenced(const ckpt_plan_input *in, ckpt_plan *plan)
{
    const ckpt_copy *newest = NULL;
    size_t count = 0;
    for (size_t i = 0; i < in->n_copies; i++) {
        const ckpt_copy *c = &in->copies[i];
        if (!copy_well_formed(c) || ckpt__plan_copy_usable(in, c->step, c->generation)) continue;
        count++;
        if (newest == NULL || c->step > newest->step) newest = c;
    }
    if (newest != NULL)
        note(plan,
             "%zu copies from a history the job left ignored (newest: step %" PRIu64
             " of generation %" PRIu64 " on node %" PRIu32 "); ",
             count, newest->step, newest->generation, newest->node);
}

/* Committed: a disk copy is among them (the disk tier reports committed
 * steps only), or a live node knows the step's memory-commit record. */
static bool candidate_committed(const ckpt_plan_input *in, const ckpt_copy *c, size_t begin,
                                size_t end)
{
    for (size_t i = begin; i < end; i++)
        if (c[i].tier == CKPT_TIER_DISK) return true;
    for (size_t i = 0; i < in->n_committed; i++)
        if (in->committed[i].step == c[begin].step &&
            in->committed[i].generation == c[begin].generation)
            return true;
    return false;
}

static int keep_candidate(ckpt_plan *plan, const ckpt_copy *c, size_t begin, size_t end)
{
    const ckpt_copy *first = &c[begin];
    plan->found = true;
    plan->step = first->step;
    plan->generation = first->generation;
    plan->world = first->world;
    plan->n_copies = end - begin;
    plan->copies = malloc(plan->n_copies * sizeof *plan->copies);
    plan->rank_first = calloc((size_t)first->world + 1, sizeof *plan->rank_first);
    if (plan->copies == NULL || plan->rank_first == NULL) {
        ckpt__plan_free(plan);
        return elastic__fail(ELASTIC_ENOMEM, "restore plan");
    }
    memcpy(plan->copies, c + begin, plan->n_copies * sizeof *plan->copies);
    /* rank_first[r]: the first copy of rank r (copies are sorted by rank). */
    size_t at = 0;
    for (uint32_t r = 0; r <= first->world; r++) {
        while (at < plan->n_copies && plan->copies[at].rank < r) at++;
        plan->rank_first[r] = at;
    }
    return 0;
}

int ckpt__plan_restore(const ckpt_plan_input *in, ckpt_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    ckpt_copy *usable = malloc((in->n_copies ? in->n_copies : 1) * sizeof *usable);
    if (usable == NULL) return elastic__fail(ELASTIC_ENOMEM, "restore plan");
    size_t n = 0;
    for (size_t i = 0; i < in->n_copies; i++) {
        const ckpt_copy *c = &in->copies[i];
        if (copy_well_formed(c) && ckpt__plan_copy_usable(in, c->step, c->generation))
            usable[n++] = *c;
    }
    note_fenced(in, plan);
    qsort(usable, n, sizeof *usable, compare_copies);
    int rc = 0;
    size_t passed_over = 0, uncommitted = 0;
    size_t fallback_begin = 0, fallback_end = 0; /* the newest complete uncommitted one */
    for (size_t begin = 0, end; begin < n && !plan->found && rc == 0; begin = end) {
        for (end = begin + 1; end < n && same_candidate(&usable[begin], &usable[end]); end++) {
        }
        uint32_t missing = first_missing_rank(usable, begin, end);
        if (missing == usable[begin].world && candidate_committed(in, usable, begin, end)) {
            rc = keep_candidate(plan, usable, begin, end);
            plan->committed = rc == 0;
        } else if (missing == usable[begin].world) {
            if (uncommitted++ == 0) {
                fallback_begin = begin;
                fallback_end = end;
                note(plan,
                     "step %" PRIu64 " (generation %" PRIu64
                     ") complete but not memory-committed (its peer copies were not all "
                     "placed): an older committed step wins; ",
                     usable[begin].step, usable[begin].generation);
            }
        } else if (passed_over++ == 0) {
            /* The newest step passed over is the one worth explaining. */
            note(plan,
                 "step %" PRIu64 " (generation %" PRIu64 ", %" PRIu32
                 " ranks) passed over: no live copy of rank %" PRIu32 "'s shard; ",
                 usable[begin].step, usable[begin].generation, usable[begin].world, missing);
        }
    }
    if (rc == 0 && !plan->found && uncommitted > 0) {
        /* No committed step is complete: the newest complete one is still
         * better than nothing (every rank gets the same step). */
        rc = keep_candidate(plan, usable, fallback_begin, fallback_end);
        note(plan, "no committed step is complete: restoring that step; ");
    }
    if (rc == 0 && passed_over > 1)
        note(plan, "%zu newer (step, generation, world) candidates incomplete in all; ",
             passed_over);
    if (rc == 0 && !plan->found) note(plan, "no step has a copy of every shard");
    free(usable);
    size_t len = strlen(plan->why);
    if (len >= 2 && plan->why[len - 2] == ';') plan->why[len - 2] = '\0';
    return rc;
}

void ckpt__plan_free(ckpt_plan *plan)
{
    free(plan->copies);
    free(plan->rank_first);
    plan->copies = NULL;
    plan->rank_first = NULL;
    plan->n_copies = 0;
    plan->found = false;
}

size_t ckpt__plan_sources(const ckpt_plan *plan, uint32_t rank, uint32_t reader_node,
                          ckpt_copy *out, ckpt_source *sources, size_t max)
{
    if (!plan->found || rank >= plan->world) return 0;
    size_t begin = plan->rank_first[rank], end = plan->rank_first[rank + 1], k = 0;
    /* Three passes, cheapest first: own memory; peers' memory; disk (the
     * reader's own or the shared one: another node's local disk is no
     * source, the reader's worker reads only the disk it sees). */
    for (int pass = 0; pass < 3; pass++) {
        for (size_t i = begin; i < end && k < max; i++) {
            const ckpt_copy *c = &plan->copies[i];
            bool mine = c->node == reader_node;
            bool take = pass == 0 ? c->tier == CKPT_TIER_MEMORY && mine
                        : pass == 1
                            ? c->tier == CKPT_TIER_MEMORY && !mine
                            : c->tier == CKPT_TIER_DISK && (mine || c->node == CKPT_NODE_SHARED);
            if (!take) continue;
            out[k] = *c;
            if (sources)
                sources[k] = pass == 0   ? CKPT_SOURCE_LOCAL
                             : pass == 1 ? CKPT_SOURCE_PEER
                                         : CKPT_SOURCE_DISK;
            k++;
        }
    }
    return k;
}
