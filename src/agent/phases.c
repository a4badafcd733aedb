/*
 * The phases of one recovery on this node, written as one recovery_phases
 * event (docs/OPERATIONS.md): what the agent sees itself and what the workers
 * report (elastic_worker_report_phase, e.g. elastic.torch's "abort",
 * "regroup", "restore"):
 *
 *   detect      the failed worker's last heartbeat -> the agent saw the failure
 *               (an upper bound: the worker may have died up to a step later)
 *   stop        the failure -> every survivor aborted (or every worker stopped)
 *   rendezvous  -> the next generation formed
 *   promote     -> the last replacement attached (a promoted spare; cold_start
 *               when any replacement was started afresh)
 *   <worker's>  the slowest local rank's time for each phase it reported
 *   total       the failure -> every local rank reported "restore"
 *
 * Written once every local worker reported "restore" for the generation; a
 * new failure first writes what the unfinished one had (complete: 0).
 */
#include "agent/journal.h"
#include "agent/journal_events.h"
#include "agent/probes.h"
#include "agent/spares.h"

#include "common/clock.h"

#include <stdio.h>
#include <stdlib.h>

#define AGENT_PHASES_MAX 8 /* named phases the workers report */

/* The phases of the recovery in flight, for recovery_phases; only this
 * file reads or writes it. */
struct agent_recovery_phases {
    bool active;           /* a failure is being recovered from */
    uint64_t failure_ms;   /* the agent saw it (monotonic) */
    int64_t detect_ms;     /* the failed worker's last heartbeat -> failure_ms; -1: unknown */
    uint64_t stopped_ms;   /* the generation stopped here (survivors aborted) */
    uint64_t formed_ms;    /* the next generation formed */
    uint64_t attached_ms;  /* the last replacement process attached */
    uint64_t generation;   /* the generation recovered into */
    int promoted, cold_started, awaiting_hello;
    int restored; /* local workers that reported "restore" */
    char names[AGENT_PHASES_MAX][32];
    uint64_t max_ns[AGENT_PHASES_MAX]; /* the slowest local rank's time per phase */
};

int agent__phases_init(agent_group *group)
{
    group->phases = calloc(1, sizeof *group->phases);
    return group->phases != NULL ? 0 : elastic__fail(ELASTIC_ENOMEM, "out of memory (phases)");
}

void agent__phases_destroy(agent_group *group)
{
    free(group->phases);
    group->phases = NULL;
}

bool agent__phases_recovering(const agent_group *group, uint64_t *failure_ms)
{
    if (failure_ms != NULL) *failure_ms = group->phases->failure_ms;
    return group->phases->active;
}

static int64_t span(uint64_t from, uint64_t to)
{
    return from != 0 && to >= from ? (int64_t)(to - from) : -1;
}

static void emit(agent_group *group, bool complete)
{
    agent_recovery_phases *p = group->phases;
    if (!p->active) return;
    uint64_t now = elastic__now_ms();
    int64_t stop = span(p->failure_ms, p->stopped_ms);
    int64_t rendezvous = span(p->stopped_ms, p->formed_ms);
    int64_t attach = span(p->formed_ms, p->attached_ms);
    agent_ev_recovery_phases ev = {
        .generation = p->generation,
        .complete = complete,
        .detect_ms = p->detect_ms >= 0 ? p->detect_ms : AGENT_EV_ABSENT,
        .stop_ms = stop >= 0 ? stop : AGENT_EV_ABSENT,
        .rendezvous_ms = rendezvous >= 0 ? rendezvous : AGENT_EV_ABSENT,
        .attach_ms = attach >= 0 && p->awaiting_hello == 0 ? attach : AGENT_EV_ABSENT,
        .promoted = p->promoted,
        .cold_started = p->cold_started,
        .total_ms = span(p->failure_ms, now),
    };
    for (int i = 0; i < AGENT_PHASES_MAX && i < AGENT_EV_MAX_PHASES && p->names[i][0] != '\0';
         i++) {
        ev.phase_names[i] = p->names[i];
        ev.phase_ms[i] = (int64_t)(p->max_ns[i] / 1000000u);
    }
    agent__ev_recovery_phases(group->job.events, &ev);
    p->active = false;
}

void agent__phases_failure(agent_group *group, const agent_worker *failed)
{
    emit(group, false); /* one still open: what it had */
    agent_recovery_phases *p = group->phases;
    memset(p, 0, sizeof *p);
    p->active = true;
    p->failure_ms = group->clock.failure_ms;
    p->detect_ms = -1;
    uint64_t beat_ns = failed != NULL && group->monitor != NULL
                           ? probe__monitor_last_beat_ns(group->monitor, failed->local_rank)
                           : 0;
    if (beat_ns != 0 && beat_ns / 1000000u <= p->failure_ms)
        p->detect_ms = (int64_t)(p->failure_ms - beat_ns / 1000000u);
}

void agent__phases_stopped(agent_group *group)
{
    if (group->phases->active && group->phases->stopped_ms == 0)
        group->phases->stopped_ms = elastic__now_ms();
}

void agent__phases_formed(agent_group *group)
{
    agent_recovery_phases *p = group->phases;
    if (!p->active || p->formed_ms != 0) return;
    p->formed_ms = elastic__now_ms();
    p->generation = group->current.generation;
}

void agent__phases_replacement(agent_group *group, agent_worker *worker, bool promoted)
{
    agent_recovery_phases *p = group->phases;
    if (!p->active) return;
    if (promoted)
        p->promoted++;
    else
        p->cold_started++;
    worker->awaiting_hello = true;
    p->awaiting_hello++;
}

void agent__phases_on_hello(agent_group *group, agent_worker *worker)
{
    agent_recovery_phases *p = group->phases;
    if (!worker->awaiting_hello) return;
    worker->awaiting_hello = false;
    if (!p->active || p->awaiting_hello == 0) return;
    if (--p->awaiting_hello == 0) p->attached_ms = elastic__now_ms();
}

void agent__phases_on_report(agent_group *group, agent_worker *worker, const char *phase,
                             uint64_t ns, uint64_t generation)
{
    agent_recovery_phases *p = group->phases;
    (void)worker;
    if (!p->active || generation != p->generation || phase == NULL) return;
    int i = 0;
    while (i < AGENT_PHASES_MAX && p->names[i][0] != '\0' && strcmp(p->names[i], phase) != 0) i++;
    if (i == AGENT_PHASES_MAX) return; /* more names than kept: the first ones count */
    if (p->names[i][0] == '\0') snprintf(p->names[i], sizeof p->names[i], "%s", phase);
    if (ns > p->max_ns[i]) p->max_ns[i] = ns;
    if (strcmp(phase, "restore") == 0 && ++p->restored >= group->nworkers) {
        emit(group, true);
        agent__spares_fill(group); /* the replacement waited for this */
    }
}
