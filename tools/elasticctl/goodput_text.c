/*
 * The accounting as text (one line per disruption, totals per bucket and per
 * cause, the ETTR line) and as JSON (the same numbers, seconds).
 */
#include "elasticctl/goodput.h"
#include "elasticctl/goodput_classes.h"

#include "common/json_writer.h"

#include <stdlib.h>
#include <string.h>

static double s(double ms)
{
    return ms / 1000.0;
}

static void steps_text(const goodput_line *l, char *out, size_t size)
{
    if (l->last_step >= 0 && l->restored_step >= 0)
        snprintf(out, size, "%lld->%lld", (long long)l->last_step, (long long)l->restored_step);
    else if (l->restored_step >= 0)
        snprintf(out, size, "->%lld", (long long)l->restored_step);
    else
        snprintf(out, size, "-");
}

void goodput__write_verdict(const goodput_report *r, FILE *out)
{
    fprintf(out, "goodput: ETTR %.1f%% (%.3f s productive of %.3f s), %.3f s lost to failures",
            100.0 * r->ettr, s(r->productive_ms), s(r->wall_ms), s(r->failures_ms));
    int largest = r->steps_known ? goodput__largest_bucket(r) : -1;
    if (largest >= 0) /* as the agent's closing line says it */
        fprintf(out, "; most time lost: %s %.3f s", goodput__bucket_name(largest),
                s(r->lost_ms[largest]));
    if (!r->steps_known) fputs(" (no step events: redone work not counted)", out);
    fputc('\n', out);
}

int goodput__write_text(const goodput_report *r, const char *run_id, FILE *out)
{
    fprintf(out, "job %s: wall %.3f s, productive %.3f s, step time %.1f ms%s\n", run_id,
            s(r->wall_ms), s(r->productive_ms), r->step_ms,
            r->steps_known ? "" : " (the logs have no step events: redone work is not counted)");
    fprintf(out, "%4s %10s %-10s %4s %-11s", "#", "at s", "cause", "gen", "steps");
    for (int b = 0; b < GP_CKPT_STALL; b++) fprintf(out, " %10s", goodput__bucket_name(b));
    fprintf(out, " %10s\n", "lost s");
    for (size_t i = 0; i < r->line_count; i++) {
        const goodput_line *l = &r->lines[i];
        char steps[48];
        steps_text(l, steps, sizeof steps);
        fprintf(out, "%4zu %+10.3f %-10s %4lld %-11s", i, s((double)(l->at_ms - r->start_ms)),
                goodput__cause_name(l->cause), (long long)l->generation, steps);
        for (int b = 0; b < GP_CKPT_STALL; b++) fprintf(out, " %10.3f", s(l->ms[b]));
        fprintf(out, " %10.3f\n", s(l->lost_ms));
    }
    if (r->lines_dropped > 0)
        fprintf(out, "(%zu more disruptions not listed; their time is in the totals)\n",
                r->lines_dropped);
    fputs("lost per bucket:", out);
    for (int b = 0; b < GP_BUCKETS; b++)
        fprintf(out, "%s %s %.3f s", b ? "," : "", goodput__bucket_name(b), s(r->lost_ms[b]));
    fputs("\nlost per cause:", out);
    bool first = true;
    for (int c = 0; c < GP_CAUSES; c++) {
        if (r->cause_count[c] == 0) continue;
        fprintf(out, "%s %s %.3f s (%d)", first ? "" : ",", goodput__cause_name(c),
                s(r->cause_ms[c]), r->cause_count[c]);
        first = false;
    }
    fprintf(out, "\nlost to failures: %.3f s\nETTR %.1f%%\n", s(r->failures_ms), 100.0 * r->ettr);
    return ferror(out) ? elastic__fail(ELASTIC_EIO, "writing the goodput report failed") : 0;
}

static void json_seconds(elastic__jw *w, const char *key, double ms)
{
    elastic__jw_key(w, key);
    elastic__jw_double(w, s(ms), 3);
}

