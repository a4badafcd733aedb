/*
 * The timeline as a hand-written SVG: a lane per node (generations as spans,
 * rendezvous gaps, restarts, ends by other nodes, fences, waiting, the job's
 * end) and a lane per worker under it (its process as a span, failures and
 * hangs as marks, checkpoints as ticks), with a time axis and a legend.
 * Every element carries a class and a <title>, so tests and people can read it.
 */
#include "elasticctl/timeline.h"

#include <stdlib.h>
#include <string.h>

#define SVG_WIDTH 1200
#define LABEL_W   240
#define RIGHT_PAD 30
#define TOP       78
#define NODE_H    26
#define WORKER_H  20
#define LEGEND_H  56

typedef struct layout {
    const timeline *t;
    double plot_w;
    int node_y[TIMELINE_MAX_NODES]; /* top of each node's lane */
    int height;
} layout;

typedef struct span_state {
    bool open, failed;
    uint64_t since;
    int64_t generation, world;
    int rank;
} span_state;

static void xml(FILE *out, const char *text)
{
    for (; *text != '\0'; text++) {
        switch (*text) {
        case '&': fputs("&amp;", out); break;
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '"': fputs("&quot;", out); break;
        case '\'': fputs("&apos;", out); break;
        default:
            if ((unsigned char)*text >= 0x20 || *text == '\t') fputc(*text, out);
        }
    }
}

static double x_of(const layout *l, uint64_t ts)
{
    uint64_t span = l->t->t1_ms - l->t->t0_ms;
    uint64_t at = ts < l->t->t0_ms ? 0 : ts - l->t->t0_ms;
    return LABEL_W + (double)at * l->plot_w / (double)span;
}

static int lane_y(const layout *l, int node, int local_rank)
{
    return local_rank < 0 ? l->node_y[node] : l->node_y[node] + NODE_H + local_rank * WORKER_H;
}

static int lane_h(int local_rank)
{
    return local_rank < 0 ? NODE_H : WORKER_H;
}

static void seconds(FILE *out, const layout *l, uint64_t ts)
{
    fprintf(out, "+%.3f s", (double)(ts - l->t->t0_ms) / 1000.0);
}

static void lanes(FILE *out, const layout *l)
{
    const timeline *t = l->t;
    for (int n = 0; n < t->node_count; n++) {
        for (int local = -1; local < t->local_count[n]; local++) {
            int y = lane_y(l, n, local), h = lane_h(local);
            fprintf(out, "<g class=\"lane %s\" data-node=\"", local < 0 ? "node" : "worker");
            xml(out, t->nodes[n]);
            fprintf(out, "\" data-local-rank=\"%d\">", local);
            fprintf(out, "<rect x=\"0\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"/>", y,
                    SVG_WIDTH, h, local < 0 ? "#e8ecf2" : (local % 2 ? "#fafafa" : "#f3f3f3"));
            fprintf(out, "<text x=\"%d\" y=\"%d\" font-size=\"%d\"%s>", local < 0 ? 8 : 24,
                    y + h - 7, local < 0 ? 13 : 11, local < 0 ? " font-weight=\"bold\"" : "");
            if (local < 0)
                xml(out, t->nodes[n]);
            else
                fprintf(out, "local rank %d", local);
            fputs("</text></g>\n", out);
        }
    }
}

static void axis(FILE *out, const layout *l)
{
    uint64_t span = l->t->t1_ms - l->t->t0_ms;
    static const uint64_t steps[] = { 1,        2,        5,       10,      20,      50,
                                      100,      200,      500,     1000,    2000,    5000,
                                      10000,    15000,    30000,   60000,   120000,  300000,
                                      600000,   900000,   1800000, 3600000, 7200000, 14400000,
                                      21600000, 43200000, 86400000 };
    uint64_t step = steps[sizeof steps / sizeof steps[0] - 1];
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        if (span / steps[i] <= 10) {
            step = steps[i];
            break;
        }
    fprintf(out,
            "<g class=\"axis\"><line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/>\n",
            LABEL_W, TOP - 12, SVG_WIDTH - RIGHT_PAD, TOP - 12);
    for (uint64_t at = 0; at <= span; at += step) {
        double x = x_of(l, l->t->t0_ms + at);
        fprintf(out,
                "<line class=\"tick-mark\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
                "stroke=\"#ccc\"/>",
                x, TOP - 16, x, l->height - LEGEND_H);
        if (step >= 60000)
            fprintf(out,
                    "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" "
                    "text-anchor=\"middle\">%llum%02llus</text>\n",
                    x, TOP - 20, (unsigned long long)(at / 60000),
                    (unsigned long long)(at / 1000 % 60));
        else
            fprintf(
                out,
                "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%g s</text>\n",
                x, TOP - 20, (double)at / 1000.0);
    }
    fputs("</g>\n", out);
}

