/*
 * Goodput accounting (goodput.h). The job's time is walked once, generation
 * by generation, along boundaries that only move forward (each one clamped to
 * the one before, so a late or missing record can shorten a bucket but never
 * make time count twice): the buckets and productive time always sum to the
 * wall time exactly.
 *
 *   start -> formed (rendezvous) -> first step (restart, restore) -> last step
 *   (running: productive, less checkpoint stalls and the steps the next
 *   generation redoes) -> noticed (detection) -> stopped (stopping) -> next
 *   generation formed (rendezvous) -> ...  -> last step -> job end (idle)
 *
 * Recovery time (stopping through the next first step) is charged to the
 * disruption that started it; a generation that failed again before its first
 * step leaves its time with the disruption still being recovered from.
 */
#include "common/goodput.h"

#include "common/common.h"

#include <stdlib.h>
#include <string.h>

static const char *const bucket_names[GP_BUCKETS] = { "detection",  "stopping", "rendezvous",
                                                      "restart",    "restore",  "redone",
                                                      "ckpt_stall", "idle" };
static const char *const cause_names[GP_CAUSES] = { "start",     "failure",   "hang",
                                                    "node_lost", "fenced",    "probe",
                                                    "membership", "silent_corruption" };

const char *goodput__bucket_name(int bucket)
{
    return bucket >= 0 && bucket < GP_BUCKETS ? bucket_names[bucket] : "?";
}

const char *goodput__cause_name(int cause)
{
    return cause >= 0 && cause < GP_CAUSES ? cause_names[cause] : "?";
}

int goodput__cause_of_end(int64_t code)
{
    switch (code) {
    case 2: return GP_CAUSE_NODE_LOST;
    case 3:
    case 4: return GP_CAUSE_MEMBERSHIP;
    case 5: return -1; /* the job ended: not a disruption */
    case 6: return GP_CAUSE_FENCED;
    default: return GP_CAUSE_FAILURE; /* 1 (a worker failed) and codes newer than these */
    }
}

int goodput__largest_bucket(const goodput_report *r)
{
    int largest = -1;
    for (int b = 0; b < GP_BUCKETS; b++)
        if (r->lost_ms[b] > 0 && (largest < 0 || r->lost_ms[b] > r->lost_ms[largest])) largest = b;
    return largest;
}

/* What every node said about one generation, merged. */
typedef struct generation_facts {
    int64_t generation;
    uint64_t formed_ms; /* the last node to form it: training cannot start before */
    bool formed, started, ended, disrupted, stopped;
    uint64_t first_ms;     /* the last node's first step */
    int64_t restored_step; /* the lowest first step */
    uint64_t restore_ms;   /* the longest restore */
    int64_t last_step;     /* the furthest step reached */
    uint64_t last_ms;
    int64_t step_us; /* a node's own measure of its step time */
    uint64_t stall_ms;
    uint64_t disrupted_ms; /* the earliest notice */
    int cause;
    uint64_t stopped_ms; /* the last node's workers gone */
} generation_facts;

typedef struct walk {
    goodput_report *rep;
    uint64_t cursor, end;
    goodput_line *open; /* the line recovery time is charged to */
    goodput_line overflow;
} walk;

static generation_facts *facts_of(generation_facts *g, size_t *count, int64_t generation)
{
    for (size_t i = 0; i < *count; i++)
        if (g[i].generation == generation) return &g[i];
    g[*count] =
        (generation_facts){ .generation = generation, .restored_step = -1, .last_step = -1 };
    return &g[(*count)++];
}

static void merge(generation_facts *f, const goodput_record *r)
{
    uint64_t b = r->b > 0 ? (uint64_t)r->b : r->ts_ms;
    switch (r->kind) {
    case GP_FORMED:
        if (!f->formed || r->ts_ms > f->formed_ms) f->formed_ms = r->ts_ms;
        f->formed = true;
        break;
    case GP_STEPS_STARTED:
        if (!f->started || b > f->first_ms) f->first_ms = b;
        if (r->a >= 0 && (f->restored_step < 0 || r->a < f->restored_step)) f->restored_step = r->a;
        if (r->c > 0 && (uint64_t)r->c > f->restore_ms) f->restore_ms = (uint64_t)r->c;
        f->started = true;
        break;
    case GP_STEPS_ENDED:
        if (r->a > f->last_step) f->last_step = r->a;
        if (b > f->last_ms) f->last_ms = b;
        if (r->c > f->step_us) f->step_us = r->c;
        if (r->d > 0 && (uint64_t)r->d > f->stall_ms) f->stall_ms = (uint64_t)r->d;
        f->ended = true;
        break;
    case GP_DISRUPTION:
        if (!f->disrupted || r->ts_ms < f->disrupted_ms) {
            f->disrupted_ms = r->ts_ms;
            f->cause = r->cause >= 0 && r->cause < GP_CAUSES ? r->cause : GP_CAUSE_FAILURE;
        }
        f->disrupted = true;
        break;
    case GP_STOPPED:
        if (r->ts_ms > f->stopped_ms) f->stopped_ms = r->ts_ms;
        f->stopped = true;
        break;
    default: break;
    }
}

