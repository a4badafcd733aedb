/*
 * The timeline as text (`elasticctl summary`): the job's totals, each
 * node's generations as spans, then every mark of the picture (failures,
 * hangs, restarts, ends by other nodes, fences, waiting, checkpoints, the
 * job's end) in time order with its offset from the first event.
 */
#include "elasticctl/goodput.h"
#include "elasticctl/timeline.h"

#include <stdlib.h>
#include <string.h>

static double offset_s(const timeline *t, uint64_t ts)
{
    return (double)(ts - t->t0_ms) / 1000.0;
}

static void totals(const timeline *t, const goodput_report *goodput, FILE *out)
{
    int64_t generations = 0, failures = 0, hangs = 0, restarts = 0, checkpoints = 0, fences = 0;
    const timeline_event *last_ckpt = NULL, *end = NULL;
    for (size_t i = 0; i < t->count; i++) {
        const timeline_event *e = &t->events[i];
        if (e->kind == TL_GENERATION_FORMED && e->generation > generations)
            generations = e->generation;
        failures += e->kind == TL_FAILURE;
        hangs += e->kind == TL_HANG;
        fences += e->kind == TL_FENCED;
        checkpoints += e->kind == TL_CHECKPOINT;
        if (e->kind ==
            TL_RESTARTED) { /* every node says it once per generation: count generations */
            bool seen = false;
            for (size_t j = 0; j < i && !seen; j++)
                seen =
                    t->events[j].kind == TL_RESTARTED && t->events[j].generation == e->generation;
            restarts += !seen;
        }
        if (e->kind == TL_CHECKPOINT && (last_ckpt == NULL || e->value >= last_ckpt->value))
            last_ckpt = e;
        if (e->kind == TL_JOB_END) end = e;
    }
    fprintf(out, "job %s: %d node%s, %.3f s of events, %s\n", t->run_id, t->node_count,
            t->node_count == 1 ? "" : "s", offset_s(t, t->t1_ms),
            end != NULL ? end->text : "no job_end yet");
    fprintf(out,
            "totals: last generation %lld, %lld failure%s (%lld hang%s), %lld restart%s, %.3f s "
            "lost to failures, %lld fence%s, %lld checkpoint event%s",
            (long long)generations, (long long)failures, failures == 1 ? "" : "s", (long long)hangs,
            hangs == 1 ? "" : "s", (long long)restarts, restarts == 1 ? "" : "s",
            goodput->failures_ms / 1000.0, (long long)fences, fences == 1 ? "" : "s",
            (long long)checkpoints, checkpoints == 1 ? "" : "s");
    if (last_ckpt != NULL)
        fprintf(out, ", last step %lld (rank %d on %s)", (long long)last_ckpt->value,
                last_ckpt->rank, t->nodes[last_ckpt->node]);
    fputc('\n', out);
    goodput__write_verdict(goodput, out);
}

/* Each node's generation spans, like the node lanes of the picture. */
static void lanes(const timeline *t, FILE *out)
{
    for (int n = 0; n < t->node_count; n++) {
        fprintf(out, "node %s (%d worker lane%s):", t->nodes[n], t->local_count[n],
                t->local_count[n] == 1 ? "" : "s");
        bool open = false;
        int64_t generation = -1;
        uint64_t since = 0;
        for (size_t i = 0; i < t->count; i++) {
            const timeline_event *e = &t->events[i];
            if (e->node != n) continue;
            bool closes = e->kind == TL_GENERATION_FORMED || e->kind == TL_GENERATION_STOPPED ||
                          e->kind == TL_JOB_END;
            if (open && closes) {
                fprintf(out, " gen %lld [+%.3f, +%.3f s]", (long long)generation,
                        offset_s(t, since), offset_s(t, e->ts_ms));
                open = false;
            }
            if (e->kind == TL_GENERATION_FORMED)
                open = true, generation = e->generation, since = e->ts_ms;
        }
        if (open)
            fprintf(out, " gen %lld [+%.3f s, running]", (long long)generation, offset_s(t, since));
        fputc('\n', out);
    }
}

static void marks(const timeline *t, FILE *out)
{
    for (size_t i = 0; i < t->count; i++) {
        const timeline_event *e = &t->events[i];
        char what[480];
        switch (e->kind) {
        case TL_GENERATION_FORMED:
            snprintf(what, sizeof what, "generation %lld formed: world size %lld on %lld node%s",
                     (long long)e->generation, (long long)e->value, (long long)e->value2,
                     e->value2 == 1 ? "" : "s");
            break;
        case TL_FAILURE: snprintf(what, sizeof what, "rank %d failed: %s", e->rank, e->text); break;
        case TL_HANG: snprintf(what, sizeof what, "hang: %s", e->text); break;
        case TL_PROBE: snprintf(what, sizeof what, "probe: %s", e->text); break;
        case TL_DIVERGENCE:
            snprintf(what, sizeof what, "silent data corruption%s: %s",
                     e->value == 1 ? " (warned, committed)" : "", e->text);
            break;
        case TL_GENERATION_ENDED:
            snprintf(what, sizeof what, "generation %lld ended by another node: %s",
                     (long long)e->generation, e->text);
            break;
        case TL_RESTARTED:
            snprintf(what, sizeof what, "generation %lld running again, %lld ms after the failure",
                     (long long)e->generation, (long long)e->value);
            break;
        case TL_FENCED: snprintf(what, sizeof what, "fenced: %s", e->text); break;
        case TL_WAITING:
            snprintf(what, sizeof what, "waiting for nodes: %lld joined%s%s", (long long)e->value,
                     e->text[0] ? "; missing: " : "", e->text);
            break;
        case TL_CHECKPOINT:
            snprintf(what, sizeof what, "rank %d saved checkpoint step %lld", e->rank,
                     (long long)e->value);
            break;
        case TL_JOB_END:
            snprintf(what, sizeof what, "job %s (exit code %lld)", e->text, (long long)e->value);
            break;
        case TL_RECOVERY_PHASES:
            snprintf(what, sizeof what, "recovery phases (ms): %s; total %lld", e->text,
                     (long long)e->value);
            break;
        default: continue; /* worker starts and exits are the lanes' spans */
        }
        fprintf(out, "  +%9.3f s  %-24s %s\n", offset_s(t, e->ts_ms), t->nodes[e->node], what);
    }
}

int timeline__write_text(const timeline *t, const goodput_report *goodput, FILE *out)
{
    totals(t, goodput, out);
    lanes(t, out);
    fputs("events:\n", out);
    marks(t, out);
    return ferror(out) ? elastic__fail(ELASTIC_EIO, "writing the summary failed") : 0;
}
