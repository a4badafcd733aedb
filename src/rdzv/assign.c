/*
 * Who is admitted into a generation and with which ranks: survivors of the
 * previous generation keep their relative order, newcomers follow by their
 * preferred rank when they name one, then in arrival order; global ranks
 * follow from the per-node worker counts.
 */
#include "rdzv/rdzv.h"

#include <stdio.h>
#include <stdlib.h>

/* Survivors (prev_rank >= 0 after normalising) first, by their old rank;
 * then newcomers that name a preferred rank (Slurm's SLURM_PROCID), by it;
 * then the others by arrival. */
static int compare_members(const void *left, const void *right)
{
    const rdzv__record *a = left, *b = right;
    bool a_old = a->prev_rank >= 0, b_old = b->prev_rank >= 0;
    if (a_old != b_old) return a_old ? -1 : 1;
    if (a_old && a->prev_rank != b->prev_rank) return a->prev_rank < b->prev_rank ? -1 : 1;
    if (!a_old) {
        bool a_pref = a->preferred_rank >= 0, b_pref = b->preferred_rank >= 0;
        if (a_pref != b_pref) return a_pref ? -1 : 1;
        if (a_pref && a->preferred_rank != b->preferred_rank)
            return a->preferred_rank < b->preferred_rank ? -1 : 1;
    }
    return (a->slot > b->slot) - (a->slot < b->slot);
}

size_t rdzv__order_members(rdzv__record *records, size_t n, uint64_t prev_generation, int max_nodes)
{
    /* A rank from an older generation says nothing about order now. */
    for (size_t i = 0; i < n; i++)
        if (prev_generation == 0 || records[i].prev_generation != prev_generation)
            records[i].prev_rank = -1;
    qsort(records, n, sizeof *records, compare_members);
    return n < (size_t)max_nodes ? n : (size_t)max_nodes;
}

void rdzv__assign_all(const rdzv__record *members, size_t n, uint64_t generation, int restart_count,
                      rdzv__assignment *out)
{
    int world_size = 0;
    for (size_t i = 0; i < n; i++) world_size += members[i].local_world_size;
    int rank_base = 0;
    for (size_t i = 0; i < n; i++) {
        rdzv__assignment *a = &out[i];
        const rdzv__record *next = &members[(i + 1) % n];
        memset(a, 0, sizeof *a);
        a->outcome = RDZV__ASSIGNED;
        a->generation = generation;
        a->group_rank = (int)i;
        a->group_world_size = (int)n;
        a->rank_base = rank_base;
        a->local_world_size = members[i].local_world_size;
        a->world_size = world_size;
        a->restart_count = restart_count;
        a->master_port = members[0].master_port;
        a->next_slot = next->slot;
        snprintf(a->master_addr, sizeof a->master_addr, "%s", members[0].addr);
        snprintf(a->next_node_id, sizeof a->next_node_id, "%s", next->node_id);
        rank_base += members[i].local_world_size;
    }
}
