/*
 * Reading a job's failures for `elasticctl explain` (explain.h): the events
 * that say a generation ended for a reason, bounded like the timeline's
 * lines, merged by time; then either the agent's own verdicts
 * (failure_classified) or, for logs without them, each failure classified
 * from what its event holds and the policy replayed in time order.
 */
#include "common/common.h"
#include "elasticctl/ctl.h"
#include "elasticctl/explain.h"
#include "elasticctl/jsonl.h"

#include "common/json.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

typedef enum raw_kind {
    RK_STARTED,    /* agent_started: max_restarts */
    RK_FORMED,     /* generation_formed: world size, nodes */
    RK_FAILURE,    /* a local worker failed */
    RK_PROBE,      /* probe_failed */
    RK_HEALTH,     /* health_stepped_aside */
    RK_STRAGGLER,  /* straggler_evicted */
    RK_NODE_LOST,  /* generation_ended cause 2 */
    RK_FENCED,     /* fenced */
    RK_DIVERGENCE, /* replica_divergence */
    RK_CLASSIFIED, /* failure_classified: the agent's verdict */
    RK_JOB_END,
} raw_kind;

typedef struct raw_event {
    uint64_t ts_ms;
    int kind;
    char node[160];
    int64_t generation, rank, local_rank, exit_code, signal, step, a, b;
    bool replaced;
    char text[256]; /* reason, probe, status */
    char probe[32];
    json_object *obj; /* RK_CLASSIFIED, RK_JOB_END: kept for its fields */
    size_t seq;       /* read order: ties in time keep it */
} raw_event;

#define EXPLAIN_MAX_RAW 200000

typedef struct load_ctx {
    raw_event *events;
    size_t count, cap;
    const char *run_id;
    char run[160];
} load_ctx;

static int kind_of(const char *event, json_object *obj)
{
    static const struct {
        const char *name;
        int kind;
    } table[] = {
        { "agent_started", RK_STARTED },
        { "generation_formed", RK_FORMED },
        { "failure", RK_FAILURE },
        { "probe_failed", RK_PROBE },
        { "health_stepped_aside", RK_HEALTH },
        { "straggler_evicted", RK_STRAGGLER },
        { "fenced", RK_FENCED },
        { "replica_divergence", RK_DIVERGENCE },
        { "failure_classified", RK_CLASSIFIED },
        { "job_end", RK_JOB_END },
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(event, table[i].name) == 0) return table[i].kind;
    int64_t cause = 0;
    if (strcmp(event, "generation_ended") == 0 && json__get_int(obj, "cause", 0, 100, &cause) &&
        cause == 2)
        return RK_NODE_LOST;
    return -1;
}

static int64_t get_int(json_object *obj, const char *key, int64_t fallback)
{
    int64_t v;
    return json__get_int(obj, key, INT64_MIN / 2, INT64_MAX / 2, &v) ? v : fallback;
}

static void get_str(json_object *obj, const char *key, char *out, size_t size)
{
    const char *s = json__get_string(obj, key);
    snprintf(out, size, "%s", s != NULL ? s : "");
}

/* Every event read must be of one job: the first run_id seen is the job's,
 * and another one is an error naming both (--run-id picks one). */
static int one_job(load_ctx *ctx, const char *run)
{
    if (ctx->run[0] == '\0') {
        snprintf(ctx->run, sizeof ctx->run, "%s", run);
        return 0;
    }
    if (strcmp(ctx->run, run) == 0) return 0;
    return elastic__fail(ELASTIC_EINVAL,
                         "the logs hold two jobs (%s and %s): pick one with --run-id", ctx->run,
                         run);
}

/* The next event's slot, zeroed, growing the array by doubling up to its
 * bound (a log of more is refused, not read in part). NULL with *rc set. */
static raw_event *next_slot(load_ctx *ctx, int *rc)
{
    if (ctx->count == EXPLAIN_MAX_RAW) {
        *rc = elastic__fail(ELASTIC_ELIMIT, "more than %d failure events", EXPLAIN_MAX_RAW);
        return NULL;
    }
    if (ctx->count == ctx->cap) {
        size_t cap = ctx->cap ? ctx->cap * 2 : 64;
        raw_event *grown = realloc(ctx->events, cap * sizeof *grown);
        if (grown == NULL) {
            *rc = elastic__fail(ELASTIC_ENOMEM, "out of memory");
            return NULL;
        }
        ctx->events = grown;
        ctx->cap = cap;
    }
    raw_event *e = &ctx->events[ctx->count++];
    memset(e, 0, sizeof *e);
    e->seq = ctx->count;
    return e;
}

