/*
 * The lines a person reads on elasticrun's stderr: one per event that needs
 * them (a failure, the group running again, waiting for nodes, fenced, the
 * job's end with its summary). Each goes out with one write() so it does not
 * interleave with the workers' own output; --quiet silences them.
 */
#include "agent/console.h"
#include "agent/oom.h"

#include "agent/probes.h"
#include "agent/python.h"

#include "common/clock.h"
#include "common/failure_policy.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

void agent__console(const agent_group *group, const char *fmt, ...)
{
    if (group->job.opts != NULL && group->job.opts->quiet) return;
    char line[1536];
    int at = snprintf(line, sizeof line, "elasticrun: ");
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(line + at, sizeof line - (size_t)at - 1, fmt, args);
    va_end(args);
    if (n < 0) return;
    size_t len =
        (size_t)at +
        ((size_t)n < sizeof line - (size_t)at - 1 ? (size_t)n : sizeof line - (size_t)at - 2);
    line[len++] = '\n';
    ssize_t written;
    do written = write(STDERR_FILENO, line, len);
    while (written < 0 && errno == EINTR);
}

void agent__describe_exit(int exit_code, int term_signal, char *out, size_t size)
{
    const char *abbrev = term_signal > 0 ? sigabbrev_np(term_signal) : NULL;
    if (term_signal > 0 && abbrev != NULL)
        snprintf(out, size, "killed by signal %d (SIG%s)", term_signal, abbrev);
    else if (term_signal > 0)
        snprintf(out, size, "killed by signal %d", term_signal);
    else if (exit_code >= 0)
        snprintf(out, size, "exit code %d", exit_code);
    else
        out[0] = '\0';
}

/* The reason once: a probe's own words plus how the worker ended, or only
 * how it ended when the reason is that already (a plain exit or kill). */
void agent__describe_cause(const elastic_rdzv_cause *cause, char *out, size_t size)
{
    char how[96];
    agent__describe_exit(cause->exit_code, cause->signal, how, sizeof how);
    bool reason_is_exit = cause->reason[0] == '\0' ||
                          strncmp(cause->reason, "killed by signal", 16) == 0 ||
                          strncmp(cause->reason, "exited with code", 16) == 0;
    /* The OOM killer's SIGKILL: its reason says it, "killed by signal 9" would not. */
    if (strcmp(cause->reason, AGENT_OOM_REASON) == 0) how[0] = '\0';
    if (reason_is_exit || how[0] == '\0')
        snprintf(out, size, "%s", reason_is_exit ? how : cause->reason);
    else
        snprintf(out, size, "%s (%s)", cause->reason, how);
    if (out[0] == '\0') snprintf(out, size, "failed");
}

/* "restarting (2 of 3 restarts left)" after a failure that consumed one. */
static void budget_text(const agent_group *group, char *out, size_t size)
{
    int max = group->current.max_restarts, left = max - group->current.restart_count - 1;
    if (left < 0)
        snprintf(out, size, "no restarts left (--max-restarts %d): the job fails", max);
    else
        snprintf(out, size, "restarting (%d of %d restart%s left)", left, max, max == 1 ? "" : "s");
}

void agent__console_failure_head(const agent_group *group, const agent_worker *worker,
                                 const elastic_rdzv_cause *cause, char *out, size_t size)
{
    char what[400];
    agent__describe_cause(cause, what, sizeof what);
    snprintf(out, size, "rank %d (local rank %d, pid %d) on node %s failed: %s", worker->rank,
             worker->local_rank, (int)worker->pid, group->job.node_id, what);
}

void agent__console_failure_said(const agent_group *group, const char *head,
                                 agent_failure_then then, const char *kind)
{
    char what_follows[96] = "";
    if (then == AGENT_FAILURE_STOPS)
        snprintf(what_follows, sizeof what_follows,
                 "; the job stops: a deterministic bug (exit %d)",
                 FAILURE_POLICY_EXIT_DETERMINISTIC);
    else if (then == AGENT_FAILURE_RESTARTS_FREE)
        snprintf(what_follows, sizeof what_follows, "; restarting (no restart spent)");
    else if (then == AGENT_FAILURE_RESTARTS) {
        what_follows[0] = ';', what_follows[1] = ' ';
        budget_text(group, what_follows + 2, sizeof what_follows - 2);
    }
    agent__console(group, "%s%s%s%s", head, what_follows, kind != NULL && *kind != '\0' ? "; " : "",
                   kind != NULL ? kind : "");
}