static void span_rect(FILE *out, const layout *l, const char *cls, int node, int local,
                      uint64_t from, uint64_t to, const char *fill, const char *label,
                      const char *title)
{
    double x0 = x_of(l, from), x1 = x_of(l, to);
    if (x1 - x0 < 1) x1 = x0 + 1;
    int y = lane_y(l, node, local), h = lane_h(local);
    fprintf(out,
            "<g class=\"span %s\"><rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" "
            "fill=\"%s\" rx=\"3\"/>",
            cls, x0, y + 3, x1 - x0, h - 6, fill);
    fputs("<title>", out);
    xml(out, title);
    fputs("</title>", out);
    if (label != NULL && x1 - x0 > 7.0 * (double)strlen(label))
        fprintf(out, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" fill=\"%s\">%s</text>", x0 + 4,
                y + h - 8, strcmp(cls, "rendezvous") == 0 ? "#333" : "#fff", label);
    fputs("</g>\n", out);
}

static void close_generation(FILE *out, const layout *l, int node, span_state *g, uint64_t ts)
{
    if (!g->open) return;
    char label[64], title[160];
    snprintf(label, sizeof label, "gen %lld · world %lld", (long long)g->generation,
             (long long)g->world);
    snprintf(title, sizeof title, "generation %lld, world size %lld, %.3f s",
             (long long)g->generation, (long long)g->world, (double)(ts - g->since) / 1000.0);
    span_rect(out, l, "generation", node, -1, g->since, ts,
              g->generation % 2 ? "#4a78b5" : "#2f5d94", label, title);
    g->open = false;
}

static void close_worker(FILE *out, const layout *l, int node, int local, span_state *w,
                         uint64_t ts, bool clean)
{
    if (!w->open) return;
    char label[32], title[160];
    snprintf(label, sizeof label, "rank %d", w->rank);
    snprintf(title, sizeof title, "rank %d (generation %lld), %.3f s, %s", w->rank,
             (long long)w->generation, (double)(ts - w->since) / 1000.0,
             w->failed ? "failed"
             : clean   ? "exited 0"
                       : "stopped");
    span_rect(out, l,
              w->failed ? "worker failed"
              : clean   ? "worker ok"
                        : "worker stopped",
              node, local, w->since, ts,
              w->failed ? "#c0392b"
              : clean   ? "#3c9a5f"
                        : "#8a8f98",
              label, title);
    w->open = false;
}

/* The agent logs a worker's exit, then (when it was a failure) the failure:
 * look a few events ahead for it so the span is drawn as failed. */
static bool failure_follows(const timeline *t, size_t exited)
{
    const timeline_event *x = &t->events[exited];
    for (size_t i = exited + 1; i < t->count && i <= exited + 16; i++) {
        const timeline_event *e = &t->events[i];
        if (e->node == x->node && e->local_rank == x->local_rank && e->kind == TL_FAILURE &&
            e->generation == x->generation)
            return true;
        if (e->node == x->node && e->local_rank == x->local_rank && e->kind == TL_WORKER_STARTED)
            return false;
    }
    return false;
}

static void spans(FILE *out, const layout *l)
{
    const timeline *t = l->t;
    span_state *gens = calloc((size_t)t->node_count, sizeof *gens);
    span_state *workers = calloc((size_t)t->node_count * TIMELINE_MAX_LOCAL, sizeof *workers);
    uint64_t *gap_since = calloc((size_t)t->node_count, sizeof *gap_since);
    if (gens == NULL || workers == NULL || gap_since == NULL) goto done;
    for (size_t i = 0; i < t->count; i++) {
        const timeline_event *e = &t->events[i];
        span_state *g = &gens[e->node];
        span_state *w =
            e->local_rank >= 0 ? &workers[e->node * TIMELINE_MAX_LOCAL + e->local_rank] : NULL;
        switch (e->kind) {
        case TL_AGENT_STARTED: gap_since[e->node] = e->ts_ms; break;
        case TL_GENERATION_FORMED:
            close_generation(out, l, e->node, g, e->ts_ms);
            if (gap_since[e->node] != 0 && e->ts_ms > gap_since[e->node])
                span_rect(out, l, "rendezvous", e->node, -1, gap_since[e->node], e->ts_ms,
                          "#c9d3e0", "rdzv", "rendezvous");
            *g = (span_state){
                .open = true, .since = e->ts_ms, .generation = e->generation, .world = e->value
            };
            gap_since[e->node] = 0;
            break;
        case TL_GENERATION_STOPPED:
            close_generation(out, l, e->node, g, e->ts_ms);
            gap_since[e->node] = e->ts_ms;
            break;
        case TL_JOB_END: close_generation(out, l, e->node, g, e->ts_ms); break;
        case TL_WORKER_STARTED:
            close_worker(out, l, e->node, e->local_rank, w, e->ts_ms, false);
            *w = (span_state){
                .open = true, .since = e->ts_ms, .generation = e->generation, .rank = e->rank
            };
            break;
        case TL_WORKER_EXITED:
            if (failure_follows(t, i)) w->failed = true;
            close_worker(out, l, e->node, e->local_rank, w, e->ts_ms,
                         e->value == 0 && e->value2 == 0);
            break;
        case TL_FAILURE:
        case TL_HANG:
            if (w != NULL) w->failed = true;
            break;
        default: break;
        }
    }
    for (int n = 0; n < t->node_count; n++) {
        close_generation(out, l, n, &gens[n], t->t1_ms);
        for (int local = 0; local < t->local_count[n]; local++)
            close_worker(out, l, n, local, &workers[n * TIMELINE_MAX_LOCAL + local], t->t1_ms,
                         false);
    }
done:
    free(gens);
    free(workers);
    free(gap_since);
}

