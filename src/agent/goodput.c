/*
 * The agent's side of the goodput accounting (src/common/goodput.h): it
 * journals when this node's workers first stepped in a generation
 * (steps_started, from the monitor's tick) and how far they got
 * (steps_ended, once they stopped or the job ends), and turns its journal
 * into the accounting for its closing line and the goodput counters on
 * /metrics, the same figures `elasticctl goodput` gives for the same events.
 */
#include "agent/journal.h"
#include "agent/probes.h"

#include "common/clock.h"
#include "common/text.h"

#include <stdlib.h>

static void emit_started(agent_group *group, const probe__progress *p)
{
    agent_event event;
    agent__event_begin(&event, group->events, AGENT_EVENT_STEPS_STARTED);
    agent__event_int(&event, "generation", (int64_t)group->current.generation);
    agent__event_int(&event, "step", p->first_step);
    agent__event_int(&event, "first_step_ms", (int64_t)p->first_step_ms);
    agent__event_int(&event, "restore_ms", (int64_t)p->restore_ms);
    agent__event_emit(group->events, &event);
    group->steps_started_generation = group->current.generation;
}

void agent__goodput_on_steps_started(void *user, const probe__progress *progress)
{
    agent_group *group = user;
    if (group->steps_started_generation != group->current.generation) emit_started(group, progress);
}

void agent__goodput_generation_ended(agent_group *group)
{
    if (group->monitor == NULL || group->current.generation == 0 ||
        group->steps_ended_generation == group->current.generation)
        return;
    group->steps_ended_generation = group->current.generation;
    probe__progress p;
    probe__monitor_progress(group->monitor, &p);
    if (p.stepping == 0) return; /* it never trained */
    /* Shorter than a probe tick: its first steps are said now. */
    if (group->steps_started_generation != group->current.generation) emit_started(group, &p);
    agent_event event;
    agent__event_begin(&event, group->events, AGENT_EVENT_STEPS_ENDED);
    agent__event_int(&event, "generation", (int64_t)group->current.generation);
    agent__event_int(&event, "last_step", p.last_step);
    agent__event_int(&event, "last_step_ms", (int64_t)p.last_step_ms);
    agent__event_int(&event, "step_us", (int64_t)p.step_us);
    agent__event_int(&event, "save_stall_ms", (int64_t)p.save_stall_ms);
    agent__event_emit(group->events, &event);
}

int agent__goodput_report(const agent_group *group, goodput_report **out)
{
    goodput_report *r = malloc(sizeof *r);
    if (r == NULL) return elastic__fail(ELASTIC_ENOMEM, "out of memory");
    int rc = agent__events_goodput(group->events, elastic__wall_ms(), r);
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
    goodput__render_metrics(r, &group->goodput_floor, out);
    free(r);
}
