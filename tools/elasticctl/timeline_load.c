/*
 * Reading event logs into a timeline: every line is bounded, parsed with the
 * JSON reader and validated field by field; lines of other jobs or of events
 * the picture does not show are counted and skipped, malformed ones fail with
 * the file and line named.
 */
#include "elasticctl/ctl.h"
#include "elasticctl/jsonl.h"
#include "elasticctl/timeline.h"

#include "common/json.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[TL_KINDS] = {
    "agent_started", "generation_formed", "worker_started",
    "worker_exited", "failure",           "hang",
    "probe",         "generation_ended",  "generation_stopped",
    "restarted",     "checkpoint",        "waiting",
    "fenced",        "job_end",           "steps_started",
    "steps_ended",   "recovery_phases",   "replica_divergence"
};

const char *timeline__kind_name(int kind)
{
    return kind >= 0 && kind < TL_KINDS ? kind_names[kind] : "?";
}

static int node_index(timeline *t, const char *name)
{
    for (int i = 0; i < t->node_count; i++)
        if (strcmp(t->nodes[i], name) == 0) return i;
    if (t->node_count == TIMELINE_MAX_NODES) return -1;
    snprintf(t->nodes[t->node_count], sizeof t->nodes[0], "%s", name);
    return t->node_count++;
}

/* Which timeline kind an event is; -1: not shown. */
static int kind_of(const char *event, json_object *obj)
{
    if (strcmp(event, "probe_failed") == 0) {
        const char *probe = json__get_string(obj, "probe");
        return probe != NULL && (strcmp(probe, "hang") == 0 || strcmp(probe, "startup") == 0)
                   ? TL_HANG
                   : TL_PROBE;
    }
    if (strcmp(event, "straggler_evicted") == 0) return TL_PROBE; /* marked as a probe's verdict */
    if (strcmp(event, "health_stepped_aside") == 0) return TL_PROBE;
    if (strcmp(event, "health_check") == 0) { /* a check that is not ok (a return to ok: no mark) */
        const char *verdict = json__get_string(obj, "verdict");
        return verdict != NULL && strcmp(verdict, "ok") != 0 ? TL_PROBE : -1;
    }
    for (int k = 0; k < TL_KINDS; k++)
        if (k != TL_HANG && k != TL_PROBE && strcmp(event, kind_names[k]) == 0) return k;
    return -1;
}

static int push(timeline *t, const timeline_event *e)
{
    if (t->count == TIMELINE_MAX_EVENTS)
        return elastic__fail(ELASTIC_ELIMIT, "more than %d events", TIMELINE_MAX_EVENTS);
    if (t->count == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        timeline_event *grown = realloc(t->events, cap * sizeof *grown);
        if (grown == NULL) return elastic__fail(ELASTIC_ENOMEM, "out of memory");
        t->events = grown;
        t->cap = cap;
    }
    t->events[t->count++] = *e;
    return 0;
}

/* "stop 1, rendezvous 0, promote 4, regroup 35, restore 15" from a
 * recovery_phases event: its "<phase>_ms" integers but total_ms, bounded. */
static void phases_text(json_object *obj, char *out, size_t size)
{
    size_t len = 0;
    out[0] = '\0';
    json_object_object_foreach(obj, key, value)
    {
        size_t n = strlen(key);
        if (n < 4 || n > 40 || strcmp(key + n - 3, "_ms") != 0 || strcmp(key, "total_ms") == 0 ||
            strcmp(key, "ts_ms") == 0 || !json_object_is_type(value, json_type_int))
            continue;
        int wrote = snprintf(out + len, size - len, "%s%.*s %lld", len > 0 ? ", " : "",
                             (int)(n - 3), key, (long long)json_object_get_int64(value));
        if (wrote < 0 || (size_t)wrote >= size - len) {
            out[len] = '\0'; /* what fits */
            return;
        }
        len += (size_t)wrote;
    }
}

/* An event's numbers: generation, ranks, and the kind's values (which key
 * holds value, value2, ... differs by kind). */