/* What only some kinds of event hold. False for an event that is not a
 * failure after all: a divergence the job did not act on (committed 0 is
 * what the goodput accounting reads too; in warn mode training goes on). */
static bool read_kind_fields(raw_event *e, json_object *obj)
{
    switch (e->kind) {
    case RK_STARTED:
        e->a = get_int(obj, "max_restarts", -1);
        e->b = get_int(obj, "torchrun_restarts", 0);
        return true;
    case RK_FORMED:
        e->a = get_int(obj, "world_size", 0);
        e->b = get_int(obj, "group_world_size", 0);
        return true;
    case RK_NODE_LOST: get_str(obj, "by_node", e->node, sizeof e->node); return true;
    case RK_HEALTH:
    case RK_STRAGGLER: {
        char replacement[160];
        get_str(obj, "replacement", replacement, sizeof replacement);
        e->replaced = replacement[0] != '\0' || get_int(obj, "spares_waiting", 0) > 0;
        return true;
    }
    case RK_DIVERGENCE:
        if (get_int(obj, "committed", 1) != 0) return false;
        if (e->text[0] == '\0') get_str(obj, "detail", e->text, sizeof e->text);
        e->step = get_int(obj, "step", -1);
        return true;
    case RK_CLASSIFIED:
        e->step = get_int(obj, "step", -1);
        e->obj = obj; /* the verdict's fields are read once sorted */
        return true;
    case RK_JOB_END: e->obj = obj; return true; /* its why, read once sorted */
    default: return true;
    }
}

/* The fields every kind may hold (absent ones get their "unknown" value),
 * then the kind's own. */
static bool read_event(raw_event *e, int kind, uint64_t ts, const char *node, json_object *obj)
{
    e->ts_ms = ts;
    e->kind = kind;
    snprintf(e->node, sizeof e->node, "%s", node);
    e->generation = get_int(obj, "generation", -1);
    e->rank = get_int(obj, "rank", -1);
    e->local_rank = get_int(obj, "local_rank", -1);
    e->exit_code = get_int(obj, "exit_code", -1);
    e->signal = get_int(obj, "signal", 0);
    e->step = get_int(obj, "last_step", -1);
    get_str(obj, kind == RK_JOB_END ? "status" : "reason", e->text, sizeof e->text);
    get_str(obj, "probe", e->probe, sizeof e->probe);
    return read_kind_fields(e, obj);
}

/* One log line: an event of the job that explain reads (kind_of) is kept;
 * any other event is skipped; a line that is no event is an error. */
static int take(void *user, const char *line, size_t len)
{
    load_ctx *ctx = user;
    json_object *obj = NULL;
    int rc = json__parse(line, len, &obj);
    if (rc != 0) return rc;
    const char *event = json__get_string(obj, "event"), *run = json__get_string(obj, "run_id"),
               *node = json__get_string(obj, "node");
    int64_t ts = 0;
    if (!json_object_is_type(obj, json_type_object) || event == NULL || run == NULL ||
        node == NULL || !json__get_int(obj, "ts_ms", 0, INT64_C(1) << 52, &ts)) {
        json_object_put(obj);
        return elastic__fail(ELASTIC_EPROTO, "not an event (needs ts_ms, event, run_id, node)");
    }
    int kind = kind_of(event, obj);
    if (kind < 0 || (ctx->run_id != NULL && strcmp(run, ctx->run_id) != 0)) {
        json_object_put(obj);
        return 0;
    }
    rc = one_job(ctx, run); /* before the put: run is the object's */
    raw_event *e = rc == 0 ? next_slot(ctx, &rc) : NULL;
    if (e != NULL && !read_event(e, kind, (uint64_t)ts, node, obj)) ctx->count--;
    if (e == NULL || e->obj != obj) json_object_put(obj);
    return rc;
}