void agent__console_ended_elsewhere(const agent_group *group, const elastic_rdzv_cause *cause)
{
    char what[400], budget[96];
    unsigned long long gen = (unsigned long long)cause->generation;
    switch (cause->kind) {
    case ELASTIC_RDZV_FAILURE:
        agent__describe_cause(cause, what, sizeof what);
        budget_text(group, budget, sizeof budget);
        agent__console(group, "rank %d on node %s failed: %s; generation %llu ends, %s",
                       cause->rank, cause->node_id, what, gen, budget);
        break;
    case ELASTIC_RDZV_NODE_LOST:
        agent__console(group, "node %s lost (%s); generation %llu ends, re-forming without it",
                       cause->node_id, cause->reason[0] ? cause->reason : "its lease ended", gen);
        break;
    case ELASTIC_RDZV_NODES_WAITING:
        agent__console(group, "a node is waiting to join; generation %llu ends to admit it", gen);
        break;
    case ELASTIC_RDZV_NODE_LEFT:
        if (strncmp(cause->reason, "straggler evicted", 17) == 0) /* node_straggler.c's reason */
            agent__console(group,
                           "node %s evicted as the job's straggler; generation %llu ends "
                           "(no restart used), re-forming without it",
                           cause->node_id, gen);
        else
            agent__console(group, "node %s left; generation %llu ends, re-forming without it",
                           cause->node_id, gen);
        break;
    default: break; /* the job closed: the end line says so */
    }
}

void agent__console_running_again(const agent_group *group, uint64_t recovery_ms)
{
    char took[32];
    if (recovery_ms < 1000)
        snprintf(took, sizeof took, "%llu ms", (unsigned long long)recovery_ms);
    else
        snprintf(took, sizeof took, "%.2f s", (double)recovery_ms / 1000.0);
    agent__console(
        group, "generation %llu running: world size %d (%d node%s), %s after the failure",
        (unsigned long long)group->current.generation, group->current.world_size,
        group->current.group_world_size, group->current.group_world_size == 1 ? "" : "s", took);
}

void agent__console_fenced(const agent_group *group, uint64_t generation, const char *reason,
                           int killed)
{
    agent__console(group,
                   "fenced out of generation %llu (%s): killing %d local worker(s) now, then "
                   "rejoining as a new member",
                   (unsigned long long)generation,
                   reason != NULL && *reason ? reason : "its membership lease lapsed", killed);
}

void agent__console_evicted(const agent_group *group, const agent_evict_call *call)
{
    char after[128], who[160];
    int ms = group->job.opts->straggler_quarantine_ms;
    if (ms > 0)
        snprintf(after, sizeof after, "quarantined for %.0f s, then rejoins as a spare", ms / 1e3);
    else
        snprintf(after, sizeof after, "leaving the job (--straggler-quarantine 0)");
    if (call->replacement[0] != '\0')
        snprintf(who, sizeof who, "spare %s takes its place", call->replacement);
    else if (call->waiting > 0)
        snprintf(who, sizeof who, "a waiting spare takes its place");
    else
        snprintf(who, sizeof who, "the others go on without it");
    agent__console(group,
                   "node %s is the job's straggler (score %.2f, step %llu ms): stopping its "
                   "workers; generation %llu ends without using the restart budget, %s; %s",
                   group->job.node_id, call->score, (unsigned long long)call->step_ms,
                   (unsigned long long)call->generation, who, after);
}

