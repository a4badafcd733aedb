/*
 * A node's training progress in one generation, from its workers' heartbeat
 * slots (pure: snapshots in, numbers out): the step each worker resumed from
 * and when it first stepped, the furthest step reached and when, the time its
 * saves held the training thread and its checkpoint reads took. The agent
 * journals it as steps_started / steps_ended, the goodput accounting's
 * inputs (src/common/goodput.h).
 */
#ifndef ELASTIC_PROBE_PROGRESS_H
#define ELASTIC_PROBE_PROGRESS_H

#include "channel/channel.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct probe__progress {
    unsigned workers, stepping; /* workers seen; those that beat at least once */
    int64_t first_step;         /* the lowest step at a first beat (-1: none yet) */
    uint64_t first_step_ms;     /* wall clock of the last worker's first beat */
    int64_t last_step;          /* the furthest step reported (-1: none) */
    uint64_t last_step_ms;      /* wall clock of the last beat that reported it */
    uint64_t step_us;           /* mean time per step over the workers (0: unknown) */
    uint64_t save_stall_ms;     /* the longest any worker's saves held its training thread */
    uint64_t restore_ms;        /* the longest any worker spent reading checkpoints */
} probe__progress;

/* Folds workers' snapshots into a node's progress. baseline (may be NULL, or
 * have NULL entries): each slot as the generation began, for workers that
 * live across generations (in-process recovery), whose sums must not carry
 * over. now_wall_ms and now_mono_ns are one instant of the two clocks (the
 * slots hold monotonic times). */
void probe__progress_of(const channel__hb_snapshot *const *now,
                        const channel__hb_snapshot *const *baseline, unsigned count,
                        uint64_t now_wall_ms, uint64_t now_mono_ns, probe__progress *out);

#endif /* ELASTIC_PROBE_PROGRESS_H */
