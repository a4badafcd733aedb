/*
 * From a timeline (every node's events, merged by time) to the accounting's
 * records: which events start, form, step, disrupt, stop and end a job's
 * generations. Events the accounting does not need (worker starts and exits,
 * waiting) are left out; the timeline's order is kept.
 */
#include "elasticctl/ctl.h"
#include "elasticctl/goodput.h"

#include <stdlib.h>
#include <string.h>

static bool record_of(const timeline_event *e, goodput_record *r)
{
    *r = (goodput_record){
        .ts_ms = e->ts_ms, .generation = e->generation, .a = -1, .b = -1, .c = 0, .d = 0
    };
    switch (e->kind) {
    case TL_AGENT_STARTED: r->kind = GP_START; return true;
    case TL_GENERATION_FORMED: r->kind = GP_FORMED; return true;
    case TL_STEPS_STARTED:
        *r = (goodput_record){ .ts_ms = e->ts_ms,
                               .kind = GP_STEPS_STARTED,
                               .generation = e->generation,
                               .a = e->value,
                               .b = e->value2,
                               .c = e->value3 };
        return true;
    case TL_STEPS_ENDED:
        *r = (goodput_record){ .ts_ms = e->ts_ms,
                               .kind = GP_STEPS_ENDED,
                               .generation = e->generation,
                               .a = e->value,
                               .b = e->value2,
                               .c = e->value3,
                               .d = e->value4 };
        return true;
    case TL_FAILURE: r->kind = GP_DISRUPTION, r->cause = GP_CAUSE_FAILURE; return true;
    case TL_HANG: r->kind = GP_DISRUPTION, r->cause = GP_CAUSE_HANG; return true;
    case TL_PROBE: r->kind = GP_DISRUPTION, r->cause = GP_CAUSE_PROBE; return true;
    case TL_DIVERGENCE: /* acted on (not committed): the job went back past it */
        r->kind = GP_DISRUPTION, r->cause = GP_CAUSE_SILENT_CORRUPTION;
        return e->value == 0;
    case TL_FENCED: r->kind = GP_DISRUPTION, r->cause = GP_CAUSE_FENCED; return true;
    case TL_GENERATION_ENDED:
        r->kind = GP_DISRUPTION, r->cause = goodput__cause_of_end(e->value);
        return r->cause >= 0;
    case TL_GENERATION_STOPPED: r->kind = GP_STOPPED; return true;
    case TL_CHECKPOINT: r->kind = GP_CHECKPOINT, r->a = e->value; return true;
    case TL_JOB_END: r->kind = GP_END; return true;
    default: return false;
    }
}

int goodput__records_of(const timeline *t, goodput_record **out, size_t *count)
{
    goodput_record *records = malloc((t->count > 0 ? t->count : 1) * sizeof *records);
    if (records == NULL) return elastic__fail(ELASTIC_ENOMEM, "out of memory");
    size_t n = 0;
    for (size_t i = 0; i < t->count; i++)
        if (record_of(&t->events[i], &records[n])) n++;
    *out = records;
    *count = n;
    return 0;
}

int goodput__of_timeline(const timeline *t, goodput_report **out)
{
    goodput_record *records = NULL;
    size_t count = 0;
    int rc = goodput__records_of(t, &records, &count);
    if (rc != 0) return rc;
    goodput_report *report = malloc(sizeof *report);
    if (report == NULL) rc = elastic__fail(ELASTIC_ENOMEM, "out of memory");
    if (rc == 0) rc = goodput__account(records, count, 0, report);
    free(records);
    if (rc != 0) {
        free(report);
        return rc;
    }
    *out = report;
    return 0;
}
