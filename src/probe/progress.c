/*
 * A node's progress from its heartbeat slots (progress.h). A slot keeps the
 * last step, the time of the last beat, and the time and steps between the
 * first beat and the last one that advanced: so the first beat was at
 * last_beat - interval_sum, at step step - interval_steps. Less the baseline
 * (what the slot held when the generation began), the same holds for a
 * worker that lives across generations.
 */
#include "probe/progress.h"

#include <string.h>

static uint64_t wall_of(uint64_t mono_ns, uint64_t now_wall_ms, uint64_t now_mono_ns)
{
    uint64_t ago_ms = mono_ns < now_mono_ns ? (now_mono_ns - mono_ns) / 1000000u : 0;
    return ago_ms < now_wall_ms ? now_wall_ms - ago_ms : 0;
}

void probe__progress_of(const channel__hb_snapshot *const *now,
                        const channel__hb_snapshot *const *baseline, unsigned count,
                        uint64_t now_wall_ms, uint64_t now_mono_ns, probe__progress *out)
{
    memset(out, 0, sizeof *out);
    out->first_step = out->last_step = -1;
    double step_sum_us = 0;
    unsigned timed = 0;
    for (unsigned i = 0; i < count; i++) {
        const channel__hb_snapshot *s = now[i];
        if (s == NULL) continue;
        static const channel__hb_snapshot zero;
        const channel__hb_snapshot *b =
            baseline != NULL && baseline[i] != NULL ? baseline[i] : &zero;
        out->workers++;
        if (s->beats <= b->beats) continue; /* no beat in this generation yet */
        out->stepping++;
        uint64_t sum_ns =
            s->interval_sum_ns -
            (s->interval_sum_ns >= b->interval_sum_ns ? b->interval_sum_ns : s->interval_sum_ns);
        uint64_t steps =
            s->interval_steps -
            (s->interval_steps >= b->interval_steps ? b->interval_steps : s->interval_steps);
        uint64_t first_ns = s->last_beat_ns > sum_ns ? s->last_beat_ns - sum_ns : s->last_beat_ns;
        int64_t first = s->step >= steps ? (int64_t)(s->step - steps) : 0;
        if (out->first_step < 0 || first < out->first_step) out->first_step = first;
        uint64_t first_ms = wall_of(first_ns, now_wall_ms, now_mono_ns);
        if (first_ms > out->first_step_ms) out->first_step_ms = first_ms;
        if ((int64_t)s->step > out->last_step) out->last_step = (int64_t)s->step;
        uint64_t last_ms = wall_of(s->last_beat_ns, now_wall_ms, now_mono_ns);
        if (last_ms > out->last_step_ms) out->last_step_ms = last_ms;
        if (steps > 0) {
            step_sum_us += (double)sum_ns / (double)steps / 1000.0;
            timed++;
        }
        uint64_t stall =
            s->ckpt_stall_ns >= b->ckpt_stall_ns ? s->ckpt_stall_ns - b->ckpt_stall_ns : 0;
        uint64_t restore =
            s->ckpt_restore_ns >= b->ckpt_restore_ns ? s->ckpt_restore_ns - b->ckpt_restore_ns : 0;
        if (stall / 1000000u > out->save_stall_ms) out->save_stall_ms = stall / 1000000u;
        if (restore / 1000000u > out->restore_ms) out->restore_ms = restore / 1000000u;
    }
    out->step_us = timed > 0 ? (uint64_t)(step_sum_us / timed) : 0;
}