/* Stable: events of one millisecond keep their log order. */
static int by_time(const void *a, const void *b)
{
    const raw_event *x = a, *y = b;
    if (x->ts_ms != y->ts_ms) return x->ts_ms < y->ts_ms ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static explain_failure *next_failure(explain_report *r)
{
    if (r->count == EXPLAIN_MAX_FAILURES) {
        r->dropped++;
        return NULL;
    }
    explain_failure *f = &r->failures[r->count++];
    memset(f, 0, sizeof *f);
    f->cause_rank = -1;
    return f;
}

/* The agent's own verdict, as it logged it. */
static void take_classified(explain_report *r, const raw_event *e)
{
    explain_failure *f = next_failure(r);
    if (f == NULL) return;
    json_object *o = e->obj;
    f->from_agent = true;
    f->ts_ms = e->ts_ms;
    f->generation = e->generation > 0 ? (uint64_t)e->generation : 0;
    f->rank = (int)e->rank;
    f->local_rank = (int)e->local_rank;
    f->step = e->step;
    f->exit_code = (int)e->exit_code;
    f->signal = (int)e->signal;
    snprintf(f->node, sizeof f->node, "%s", e->node);
    char name[64];
    get_str(o, "class", name, sizeof name);
    f->verdict.cls = failure__class_of_name(name) >= 0 ? failure__class_of_name(name) : FC_UNKNOWN;
    f->verdict.consequence = get_int(o, "consequence", 0) != 0;
    f->cause_rank = (int)get_int(o, "cause_rank", -1);
    get_str(o, "type", f->verdict.type, sizeof f->verdict.type);
    get_str(o, "frame", f->verdict.frame, sizeof f->verdict.frame);
    get_str(o, "message", f->verdict.message, sizeof f->verdict.message);
    get_str(o, "signature", f->verdict.signature, sizeof f->verdict.signature);
    get_str(o, "evidence", f->verdict.evidence, sizeof f->verdict.evidence);
    get_str(o, "decision", name, sizeof name);
    int d = failure_policy__decision_of_name(name);
    f->result.decision = d >= 0 ? d : FD_NONE;
    get_str(o, "rule", name, sizeof name);
    int rule = failure_policy__rule_of_name(name);
    f->result.rule = rule >= 0 ? rule : FR_BUDGET;
    get_str(o, "why", f->result.why, sizeof f->result.why);
    f->result.budget_used = (int)get_int(o, "budget_used", 0);
    f->result.quarantine = get_int(o, "quarantine", 0) != 0;
    snprintf(f->reason, sizeof f->reason, "%s", e->text);
}

static failure_source source_of(const raw_event *e)
{
    switch (e->kind) {
    case RK_PROBE:
        if (strcmp(e->probe, "hang") == 0 || strcmp(e->probe, "startup") == 0) return FS_PROBE_HANG;
        if (strncmp(e->probe, "nccl", 4) == 0) return FS_PROBE_NCCL;
        if (strcmp(e->probe, "straggler") == 0) return FS_PROBE_STRAGGLER;
        return FS_PROBE_USER;
    case RK_HEALTH: return FS_HEALTH;
    case RK_STRAGGLER: return FS_PROBE_STRAGGLER;
    case RK_NODE_LOST: return FS_NODE_LOST;
    case RK_FENCED: return FS_FENCED;
    case RK_DIVERGENCE: return FS_REPLICA_DIVERGENCE;
    case RK_JOB_END: return FS_OPERATOR;
    default: return FS_WORKER_EXIT;
    }
}

static bool is_disruption(const raw_event *e)
{
    switch (e->kind) {
    case RK_FAILURE:
    case RK_PROBE:
    case RK_HEALTH:
    case RK_STRAGGLER:
    case RK_NODE_LOST:
    case RK_FENCED:
    case RK_DIVERGENCE: return true;
    case RK_JOB_END: return strcmp(e->text, "stopped") == 0;
    default: return false;
    }
}

/* An older log: each disruption classified from its event, the policy replayed. */
static void replay(explain_report *r, const load_ctx *ctx)
{
    static failure_policy_history history;
    memset(&history, 0, sizeof history);
    int64_t world = 1, nodes = 1;
    int64_t first_gen_failed = -1;
    for (size_t i = 0; i < ctx->count; i++) {
        const raw_event *e = &ctx->events[i];
        if (e->kind == RK_STARTED && e->a >= 0) {
            r->max_restarts = (int)e->a;
            r->torchrun_counting = e->b != 0;
        }
        if (e->kind == RK_FORMED) {
            world = e->a > 0 ? e->a : world;
            nodes = e->b > 0 ? e->b : nodes;
        }
        if (!is_disruption(e)) continue;
        /* One node's loss is logged by every other node: once per generation. */
        bool seen = false;
        for (int j = 0; j < r->count && (e->kind == RK_NODE_LOST || e->kind == RK_FENCED); j++)
            seen |= r->failures[j].generation == (uint64_t)e->generation &&
                    r->failures[j].verdict.cls == FC_NODE_LOST;
        if (seen) continue;
        explain_failure *f = next_failure(r);
        if (f == NULL) continue;
        f->ts_ms = e->ts_ms;
        f->generation = e->generation > 0 ? (uint64_t)e->generation : 0;
        f->rank = (int)e->rank;
        f->local_rank = (int)e->local_rank;
        f->exit_code = (int)e->exit_code;
        f->signal = (int)e->signal;
        snprintf(f->node, sizeof f->node, "%s", e->node);
        snprintf(f->reason, sizeof f->reason, "%s", e->text);
        /* A probe names its rank's last step; a failure event names none (the
         * node's steps_ended is its furthest rank's, not the failed one's). */
        f->step = e->kind == RK_PROBE || e->kind == RK_DIVERGENCE ? e->step : -1;
        bool peer_first = e->generation >= 0 && e->generation == first_gen_failed;
        if (!peer_first) first_gen_failed = e->generation;
        failure_evidence ev = { .source = source_of(e),
                                .exit_code = (int)e->exit_code,
                                .signal = (int)e->signal,
                                .reason = e->text,
                                .peer_failed_first = peer_first,
                                .peer_rank = -1 };
        failure__classify(&ev, &f->verdict);
        if (peer_first && f->verdict.consequence) {
            for (int j = r->count - 2; j >= 0; j--)
                if (r->failures[j].generation == f->generation &&
                    !r->failures[j].verdict.consequence) {
                    f->cause_rank = r->failures[j].rank;
                    break;
                }
        }
        failure_policy_config config;
        failure_policy__config_defaults(&config, r->max_restarts >= 0 ? r->max_restarts : 0);
        config.torchrun_counting = r->torchrun_counting;
        config.world_size = (int)world;
        config.nodes = (int)nodes;
        failure_policy_entry entry = { .generation = f->generation,
                                       .step = f->step,
                                       .rank = f->rank,
                                       .cls = f->verdict.cls,
                                       .consequence = f->verdict.consequence,
                                       .replaced = e->replaced,
                                       .signature_hash = f->verdict.signature_hash,
                                       .time_ms = e->ts_ms };
        snprintf(entry.node, sizeof entry.node, "%.127s", e->node);
        snprintf(entry.signature, sizeof entry.signature, "%s", f->verdict.signature);
        failure_policy__decide(&config, &history, &entry, &f->result);
        failure_policy__record(&history, &entry, &f->result);
    }
}

int explain__load(const char *const *paths, int count, const char *run_id, explain_report *out)
{
    memset(out, 0, sizeof *out);
    out->max_restarts = -1;
    out->exit_code = -1;
    if (count < 1 || count > CTL_MAX_EVENT_LOGS)
        return elastic__fail(ELASTIC_EINVAL, "give 1 to %d event logs", CTL_MAX_EVENT_LOGS);
    load_ctx ctx = { .run_id = run_id };
    int rc = 0;
    for (int i = 0; i < count && rc == 0; i++) rc = ctl__jsonl_each(paths[i], take, &ctx);
    if (rc == 0 && ctx.count == 0)
        rc = elastic__fail(ELASTIC_ENOTFOUND, "no events%s%s in the logs", run_id ? " of job " : "",
                           run_id ? run_id : "");
    if (rc == 0) {
        qsort(ctx.events, ctx.count, sizeof *ctx.events, by_time);
        snprintf(out->run_id, sizeof out->run_id, "%s", ctx.run);
        out->t0_ms = ctx.events[0].ts_ms;
        bool agent_verdicts = false;
        for (size_t i = 0; i < ctx.count; i++)
            agent_verdicts |= ctx.events[i].kind == RK_CLASSIFIED;
        if (agent_verdicts) {
            for (size_t i = 0; i < ctx.count; i++) {
                const raw_event *e = &ctx.events[i];
                if (e->kind == RK_CLASSIFIED) take_classified(out, e);
                if (e->kind == RK_STARTED && e->a >= 0) out->max_restarts = (int)e->a;
            }
        } else {
            replay(out, &ctx);
        }
        for (size_t i = 0; i < ctx.count; i++)
            if (ctx.events[i].kind == RK_JOB_END && (!out->ended || ctx.events[i].exit_code != 0)) {
                out->ended = true; /* a failed node's end says more than a left-out one's */
                out->exit_code = (int)ctx.events[i].exit_code;
                snprintf(out->status, sizeof out->status, "%.31s", ctx.events[i].text);
                get_str(ctx.events[i].obj, "why", out->why, sizeof out->why);
            }
    }
    for (size_t i = 0; i < ctx.count; i++)
        if (ctx.events[i].obj != NULL) json_object_put(ctx.events[i].obj);
    free(ctx.events);
    return rc;
}

int explain__class_of_generation(const explain_report *r, uint64_t generation)
{
    for (int i = 0; i < r->count; i++)
        if (r->failures[i].generation == generation && !r->failures[i].verdict.consequence)
            return r->failures[i].verdict.cls;
    return -1;
}
