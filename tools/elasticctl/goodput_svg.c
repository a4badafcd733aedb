/*
 * The accounting as an SVG in the timeline's style (timeline_svg.c): a first
 * bar for the whole job (productive time and every bucket, to scale of the
 * wall), then one bar per disruption with its lost time stacked by bucket (to
 * scale of the costliest one), a legend. Every piece has a class and a
 * <title>, so tests and people can read it.
 */
#include "elasticctl/goodput.h"

#include <string.h>

#define SVG_WIDTH 1200
#define LABEL_W   240
#define RIGHT_PAD 110
#define TOP       70
#define BAR_H     22
#define ROW_H     28
#define LEGEND_H  50
#define MAX_ROWS  200 /* more disruptions are summed in the first bar, not drawn one by one */

static const char *const bucket_fill[GP_BUCKETS] = { "#f39c12", "#8a8f98", "#a9c6e8", "#8e44ad",
                                                     "#16a085", "#c0392b", "#f4d03f", "#d5d8dc" };

static void xml(FILE *out, const char *text)
{
    for (; *text != '\0'; text++) {
        switch (*text) {
        case '&': fputs("&amp;", out); break;
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '"': fputs("&quot;", out); break;
        default:
            if ((unsigned char)*text >= 0x20) fputc(*text, out);
        }
    }
}

static void piece(FILE *out, const char *cls, double x, int y, double w, const char *fill,
                  const char *title)
{
    fprintf(out,
            "<g class=\"piece %s\"><rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" "
            "fill=\"%s\"/><title>",
            cls, x, y, w, BAR_H, fill);
    xml(out, title);
    fputs("</title></g>\n", out);
}

static void label(FILE *out, int y, const char *text, bool bold)
{
    fprintf(out, "<text x=\"8\" y=\"%d\" font-size=\"12\"%s>", y + BAR_H - 7,
            bold ? " font-weight=\"bold\"" : "");
    xml(out, text);
    fputs("</text>\n", out);
}

/* The whole job: productive first, then each bucket, to scale of the wall. */
static void job_bar(FILE *out, const goodput_report *r, double plot_w)
{
    int y = TOP;
    char title[160];
    snprintf(title, sizeof title, "whole job: ETTR %.1f%%", 100.0 * r->ettr);
    label(out, y, title, true);
    double x = LABEL_W, scale = r->wall_ms > 0 ? plot_w / r->wall_ms : 0;
    snprintf(title, sizeof title, "productive %.3f s of %.3f s", r->productive_ms / 1000.0,
             r->wall_ms / 1000.0);
    piece(out, "productive", x, y, r->productive_ms * scale, "#3c9a5f", title);
    x += r->productive_ms * scale;
    for (int b = 0; b < GP_BUCKETS; b++) {
        if (r->lost_ms[b] <= 0) continue;
        snprintf(title, sizeof title, "%s %.3f s", goodput__bucket_name(b), r->lost_ms[b] / 1000.0);
        piece(out, goodput__bucket_name(b), x, y, r->lost_ms[b] * scale, bucket_fill[b], title);
        x += r->lost_ms[b] * scale;
    }
}

static void line_bars(FILE *out, const goodput_report *r, size_t rows, double plot_w)
{
    double widest = 0;
    for (size_t i = 0; i < rows; i++)
        if (r->lines[i].lost_ms > widest) widest = r->lines[i].lost_ms;
    double scale = widest > 0 ? plot_w / widest : 0;
    for (size_t i = 0; i < rows; i++) {
        const goodput_line *l = &r->lines[i];
        int y = TOP + ROW_H * (int)(i + 1) + 10;
        char text[200];
        snprintf(text, sizeof text, "+%.3f s %s (gen %lld)",
                 (double)(l->at_ms - r->start_ms) / 1000.0, goodput__cause_name(l->cause),
                 (long long)l->generation);
        fprintf(out, "<g class=\"disruption\" data-cause=\"%s\">", goodput__cause_name(l->cause));
        label(out, y, text, false);
        double x = LABEL_W;
        for (int b = 0; b < GP_BUCKETS; b++) {
            if (l->ms[b] <= 0) continue;
            snprintf(text, sizeof text, "%s: %s %.3f s", goodput__cause_name(l->cause),
                     goodput__bucket_name(b), l->ms[b] / 1000.0);
            piece(out, goodput__bucket_name(b), x, y, l->ms[b] * scale, bucket_fill[b], text);
            x += l->ms[b] * scale;
        }
        fprintf(out, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\">%.3f s</text></g>\n", x + 6,
                y + BAR_H - 7, l->lost_ms / 1000.0);
    }
}

static void legend(FILE *out, int y)
{
    fputs("<g class=\"legend\">", out);
    for (int b = -1; b < GP_BUCKETS; b++) {
        double x = 30.0 + 125.0 * (double)(b + 1);
        fprintf(out,
                "<rect x=\"%.1f\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                "<text x=\"%.1f\" y=\"%d\" font-size=\"11\">%s</text>",
                x, y, b < 0 ? "#3c9a5f" : bucket_fill[b], x + 16, y + 10,
                b < 0 ? "productive" : goodput__bucket_name(b));
    }
    fputs("</g>\n", out);
}

int goodput__write_svg(const goodput_report *r, const char *run_id, FILE *out)
{
    size_t rows = r->line_count < MAX_ROWS ? r->line_count : MAX_ROWS;
    int height = TOP + ROW_H * (int)(rows + 1) + 10 + LEGEND_H;
    double plot_w = SVG_WIDTH - LABEL_W - RIGHT_PAD;
    fprintf(out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n",
            SVG_WIDTH, height, SVG_WIDTH, height);
    fputs("<text class=\"title\" x=\"8\" y=\"22\" font-size=\"16\" font-weight=\"bold\">goodput of "
          "job ",
          out);
    xml(out, run_id);
    fprintf(out,
            "</text>\n<text x=\"8\" y=\"40\" font-size=\"12\" fill=\"#555\">ETTR %.1f%%: %.3f s "
            "productive of %.3f s; %.3f s lost to failures; each bar below: one disruption's lost "
            "time by bucket (to scale of the costliest)%s</text>\n",
            100.0 * r->ettr, r->productive_ms / 1000.0, r->wall_ms / 1000.0,
            r->failures_ms / 1000.0, rows < r->line_count ? " (first 200 shown)" : "");
    job_bar(out, r, plot_w);
    line_bars(out, r, rows, plot_w);
    legend(out, height - LEGEND_H + 18);
    fputs("</svg>\n", out);
    return ferror(out) ? elastic__fail(ELASTIC_EIO, "writing the SVG failed") : 0;
}