static void event_numbers(json_object *obj, int kind, timeline_event *e)
{
    static const char *const value_keys[TL_KINDS] = { [TL_GENERATION_FORMED] = "world_size",
                                                      [TL_WORKER_EXITED] = "exit_code",
                                                      [TL_FAILURE] = "exit_code",
                                                      [TL_GENERATION_STOPPED] = "stop_ms",
                                                      [TL_RESTARTED] = "recovery_ms",
                                                      [TL_CHECKPOINT] = "step",
                                                      [TL_WAITING] = "joined",
                                                      [TL_JOB_END] = "exit_code",
                                                      [TL_GENERATION_ENDED] = "cause",
                                                      [TL_STEPS_STARTED] = "step",
                                                      [TL_STEPS_ENDED] = "last_step",
                                                      [TL_RECOVERY_PHASES] = "total_ms",
                                                      [TL_DIVERGENCE] = "committed" };
    static const char *const value2_keys[TL_KINDS] = { [TL_GENERATION_FORMED] = "group_world_size",
                                                       [TL_WORKER_EXITED] = "signal",
                                                       [TL_FAILURE] = "signal",
                                                       [TL_STEPS_STARTED] = "first_step_ms",
                                                       [TL_STEPS_ENDED] = "last_step_ms" };
    static const char *const value3_keys[TL_KINDS] = {
        [TL_STEPS_STARTED] = "restore_ms", [TL_STEPS_ENDED] = "step_us"
    };
    static const char *const value4_keys[TL_KINDS] = { [TL_STEPS_ENDED] = "save_stall_ms" };
    int64_t v;
    if (kind == TL_STEPS_STARTED || kind == TL_STEPS_ENDED) e->value = e->value2 = -1;
    if (json__get_int(obj, "generation", 0, INT64_MAX / 2, &v)) e->generation = v;
    if (json__get_int(obj, "local_rank", 0, TIMELINE_MAX_LOCAL - 1, &v)) e->local_rank = (int)v;
    if (json__get_int(obj, "rank", -1, 1 << 24, &v)) e->rank = (int)v;
    if (value_keys[kind] != NULL && json__get_int(obj, value_keys[kind], -1, INT64_MAX / 2, &v))
        e->value = v;
    if (value2_keys[kind] != NULL && json__get_int(obj, value2_keys[kind], -1, INT64_MAX / 2, &v))
        e->value2 = v;
    if (value3_keys[kind] != NULL && json__get_int(obj, value3_keys[kind], 0, INT64_MAX / 2, &v))
        e->value3 = v;
    if (value4_keys[kind] != NULL && json__get_int(obj, value4_keys[kind], 0, INT64_MAX / 2, &v))
        e->value4 = v;
    if (kind == TL_CHECKPOINT && json__get_int(obj, "saved_ms", 0, INT64_C(1) << 52, &v))
        e->ts_ms = (uint64_t)v;
}

/* An event's text: its status, what is missing or its reason, and for a
 * few events a sentence made of several fields. */
static void event_text(json_object *obj, const char *event, int kind, timeline_event *e)
{
    const char *text = json__get_string(obj, kind == TL_JOB_END   ? "status"
                                             : kind == TL_WAITING ? "missing"
                                                                  : "reason");
    if (text != NULL) snprintf(e->text, sizeof e->text, "%s", text);
    if (strcmp(event, "straggler_evicted") == 0) {
        const char *score = json__get_string(obj, "score");
        const char *spare = json__get_string(obj, "replacement");
        bool named = spare != NULL && spare[0] != '\0';
        snprintf(e->text, sizeof e->text, "evicted as the job's straggler (score %.16s)%s%.128s",
                 score != NULL ? score : "?", named ? "; replaced by " : "", named ? spare : "");
    }
    if (strcmp(event, "health_check") == 0) {
        const char *verdict = json__get_string(obj, "verdict"),
                   *check = json__get_string(obj, "check"), *port = json__get_string(obj, "port");
        char where[80] = "";
        int64_t gpu;
        if (port != NULL && port[0] != '\0')
            snprintf(where, sizeof where, " %.64s", port);
        else if (json__get_int(obj, "gpu", 0, 1 << 16, &gpu))
            snprintf(where, sizeof where, " GPU %d", (int)gpu);
        snprintf(e->text, sizeof e->text, "health %.16s: %.32s%s: %.100s",
                 verdict != NULL ? verdict : "?", check != NULL ? check : "?", where,
                 text != NULL ? text : "");
    }
    if (strcmp(event, "health_stepped_aside") == 0) {
        const char *spare = json__get_string(obj, "replacement");
        bool named = spare != NULL && spare[0] != '\0';
        snprintf(e->text, sizeof e->text, "stepped aside, unhealthy: %.100s%s%.60s",
                 text != NULL ? text : "?", named ? "; replaced by " : "", named ? spare : "");
    }
    if (kind == TL_RECOVERY_PHASES) /* every "<phase>_ms" but the total, in log order */
        phases_text(obj, e->text, sizeof e->text);
}

/* Keeps the event (a worker event without a usable local rank cannot have a
 * lane: skipped) and widens its node's lanes to it. */
static int keep_event(timeline *t, const timeline_event *e)
{
    bool needs_lane =
        e->kind == TL_WORKER_STARTED || e->kind == TL_WORKER_EXITED || e->kind == TL_CHECKPOINT;
    if (needs_lane && e->local_rank < 0) {
        t->skipped++;
        return 0;
    }
    int rc = push(t, e);
    if (rc == 0 && e->local_rank >= t->local_count[e->node])
        t->local_count[e->node] = e->local_rank + 1;
    return rc;
}

