/*
 * One event-log line as a record of the goodput accounting: how the agent
 * feeds its own journal to the accounting behind its closing line and
 * /metrics. The rules are elasticctl's (tools/elasticctl/goodput.c, over the
 * same events read back): which events form, step, disrupt, stop and end a
 * generation, and generation_ended's causes (docs/OPERATIONS.md).
 */
#include "common/goodput.h"
#include "common/json.h"

#include <string.h>

static int64_t field(json_object *obj, const char *key, int64_t fallback)
{
    int64_t v;
    return json__get_int(obj, key, -1, INT64_MAX / 2, &v) ? v : fallback;
}

bool goodput__record_of_line(const char *line, size_t len, goodput_record *out)
{
    json_object *obj = NULL;
    if (json__parse(line, len, &obj) != 0) return false;
    const char *event = json__get_string(obj, "event");
    int64_t ts;
    bool ok = event != NULL && json__get_int(obj, "ts_ms", 0, INT64_C(1) << 52, &ts);
    if (ok) {
        *out = (goodput_record){
            .ts_ms = (uint64_t)ts, .generation = field(obj, "generation", -1), .a = -1, .b = -1
        };
        if (strcmp(event, "agent_started") == 0) {
            out->kind = GP_START;
        } else if (strcmp(event, "generation_formed") == 0) {
            out->kind = GP_FORMED;
        } else if (strcmp(event, "steps_started") == 0) {
            out->kind = GP_STEPS_STARTED;
            out->a = field(obj, "step", -1);
            out->b = field(obj, "first_step_ms", -1);
            out->c = field(obj, "restore_ms", 0);
        } else if (strcmp(event, "steps_ended") == 0) {
            out->kind = GP_STEPS_ENDED;
            out->a = field(obj, "last_step", -1);
            out->b = field(obj, "last_step_ms", -1);
            out->c = field(obj, "step_us", 0);
            out->d = field(obj, "save_stall_ms", 0);
        } else if (strcmp(event, "failure") == 0) {
            out->kind = GP_DISRUPTION, out->cause = GP_CAUSE_FAILURE;
        } else if (strcmp(event, "probe_failed") == 0) {
            const char *probe = json__get_string(obj, "probe");
            bool hang =
                probe != NULL && (strcmp(probe, "hang") == 0 || strcmp(probe, "startup") == 0);
            out->kind = GP_DISRUPTION, out->cause = hang ? GP_CAUSE_HANG : GP_CAUSE_PROBE;
        } else if (strcmp(event, "replica_divergence") == 0) {
            /* Only a divergence the job acted on (not committed): in warn
             * mode training goes on and nothing is lost to it. */
            out->kind = GP_DISRUPTION, out->cause = GP_CAUSE_SILENT_CORRUPTION;
            ok = field(obj, "committed", 1) == 0;
        } else if (strcmp(event, "straggler_evicted") == 0) {
            out->kind = GP_DISRUPTION, out->cause = GP_CAUSE_PROBE;
        } else if (strcmp(event, "fenced") == 0) {
            out->kind = GP_DISRUPTION, out->cause = GP_CAUSE_FENCED;
        } else if (strcmp(event, "generation_ended") == 0) {
            out->kind = GP_DISRUPTION, out->cause = goodput__cause_of_end(field(obj, "cause", 1));
            ok = out->cause >= 0;
        } else if (strcmp(event, "generation_stopped") == 0) {
            out->kind = GP_STOPPED;
        } else if (strcmp(event, "checkpoint") == 0) {
            out->kind = GP_CHECKPOINT;
            out->a = field(obj, "step", -1);
            int64_t saved = field(obj, "saved_ms", -1);
            if (saved > 0) out->ts_ms = (uint64_t)saved;
        } else if (strcmp(event, "job_end") == 0) {
            out->kind = GP_END;
        } else {
            ok = false;
        }
    }
    json_object_put(obj);
    return ok;
}