/* A mark's shape centred on (x, cy) with half-size r. */
static void shape(FILE *out, const char *kind, double x, double cy, double r)
{
    if (strcmp(kind, "failure") == 0)
        fprintf(out,
                "<path d=\"M%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f %.1f\" stroke=\"#8e0000\" "
                "stroke-width=\"3\"/>",
                x - r, cy - r, x + r, cy + r, x - r, cy + r, x + r, cy - r);
    else if (strcmp(kind, "hang") == 0 || strcmp(kind, "probe") == 0)
        fprintf(
            out,
            "<path d=\"M%.1f %.1fL%.1f %.1fL%.1f %.1fL%.1f %.1fZ\" fill=\"%s\" stroke=\"#333\"/>",
            x, cy - r, x + r, cy, x, cy + r, x - r, cy,
            strcmp(kind, "hang") == 0 ? "#f39c12" : "#f4d03f");
    else if (strcmp(kind, "ended") == 0)
        fprintf(out,
                "<path d=\"M%.1f %.1fL%.1f %.1fL%.1f %.1fZ\" fill=\"#e67e22\" stroke=\"#333\"/>",
                x - r, cy - r, x + r, cy - r, x, cy + r);
    else if (strcmp(kind, "restart") == 0)
        fprintf(out,
                "<path d=\"M%.1f %.1fL%.1f %.1fL%.1f %.1fZ\" fill=\"#27ae60\" stroke=\"#333\"/>",
                x - r, cy + r, x + r, cy + r, x, cy - r);
    else if (strcmp(kind, "fence") == 0)
        fprintf(out,
                "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#8e44ad\" "
                "stroke=\"#333\"/>",
                x - r, cy - r, 2 * r, 2 * r);
    else if (strcmp(kind, "waiting") == 0)
        fprintf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"#bbb\" stroke=\"#555\"/>",
                x, cy, r * 0.7);
    else if (strcmp(kind, "end") == 0)
        fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"3\" height=\"%.1f\" fill=\"#111\"/>",
                x - 1.5, cy - r - 2, 2 * r + 4);
    else /* checkpoint */
        fprintf(out,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#1f6fd1\" "
                "stroke-width=\"2\"/>",
                x, cy - r - 1, x, cy + r + 1);
}

static void mark(FILE *out, const layout *l, const char *cls, const timeline_event *e, int local,
                 const char *title)
{
    double x = x_of(l, e->ts_ms);
    int y = lane_y(l, e->node, local), h = lane_h(local);
    fprintf(out, "<g class=\"%s %s\">", strcmp(cls, "checkpoint") == 0 ? "tick" : "mark", cls);
    shape(out, cls, x, y + h / 2.0, (h - 8) / 2.0);
    fputs("<title>", out);
    seconds(out, l, e->ts_ms);
    fputs(": ", out);
    xml(out, title);
    fputs("</title></g>\n", out);
}