static int by_generation(const void *a, const void *b)
{
    int64_t x = ((const generation_facts *)a)->generation,
            y = ((const generation_facts *)b)->generation;
    return (x > y) - (x < y);
}

static void book(walk *w, goodput_line *line, int bucket, double ms)
{
    if (ms <= 0) return;
    w->rep->lost_ms[bucket] += ms;
    if (line == NULL) return;
    line->ms[bucket] += ms;
    line->lost_ms += ms;
    w->rep->cause_ms[line->cause] += ms;
}

/* Moves the cursor to `until` (never back, never past the end), booking the
 * time crossed to a bucket of a line (line NULL: the totals only). */
static void advance(walk *w, goodput_line *line, int bucket, uint64_t until)
{
    if (until > w->end) until = w->end;
    if (until <= w->cursor) return;
    book(w, line, bucket, (double)(until - w->cursor));
    w->cursor = until;
}

static goodput_line *new_line(walk *w, int cause, int64_t generation, uint64_t at_ms)
{
    goodput_report *rep = w->rep;
    rep->cause_count[cause]++;
    goodput_line *line = &w->overflow;
    if (rep->line_count < GOODPUT_MAX_LINES)
        line = &rep->lines[rep->line_count++];
    else
        rep->lines_dropped++;
    *line = (goodput_line){ .cause = cause,
                            .generation = generation,
                            .at_ms = at_ms,
                            .last_step = -1,
                            .restored_step = -1 };
    return line;
}

/* The generation's own step time: its running span less stalls over its steps. */
static double step_ms_of(const generation_facts *g)
{
    if (g->started && g->ended && g->last_step > g->restored_step && g->restored_step >= 0 &&
        g->last_ms > g->first_ms + g->stall_ms)
        return (double)(g->last_ms - g->first_ms - g->stall_ms) /
               (double)(g->last_step - g->restored_step);
    return g->step_us > 0 ? (double)g->step_us / 1000.0 : 0;
}

static int by_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The step the job resumed from after `g` (gens[i]): the first step of the
 * next generation that stepped at all (one that failed while starting did
 * not resume anything), or else the newest checkpoint saved before g's end. */
static int64_t restored_after(const generation_facts *gens, size_t n, size_t i,
                              const goodput_record *records, size_t count)
{
    const generation_facts *g = &gens[i];
    for (size_t j = i + 1; j < n; j++)
        if (gens[j].started && gens[j].restored_step >= 0) return gens[j].restored_step;
    if (i + 1 == n) return -1; /* nothing resumed: the job ended with g */
    int64_t step = -1;
    for (size_t k = 0; k < count; k++)
        if (records[k].kind == GP_CHECKPOINT && records[k].ts_ms <= g->disrupted_ms &&
            records[k].a > step)
            step = records[k].a;
    return step;
}

