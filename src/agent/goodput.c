/*
 * The agent's side of the goodput accounting (src/common/goodput.h): it
 * journals when this node's workers first stepped in a generation
 * (steps_started, from the monitor's tick) and how far they got
 * (steps_ended, once they stopped or the job ends), and turns its journal
 * into the accounting for its closing line and the goodput counters on
 * /metrics, the same figures `elasticctl goodput` gives for the same events.
 */
#include "agent/journal_events.h"
#include "agent/probes.h"

#include "common/clock.h"
#include "common/text.h"

#include <stdlib.h>

/* What this node journaled of its steps and showed on /metrics; only this
 * file reads or writes it. */
struct agent_goodput {
    uint64_t steps_started, steps_ended; /* the generations whose steps_* were journaled */
    goodput_floor floor;                 /* the /metrics goodput counters' high-water marks */
};

int agent__goodput_init(agent_group *group)
{
    group->goodput = calloc(1, sizeof *group->goodput);
    return group->goodput != NULL ? 0 : elastic__fail(ELASTIC_ENOMEM, "out of memory (goodput)");
}

void agent__goodput_destroy(agent_group *group)
{
    free(group->goodput);
    group->goodput = NULL;
}

static void emit_started(agent_group *group, const probe__progress *p)
{
    agent__ev_steps_started(group->job.events,
                            &(agent_ev_steps_started){ .generation = group->current.generation,
                                                       .step = p->first_step,
                                                       .first_step_ms = (int64_t)p->first_step_ms,
                                                       .restore_ms = (int64_t)p->restore_ms });
    group->goodput->steps_started = group->current.generation;
}

void agent__goodput_on_steps_started(void *user, const probe__progress *progress)
{
    agent_group *group = user;
    if (group->goodput->steps_started != group->current.generation)
        emit_started(group, progress);
}

void agent__goodput_generation_ended(agent_group *group)
{
    if (group->monitor == NULL || group->current.generation == 0 ||
        group->goodput->steps_ended == group->current.generation)
        return;
    group->goodput->steps_ended = group->current.generation;
    probe__progress p;
    probe__monitor_progress(group->monitor, &p);
    if (p.stepping == 0) return; /* it never trained */
    /* Shorter than a probe tick: its first steps are said now. */
    if (group->goodput->steps_started != group->current.generation) emit_started(group, &p);
    agent__ev_steps_ended(group->job.events,
                          &(agent_ev_steps_ended){ .generation = group->current.generation,
                                                   .last_step = p.last_step,
                                                   .last_step_ms = (int64_t)p.last_step_ms,
                                                   .step_us = (int64_t)p.step_us,
                                                   .save_stall_ms = (int64_t)p.save_stall_ms });
}

int agent__goodput_report(const agent_group *group, goodput_report **out)
{
    goodput_report *r = malloc(sizeof *r);
    if (r == NULL) return elastic__fail(ELASTIC_ENOMEM, "out of memory");
    int rc = agent__events_goodput(group->job.events, elastic__wall_ms(), r);
    if (rc != 0) {
        free(r);
        return rc;
    }
    *out = r;
    return 0;
}

void agent__goodput_render(void *user, elastic__text *out)
{
    agent_group *group = user;
    goodput_report *r = NULL;
    if (agent__goodput_report(group, &r) != 0) return; /* nothing journaled yet */
    goodput__render_metrics(r, &group->goodput->floor, out);
    free(r);
}