static void marks(FILE *out, const layout *l)
{
    const timeline *t = l->t;
    for (size_t i = 0; i < t->count; i++) {
        const timeline_event *e = &t->events[i];
        char title[400];
        int local = e->local_rank < t->local_count[e->node] ? e->local_rank : -1;
        switch (e->kind) {
        case TL_FAILURE:
            snprintf(title, sizeof title, "rank %d failed: %s", e->rank, e->text);
            mark(out, l, "failure", e, local, title);
            break;
        case TL_HANG:
            snprintf(title, sizeof title, "%s", e->text);
            mark(out, l, "hang", e, local, title);
            break;
        case TL_PROBE:
            snprintf(title, sizeof title, "%s", e->text);
            mark(out, l, "probe", e, local, title);
            break;
        case TL_DIVERGENCE: /* a probe's mark: a verdict on a node, here its replica's bytes */
            snprintf(title, sizeof title, "silent data corruption%s: %s",
                     e->value == 1 ? " (warned, committed)" : "", e->text);
            mark(out, l, "probe", e, -1, title);
            break;
        case TL_GENERATION_ENDED:
            snprintf(title, sizeof title, "generation %lld ended by another node: %s",
                     (long long)e->generation, e->text);
            mark(out, l, "ended", e, -1, title);
            break;
        case TL_RESTARTED:
            snprintf(title, sizeof title,
                     "generation %lld running again, %lld ms after the failure",
                     (long long)e->generation, (long long)e->value);
            mark(out, l, "restart", e, -1, title);
            break;
        case TL_FENCED:
            snprintf(title, sizeof title, "fenced: %s", e->text);
            mark(out, l, "fence", e, -1, title);
            break;
        case TL_WAITING:
            snprintf(title, sizeof title, "waiting for nodes: %lld joined%s%s", (long long)e->value,
                     e->text[0] ? "; missing: " : "", e->text);
            mark(out, l, "waiting", e, -1, title);
            break;
        case TL_CHECKPOINT:
            snprintf(title, sizeof title, "rank %d saved checkpoint step %lld", e->rank,
                     (long long)e->value);
            mark(out, l, "checkpoint", e, local, title);
            break;
        case TL_JOB_END:
            snprintf(title, sizeof title, "job %s (exit code %lld)", e->text, (long long)e->value);
            mark(out, l, "end", e, -1, title);
            break;
        case TL_RECOVERY_PHASES:
            snprintf(title, sizeof title, "recovery phases (ms): %s; total %lld", e->text,
                     (long long)e->value);
            mark(out, l, "restart", e, -1, title);
            break;
        default: break;
        }
    }
}

static void legend(FILE *out, const layout *l)
{
    static const char *const kinds[][2] = { { "failure", "failure" },
                                            { "hang", "hang" },
                                            { "probe", "other probe" },
                                            { "ended", "ended elsewhere" },
                                            { "restart", "running again" },
                                            { "fence", "fenced" },
                                            { "waiting", "waiting" },
                                            { "checkpoint", "checkpoint" },
                                            { "end", "job end" } };
    int y = l->height - LEGEND_H + 22;
    fputs("<g class=\"legend\">", out);
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        double x = 30.0 + 125.0 * (double)i;
        shape(out, kinds[i][0], x, y, 6);
        fprintf(out, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\">%s</text>", x + 10, y + 4,
                kinds[i][1]);
    }
    fprintf(out,
            "<text x=\"8\" y=\"%d\" font-size=\"11\" fill=\"#555\">spans: generation (node lane), "
            "worker process "
            "(green exited 0, red failed, grey stopped), rendezvous (light)</text>",
            y + 24);
    fputs("</g>\n", out);
}

int timeline__write_svg(const timeline *t, FILE *out)
{
    layout *l = calloc(1, sizeof *l);
    if (l == NULL) return elastic__fail(ELASTIC_ENOMEM, "out of memory");
    l->t = t;
    l->plot_w = SVG_WIDTH - LABEL_W - RIGHT_PAD;
    int y = TOP;
    for (int n = 0; n < t->node_count; n++) {
        l->node_y[n] = y;
        y += NODE_H + t->local_count[n] * WORKER_H + 6;
    }
    l->height = y + LEGEND_H;
    fprintf(out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d "
            "%d\" "
            "font-family=\"sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n",
            SVG_WIDTH, l->height, SVG_WIDTH, l->height);
    fputs("<text class=\"title\" x=\"8\" y=\"22\" font-size=\"16\" font-weight=\"bold\">job ", out);
    xml(out, t->run_id);
    fprintf(out,
            "</text>\n<text x=\"8\" y=\"40\" font-size=\"12\" fill=\"#555\">%d node%s, %.3f s of "
            "events</text>\n",
            t->node_count, t->node_count == 1 ? "" : "s", (double)(t->t1_ms - t->t0_ms) / 1000.0);
    lanes(out, l);
    axis(out, l);
    spans(out, l);
    marks(out, l);
    legend(out, l);
    fputs("</svg>\n", out);
    free(l);
    return ferror(out) ? elastic__fail(ELASTIC_EIO, "writing the SVG failed") : 0;
}
