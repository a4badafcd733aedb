/*
 * The hang probe's decision: a worker is hung when its heartbeat has been
 * silent for longer than the hang timeout, or when it has not sent its first
 * beat (since it started, or since its generation started) within the longer
 * startup timeout. Pure: the monitor supplies snapshots and the time.
 */
#include "probe/probe.h"

void probe__hang_start(probe__hang_state *state, const channel__hb_snapshot *snapshot,
                       uint64_t now_ns)
{
    state->started_ns = now_ns;
    state->baseline_beats = snapshot->beats;
}

uint64_t probe__hang_deadline(const probe__hang_state *state, const channel__hb_snapshot *snapshot,
                              uint64_t hang_timeout_ns, uint64_t startup_timeout_ns)
{
    bool beat_since_start = snapshot->beats > state->baseline_beats;
    uint64_t since = state->started_ns;
    if (beat_since_start && snapshot->last_beat_ns > since) since = snapshot->last_beat_ns;
    uint64_t limit = beat_since_start ? hang_timeout_ns : startup_timeout_ns;
    return limit > 0 ? since + limit : 0;
}

bool probe__hang_check(const probe__hang_state *state, const channel__hb_snapshot *snapshot,
                       uint64_t now_ns, uint64_t hang_timeout_ns, uint64_t startup_timeout_ns,
                       uint64_t *silent_ns, bool *started)
{
    bool beat_since_start = snapshot->beats > state->baseline_beats;
    /* The worker's last beat may predate started_ns (a survivor re-baselined
     * for a new generation): silence counts from whichever is later. */
    uint64_t since = state->started_ns;
    if (beat_since_start && snapshot->last_beat_ns > since) since = snapshot->last_beat_ns;
    *silent_ns = now_ns > since ? now_ns - since : 0;
    *started = beat_since_start;
    uint64_t limit = beat_since_start ? hang_timeout_ns : startup_timeout_ns;
    return limit > 0 && *silent_ns > limit;
}
