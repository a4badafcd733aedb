/*
 * `elasticctl explain` as text: one block per failure (what happened, the
 * evidence, the rule, the decision, what to look at), then the job's end.
 */
#include "common/common.h"
#include "elasticctl/ctl.h"
#include "elasticctl/explain.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

const char *explain__advice(int cls)
{
    switch (cls) {
    case FC_USER_CODE:
        return "the training code at the frame named, with the batch or input of that step; "
               "restarting replays it";
    case FC_OOM:
        return "memory: the batch size and activation memory (a CUDA OOM), or the job's "
               "memory.max / the host's RAM (the kernel's OOM killer)";
    case FC_COMM:
        return "the network and NCCL: NCCL_DEBUG=INFO, the links between the ranks' nodes; a "
               "peer that failed first is the cause";
    case FC_HANG:
        return "the stacks the hang probe wrote to the worker's log: a collective some rank "
               "never entered, a dataloader stuck on I/O";
    case FC_NODE_LOST:
        return "the lost node: its power, its network to the store, its agent's own log";
    case FC_HARDWARE:
        return "the node's health findings (Xid, ECC, a GPU off the bus, a port down): "
               "replace or drain it";
    case FC_SDC:
        return "the node whose replica diverged: a GPU or memory fault that computes wrong "
               "numbers silently; run a diagnostic (DCGM level 3) before it rejoins";
    case FC_STRAGGLER:
        return "the slow node: thermal throttling, a degraded link, a noisy neighbour";
    case FC_OPERATOR:
        return "who stopped it: the scheduler (scancel, preemption, time limit) or a person";
    default:
        return "the worker's own log: it ended without saying why (for a SIGKILL: dmesg, "
               "and who else runs on the node)";
    }
}

static const char *decision_words(int decision)
{
    switch (decision) {
    case FD_NONE: return "nothing of its own (a consequence)";
    case FD_RESTART: return "restart (one of --max-restarts spent)";
    case FD_RESTART_FREE: return "restart, no restart spent (replaced)";
    case FD_STOP_BUG: return "stop now: a deterministic bug (exit 70)";
    case FD_STOP_BUDGET: return "stop: the restart budget is spent";
    case FD_STOP_HARDWARE: return "stop: the bound on free restarts is spent";
    case FD_STOP_OPERATOR: return "stop: asked to";
    default: return "?";
    }
}

static void what_happened(const explain_failure *f, char *out, size_t size)
{
    /* The OOM killer's SIGKILL, as the agent said it (its witness, oom.h). */
    if (f->signal > 0 && f->verdict.cls == FC_OOM && strcmp(f->verdict.type, "oom_kill") == 0)
        snprintf(out, size, "out of memory: killed by the kernel's OOM killer (signal %d)",
                 f->signal);
    else if (f->signal > 0)
        snprintf(out, size, "killed by signal %d", f->signal);
    else if (f->exit_code > 0)
        snprintf(out, size, "exited with code %d", f->exit_code);
    else
        snprintf(out, size, "%s", f->reason[0] != '\0' ? f->reason : "ended");
}

int explain__write_text(const explain_report *r, FILE *out)
{
    fprintf(out, "job %s: %d failure%s", r->run_id, r->count, r->count == 1 ? "" : "s");
    if (r->max_restarts >= 0) fprintf(out, ", --max-restarts %d", r->max_restarts);
    if (r->torchrun_counting) fprintf(out, " (torchrun's counting)");
    fprintf(out, "\n");
    bool replayed = r->count > 0 && !r->failures[0].from_agent;
    if (replayed)
        fprintf(out, "(these logs have no failure_classified events: each failure is classified "
                     "from its event alone, without its error file or stderr, and the policy is "
                     "replayed over them)\n");
    for (int i = 0; i < r->count; i++) {
        const explain_failure *f = &r->failures[i];
        const failure_verdict *v = &f->verdict;
        char what[300], who[200] = "", step[40] = "";
        what_happened(f, what, sizeof what);
        if (f->rank >= 0)
            snprintf(who, sizeof who, "rank %d on node %.160s", f->rank, f->node);
        else
            snprintf(who, sizeof who, "node %.160s", f->node);
        if (f->step >= 0) snprintf(step, sizeof step, ", step %" PRId64, f->step);
        fprintf(out, "\nfailure %d: generation %" PRIu64 ", %s, +%.3f s%s\n", i + 1, f->generation,
                who, (double)(f->ts_ms - r->t0_ms) / 1000.0, step);
        fprintf(out, "  what:      %s\n", what);
        fprintf(out, "  class:     %s", failure__class_label(v->cls));
        if (v->consequence) {
            if (f->cause_rank >= 0)
                fprintf(out, " (a consequence of rank %d's failure)", f->cause_rank);
            else
                fprintf(out, " (a consequence of an earlier failure)");
        }
        fprintf(out, "\n");
        if (v->type[0] != '\0' || v->frame[0] != '\0')
            fprintf(out, "  error:     %s%s%s%s%s\n", v->type, v->frame[0] ? " at " : "", v->frame,
                    v->message[0] ? ": " : "", v->message);
        if (v->evidence[0] != '\0') fprintf(out, "  evidence:  %s\n", v->evidence);
        fprintf(out, "  rule:      %s: %s\n", failure_policy__rule_name(f->result.rule),
                f->result.why);
        fprintf(out, "  decided:   %s%s\n", decision_words(f->result.decision),
                f->result.quarantine ? "; the node is quarantined" : "");
        if (!v->consequence) fprintf(out, "  look at:   %s\n", explain__advice(v->cls));
    }
    if (r->dropped > 0) fprintf(out, "\n(%d more failures not shown)\n", r->dropped);
    if (r->ended) {
        fprintf(out, "\nthe job ended: %s, exit %d\n", r->status[0] ? r->status : "?",
                r->exit_code);
        /* Its own words: a bound passed (--max-restarts, --max-infra-restarts), a bug. */
        const char *why = r->why;
        if (strncmp(why, "the job failed: ", 16) == 0) why += 16;
        if (why[0] != '\0') fprintf(out, "  why:       %s\n", why);
    }
    return ferror(out) ? elastic__fail(ELASTIC_EIO, "write failed") : 0;
}

/* `elasticctl explain`: load, then text. */
int ctl_explain(const char *const *paths, int count, const char *run_id, FILE *out)
{
    explain_report *r = calloc(1, sizeof *r);
    if (r == NULL) return elastic__fail(ELASTIC_ENOMEM, "out of memory");
    int rc = explain__load(paths, count, run_id, r);
    if (rc == 0) rc = explain__write_text(r, out);
    free(r);
    return rc;
}