/* One line: 0 (kept or skipped) or an error naming what is wrong. */
static int take_line(timeline *t, const char *line, size_t len, const char *run_id)
{
    json_object *obj = NULL;
    int rc = json__parse(line, len, &obj);
    if (rc != 0) return rc;
    const char *event = json__get_string(obj, "event"), *run = json__get_string(obj, "run_id"),
               *node = json__get_string(obj, "node");
    int64_t ts = 0;
    rc = !json_object_is_type(obj, json_type_object) || event == NULL || run == NULL ||
                 node == NULL || !json__get_int(obj, "ts_ms", 0, INT64_C(1) << 52, &ts)
             ? elastic__fail(ELASTIC_EPROTO, "not an event (needs ts_ms, event, run_id, node)")
             : 0;
    if (rc == 0 && strlen(run) >= sizeof t->run_id)
        rc = elastic__fail(ELASTIC_EPROTO, "run_id too long");
    if (rc == 0 && strlen(node) >= sizeof t->nodes[0])
        rc = elastic__fail(ELASTIC_EPROTO, "node too long");
    int kind = rc == 0 ? kind_of(event, obj) : -1;
    if (rc != 0 || kind < 0 || (run_id != NULL && strcmp(run, run_id) != 0)) {
        if (rc == 0) t->skipped++;
        json_object_put(obj);
        return rc;
    }
    if (t->run_id[0] == '\0')
        snprintf(t->run_id, sizeof t->run_id, "%s", run);
    else if (strcmp(t->run_id, run) != 0)
        rc = elastic__fail(ELASTIC_EINVAL,
                           "the logs hold two jobs (%s and %s): pick one with --run-id", t->run_id,
                           run);
    timeline_event e = {
        .ts_ms = (uint64_t)ts, .kind = kind, .local_rank = -1, .rank = -1, .generation = -1
    };
    if (rc == 0 && (e.node = node_index(t, node)) < 0)
        rc = elastic__fail(ELASTIC_ELIMIT, "more than %d nodes", TIMELINE_MAX_NODES);
    if (rc == 0) {
        event_numbers(obj, kind, &e);
        event_text(obj, event, kind, &e);
        rc = keep_event(t, &e);
    }
    json_object_put(obj);
    return rc;
}

typedef struct load_ctx {
    timeline *t;
    const char *run_id;
} load_ctx;

static int take_one(void *user, const char *line, size_t len)
{
    load_ctx *ctx = user;
    return take_line(ctx->t, line, len, ctx->run_id);
}

static int load_file(timeline *t, const char *path, const char *run_id)
{
    load_ctx ctx = { t, run_id };
    return ctl__jsonl_each(path, take_one, &ctx);
}

/* Bottom-up merge sort by time: stable, so events of one millisecond keep
 * their log order (a worker's start before its exit). */
static int sort_by_time(timeline *t)
{
    timeline_event *tmp = malloc(t->count * sizeof *tmp);
    if (tmp == NULL) return elastic__fail(ELASTIC_ENOMEM, "out of memory");
    timeline_event *src = t->events, *dst = tmp;
    for (size_t width = 1; width < t->count; width *= 2) {
        for (size_t lo = 0; lo < t->count; lo += 2 * width) {
            size_t mid = lo + width < t->count ? lo + width : t->count;
            size_t hi = lo + 2 * width < t->count ? lo + 2 * width : t->count;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) dst[k++] = src[j].ts_ms < src[i].ts_ms ? src[j++] : src[i++];
            while (i < mid) dst[k++] = src[i++];
            while (j < hi) dst[k++] = src[j++];
        }
        timeline_event *swap = src;
        src = dst;
        dst = swap;
    }
    if (src != t->events) memcpy(t->events, src, t->count * sizeof *tmp);
    free(tmp);
    return 0;
}

int timeline__load(const char *const *paths, int count, const char *run_id, timeline *out)
{
    memset(out, 0, sizeof *out);
    if (count < 1 || count > TIMELINE_MAX_FILES)
        return elastic__fail(ELASTIC_EINVAL, "give 1 to %d event logs", TIMELINE_MAX_FILES);
    int rc = 0;
    for (int i = 0; i < count && rc == 0; i++) rc = load_file(out, paths[i], run_id);
    if (rc == 0 && out->count == 0)
        rc = elastic__fail(ELASTIC_ENOTFOUND, "no events%s%s in the logs", run_id ? " of job " : "",
                           run_id ? run_id : "");
    if (rc == 0) rc = sort_by_time(out);
    if (rc != 0) {
        timeline__free(out);
        return rc;
    }
    out->t0_ms = out->events[0].ts_ms;
    out->t1_ms = out->events[out->count - 1].ts_ms;
    if (out->t1_ms <= out->t0_ms) out->t1_ms = out->t0_ms + 1;
    return 0;
}

void timeline__free(timeline *t)
{
    free(t->events);
    t->events = NULL;
    t->count = t->cap = 0;
}
