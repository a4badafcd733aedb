/*
 * The accounting as text (one line per disruption, totals per bucket and per
 * cause, the ETTR line) and as JSON (the same numbers, seconds).
 */
#include "elasticctl/goodput.h"

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

static void json_string(FILE *out, const char *text)
{
    fputc('"', out);
    for (; *text != '\0'; text++) {
        unsigned char c = (unsigned char)*text;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

static void json_buckets(FILE *out, const double *ms, int count)
{
    fputc('{', out);
    for (int b = 0; b < count; b++)
        fprintf(out, "%s\"%s\":%.3f", b ? "," : "", goodput__bucket_name(b), s(ms[b]));
    fputc('}', out);
}

int goodput__write_json(const goodput_report *r, const char *run_id, FILE *out)
{
    fputs("{\"run_id\":", out);
    json_string(out, run_id);
    fprintf(out,
            ",\"wall_s\":%.3f,\"productive_s\":%.3f,\"ettr\":%.6f,\"failures_s\":%.3f,"
            "\"step_ms\":%.3f,\"steps_known\":%s,\"lost_s\":",
            s(r->wall_ms), s(r->productive_ms), r->ettr, s(r->failures_ms), r->step_ms,
            r->steps_known ? "true" : "false");
    json_buckets(out, r->lost_ms, GP_BUCKETS);
    fputs(",\"causes\":{", out);
    for (int c = 0; c < GP_CAUSES; c++)
        fprintf(out, "%s\"%s\":{\"count\":%d,\"lost_s\":%.3f}", c ? "," : "",
                goodput__cause_name(c), r->cause_count[c], s(r->cause_ms[c]));
    fputs("},\"disruptions\":[", out);
    for (size_t i = 0; i < r->line_count; i++) {
        const goodput_line *l = &r->lines[i];
        fprintf(out,
                "%s{\"cause\":\"%s\",\"generation\":%lld,\"at_s\":%.3f,\"last_step\":%lld,"
                "\"restored_step\":%lld,\"lost_s\":%.3f,\"buckets\":",
                i ? "," : "", goodput__cause_name(l->cause), (long long)l->generation,
                s((double)(l->at_ms - r->start_ms)), (long long)l->last_step,
                (long long)l->restored_step, s(l->lost_ms));
        json_buckets(out, l->ms, GP_CKPT_STALL);
        fputc('}', out);
    }
    fprintf(out, "],\"disruptions_not_listed\":%zu}\n", r->lines_dropped);
    return ferror(out) ? elastic__fail(ELASTIC_EIO, "writing the goodput report failed") : 0;
}