static void format_duration(uint64_t ms, char *out, size_t size)
{
    if (ms < 1000)
        snprintf(out, size, "%llu ms", (unsigned long long)ms);
    else if (ms < 60000)
        snprintf(out, size, "%.1f s", (double)ms / 1000.0);
    else if (ms < 3600000)
        snprintf(out, size, "%llum%02llus", (unsigned long long)(ms / 60000),
                 (unsigned long long)(ms / 1000 % 60));
    else
        snprintf(out, size, "%lluh%02llum", (unsigned long long)(ms / 3600000),
                 (unsigned long long)(ms / 60000 % 60));
}

/* What failures cost, as far as it is known. A job whose workers report no
 * steps (no heartbeats) has an unknown amount of redone work: the time from
 * each failure to running again is a lower bound and no ETTR is given. A
 * failed job's last failure cost the rest of the job: no ETTR either. */
static void format_lost(const goodput_report *goodput, agent_end_status end, char *out,
                        size_t size)
{
    double seconds = goodput->failures_ms / 1000.0;
    if (end == AGENT_END_FAILED)
        snprintf(out, size, "%s%.3f s lost to failures (no ETTR for a failed job%s)",
                 goodput->steps_known ? "" : "at least ", seconds,
                 goodput->steps_known ? "" : "; no steps reported");
    else if (!goodput->steps_known)
        snprintf(out, size,
                 "at least %.3f s lost to failures (ETTR unknown: no steps reported, so "
                 "redone work is not counted)",
                 seconds);
    else if (goodput__largest_bucket(goodput) >= 0)
        /* The largest bucket is often no failure's (save stalls, the start):
         * named, so a low ETTR beside a small loss reads as what it is. */
        snprintf(out, size, "%.3f s lost to failures (ETTR %.1f%%; most time lost: %s %.3f s)",
                 seconds, 100.0 * goodput->ettr,
                 goodput__bucket_name(goodput__largest_bucket(goodput)),
                 goodput->lost_ms[goodput__largest_bucket(goodput)] / 1000.0);
    else
        snprintf(out, size, "%.3f s lost to failures (ETTR %.1f%%)", seconds,
                 100.0 * goodput->ettr);
}

void agent__console_job_end(const agent_group *group, agent_end_status end)
{
    const char *status = agent__end_status_name(end);
    char took[32], lost[160], ckpt[160];
    format_duration(elastic__now_ms() - group->clock.started_ms, took, sizeof took);
    /* The goodput accounting of this node's journal: the redone steps, the
     * restarts and the restores, not only failure -> running again. */
    goodput_report *goodput = NULL;
    if (agent__goodput_report(group, &goodput) == 0) {
        format_lost(goodput, end, lost, sizeof lost);
        free(goodput);
    } else {
        snprintf(lost, sizeof lost, "%.3f s lost to failures",
                 (double)group->clock.lost_ms / 1000.0);
    }
    uint64_t ckpt_step, ckpt_wall_ms;
    int ckpt_rank;
    if (agent__probes_last_checkpoint(group, &ckpt_step, &ckpt_wall_ms, &ckpt_rank)) {
        time_t seconds = (time_t)(ckpt_wall_ms / 1000);
        struct tm tm;
        char when[16];
        gmtime_r(&seconds, &tm);
        strftime(when, sizeof when, "%H:%M:%SZ", &tm);
        snprintf(ckpt, sizeof ckpt, "last checkpoint step %llu (rank %d, %s)",
                 (unsigned long long)ckpt_step, ckpt_rank, when);
    } else {
        snprintf(ckpt, sizeof ckpt, "no checkpoint reported");
    }
    int restarts = group->current.restart_count;
    if (end == AGENT_END_LEFT_OUT) { /* exit 0, and the reason in one line */
        agent__console(group, "%s, after %s here: %llu generation%s, %s, %s", group->summary, took,
                       (unsigned long long)group->m.generations, group->m.generations == 1 ? "" : "s",
                       lost, ckpt);
        return;
    }
    agent__console(group, "job %s after %s: %llu generation%s, %d restart%s, %s, %s", status, took,
                   (unsigned long long)group->m.generations, group->m.generations == 1 ? "" : "s",
                   restarts, restarts == 1 ? "" : "s", lost, ckpt);
}