static void json_buckets(elastic__jw *w, const double *ms, int count)
{
    elastic__jw_object_begin(w);
    for (int b = 0; b < count; b++) json_seconds(w, goodput__bucket_name(b), ms[b]);
    elastic__jw_object_end(w);
}

int goodput__write_json(const goodput_report *r, const char *run_id, FILE *out)
{
    return goodput__write_json_classes(r, run_id, NULL, out);
}

static void json_totals(elastic__jw *w, const goodput_report *r, const char *run_id)
{
    elastic__jw_key(w, "run_id");
    elastic__jw_string(w, run_id);
    json_seconds(w, "wall_s", r->wall_ms);
    json_seconds(w, "productive_s", r->productive_ms);
    elastic__jw_key(w, "ettr");
    elastic__jw_double(w, r->ettr, 6);
    json_seconds(w, "failures_s", r->failures_ms);
    elastic__jw_key(w, "step_ms");
    elastic__jw_double(w, r->step_ms, 3);
    elastic__jw_key(w, "steps_known");
    elastic__jw_bool(w, r->steps_known);
    elastic__jw_key(w, "lost_s");
    json_buckets(w, r->lost_ms, GP_BUCKETS);
    elastic__jw_key(w, "causes");
    elastic__jw_object_begin(w);
    for (int c = 0; c < GP_CAUSES; c++) {
        elastic__jw_key(w, goodput__cause_name(c));
        elastic__jw_object_begin(w);
        elastic__jw_key(w, "count");
        elastic__jw_int(w, r->cause_count[c]);
        json_seconds(w, "lost_s", r->cause_ms[c]);
        elastic__jw_object_end(w);
    }
    elastic__jw_object_end(w);
}

static void json_disruptions(elastic__jw *w, const goodput_report *r)
{
    elastic__jw_key(w, "disruptions");
    elastic__jw_array_begin(w);
    for (size_t i = 0; i < r->line_count; i++) {
        const goodput_line *l = &r->lines[i];
        elastic__jw_object_begin(w);
        elastic__jw_key(w, "cause");
        elastic__jw_string(w, goodput__cause_name(l->cause));
        elastic__jw_key(w, "generation");
        elastic__jw_int(w, l->generation);
        json_seconds(w, "at_s", (double)(l->at_ms - r->start_ms));
        elastic__jw_key(w, "last_step");
        elastic__jw_int(w, l->last_step);
        elastic__jw_key(w, "restored_step");
        elastic__jw_int(w, l->restored_step);
        json_seconds(w, "lost_s", l->lost_ms);
        elastic__jw_key(w, "buckets");
        json_buckets(w, l->ms, GP_CKPT_STALL);
        elastic__jw_object_end(w);
    }
    elastic__jw_array_end(w);
    elastic__jw_key(w, "disruptions_not_listed");
    elastic__jw_uint(w, r->lines_dropped);
}

/* Written whole into a buffer sized from the report (a disruption's object is
 * well under 1 KiB), so an overflow fails the command instead of printing a
 * cut report. */
int goodput__write_json_classes(const goodput_report *r, const char *run_id,
                                const goodput_classes *classes, FILE *out)
{
    size_t cap = 64 * 1024 + r->line_count * 1024;
    char *buf = malloc(cap);
    if (buf == NULL) return elastic__fail(ELASTIC_ENOMEM, "out of memory");
    elastic__jw w;
    elastic__jw_init(&w, buf, cap);
    elastic__jw_object_begin(&w);
    json_totals(&w, r, run_id);
    json_disruptions(&w, r);
    if (classes != NULL) goodput__write_classes_json(classes, &w);
    elastic__jw_object_end(&w);
    size_t len = 0;
    int rc = elastic__jw_finish(&w, &len);
    if (rc == 0 && (fwrite(buf, 1, len, out) != len || fputc('\n', out) == EOF || ferror(out)))
        rc = elastic__fail(ELASTIC_EIO, "writing the goodput report failed");
    free(buf);
    return rc;
}