static void walk_generations(walk *w, generation_facts *gens, size_t n,
                             const goodput_record *records, size_t count, double median_step_ms)
{
    goodput_report *rep = w->rep;
    for (size_t i = 0; i < n; i++) {
        generation_facts *g = &gens[i];
        advance(w, w->open, GP_RENDEZVOUS, g->formed_ms);
        goodput_line *line =
            NULL; /* this generation's own disruption, made once its running ends */
        if (g->started) {
            uint64_t restore = g->restore_ms;
            uint64_t before = g->first_ms > w->cursor ? g->first_ms - w->cursor : 0;
            if (restore > before) restore = before;
            advance(w, w->open, GP_RESTART, g->first_ms - restore);
            advance(w, w->open, GP_RESTORE, g->first_ms);
            uint64_t run_end = g->ended && g->last_ms > g->first_ms ? g->last_ms
                               : g->disrupted                       ? g->disrupted_ms
                                                                    : w->end;
            if (run_end > w->end) run_end = w->end;
            double running = run_end > w->cursor ? (double)(run_end - w->cursor) : 0;
            double stall = (double)g->stall_ms < running ? (double)g->stall_ms : running;
            double redone = 0;
            int64_t restored = g->disrupted ? restored_after(gens, n, i, records, count) : -1;
            if (g->disrupted) {
                line = new_line(w, g->cause, g->generation, g->disrupted_ms);
                line->last_step = g->ended ? g->last_step : -1;
                line->restored_step = restored;
            }
            if (line != NULL && g->ended && restored >= 0 && g->last_step > restored) {
                double step_ms = step_ms_of(g);
                if (step_ms <= 0) step_ms = median_step_ms;
                redone = (double)(g->last_step - restored) * step_ms;
                if (redone > running - stall) redone = running - stall;
            }
            if (g->ended && g->restored_step >= 0 && g->last_step > g->restored_step)
                rep->steps_run += (double)(g->last_step - g->restored_step);
            book(w, NULL, GP_CKPT_STALL, stall);
            book(w, line, GP_REDONE, redone);
            rep->productive_ms += running - stall - redone;
            if (run_end > w->cursor) w->cursor = run_end;
        } else if (!rep->steps_known) {
            /* Logs without step events: the generation's life counts as training. */
            uint64_t run_end = g->disrupted ? g->disrupted_ms : w->end;
            if (run_end > w->end) run_end = w->end;
            if (run_end > w->cursor) {
                rep->productive_ms += (double)(run_end - w->cursor);
                w->cursor = run_end;
            }
        } else if (g->disrupted) {
            /* It failed before its first step: still recovering. */
            advance(w, w->open, GP_RESTART, g->disrupted_ms);
        }
        if (g->disrupted) {
            if (line == NULL) line = new_line(w, g->cause, g->generation, g->disrupted_ms);
            advance(w, line, GP_DETECTION, g->disrupted_ms);
            if (g->stopped) advance(w, line, GP_STOPPING, g->stopped_ms);
            w->open = line;
        }
    }
}

int goodput__account(const goodput_record *records, size_t count, uint64_t end_ms,
                     goodput_report *out)
{
    memset(out, 0, sizeof *out);
    if (records == NULL || count == 0) return elastic__fail(ELASTIC_EINVAL, "no events to account");
    generation_facts *gens = calloc(count, sizeof *gens);
    if (gens == NULL) return elastic__fail(ELASTIC_ENOMEM, "out of memory");
    uint64_t start = records[0].ts_ms, end = 0, last = 0;
    bool started_seen = false, end_seen = false;
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        const goodput_record *r = &records[i];
        if (r->ts_ms > last) last = r->ts_ms;
        if (r->kind == GP_START && (!started_seen || r->ts_ms < start))
            start = r->ts_ms, started_seen = true;
        if (!started_seen && r->ts_ms < start) start = r->ts_ms;
        if (r->kind == GP_END && r->ts_ms > end) end = r->ts_ms, end_seen = true;
        if (r->kind == GP_STEPS_STARTED || r->kind == GP_STEPS_ENDED) out->steps_known = true;
        bool per_generation = r->kind == GP_FORMED || r->kind == GP_STEPS_STARTED ||
                              r->kind == GP_STEPS_ENDED || r->kind == GP_DISRUPTION ||
                              r->kind == GP_STOPPED;
        if (per_generation && r->generation >= 0) merge(facts_of(gens, &n, r->generation), r);
    }
    if (!end_seen) end = end_ms > last ? end_ms : last;
    /* Only generations that formed are walked (a stray record of another never did). */
    size_t formed = 0;
    for (size_t i = 0; i < n; i++)
        if (gens[i].formed) gens[formed++] = gens[i];
    qsort(gens, formed, sizeof *gens, by_generation);

    double *steps = calloc(formed > 0 ? formed : 1, sizeof *steps);
    if (steps == NULL) {
        free(gens);
        return elastic__fail(ELASTIC_ENOMEM, "out of memory");
    }
    size_t measured = 0;
    for (size_t i = 0; i < formed; i++)
        if ((steps[measured] = step_ms_of(&gens[i])) > 0) measured++;
    if (measured > 0) {
        qsort(steps, measured, sizeof steps[0], by_double);
        out->step_ms = steps[measured / 2];
    }
    free(steps);

    walk w = { .rep = out, .cursor = start, .end = end > start ? end : start };
    out->start_ms = start;
    out->end_ms = w.end;
    w.open = new_line(&w, GP_CAUSE_START, formed > 0 ? gens[0].generation : -1, start);
    walk_generations(&w, gens, formed, records, count, out->step_ms);
    advance(&w, NULL, GP_IDLE, w.end);
    free(gens);

    out->wall_ms = (double)(w.end - start);
    for (int c = 0; c < GP_CAUSES; c++)
        if (c != GP_CAUSE_START) out->failures_ms += out->cause_ms[c];
    out->ettr = out->wall_ms > 0 ? out->productive_ms / out->wall_ms : 0;
    if (out->steps_run > 0)
        out->mean_step_ms = (out->productive_ms + out->lost_ms[GP_REDONE]) / out->steps_run;
    return 0;
}
