/*
 * `elasticctl timeline`, `summary` and `goodput`: load a job's event logs
 * (timeline_load.c) and draw them as SVG (timeline_svg.c) or text
 * (timeline_text.c), or account their time (goodput*.c).
 */
#include "elasticctl/ctl.h"
#include "elasticctl/goodput.h"
#include "elasticctl/timeline.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int load(const char *const *paths, int count, const char *run_id, timeline **out)
{
    timeline *t = calloc(1, sizeof *t);
    if (t == NULL) return elastic__fail(ELASTIC_ENOMEM, "out of memory");
    int rc = timeline__load(paths, count, run_id, t);
    if (rc != 0) {
        free(t);
        return rc;
    }
    *out = t;
    return 0;
}

static void unload(timeline *t)
{
    timeline__free(t);
    free(t);
}

int ctl_timeline(const char *const *paths, int count, const char *run_id, const char *svg_path)
{
    timeline *t = NULL;
    int rc = load(paths, count, run_id, &t);
    if (rc != 0) return rc;
    FILE *out = fopen(svg_path, "w");
    if (out == NULL) {
        rc = elastic__fail(ELASTIC_EIO, "%s: %s", svg_path, strerror(errno));
    } else {
        int written = timeline__write_svg(t, out);
        if (fclose(out) != 0 || written != 0)
            rc = elastic__fail(ELASTIC_EIO, "writing %s failed", svg_path);
    }
    unload(t);
    return rc;
}

int ctl_summary(const char *const *paths, int count, const char *run_id, FILE *out)
{
    timeline *t = NULL;
    int rc = load(paths, count, run_id, &t);
    if (rc != 0) return rc;
    rc = timeline__write_text(t, out);
    unload(t);
    return rc;
}

/* `elasticctl goodput`: text on out, or JSON, or (svg_path) the picture. */
int ctl_goodput(const char *const *paths, int count, const char *run_id, bool json,
                const char *svg_path, FILE *out)
{
    timeline *t = calloc(1, sizeof *t);
    if (t == NULL) return elastic__fail(ELASTIC_ENOMEM, "out of memory");
    goodput_report *report = NULL;
    int rc = timeline__load(paths, count, run_id, t);
    if (rc == 0) rc = goodput__of_timeline(t, &report);
    if (rc == 0 && svg_path != NULL) {
        FILE *svg = fopen(svg_path, "w");
        if (svg == NULL) {
            rc = elastic__fail(ELASTIC_EIO, "%s: %s", svg_path, strerror(errno));
        } else {
            int written = goodput__write_svg(report, t->run_id, svg);
            if (fclose(svg) != 0 || written != 0)
                rc = elastic__fail(ELASTIC_EIO, "writing %s failed", svg_path);
        }
    }
    if (rc == 0)
        rc = json ? goodput__write_json(report, t->run_id, out)
                  : goodput__write_text(report, t->run_id, out);
    free(report);
    timeline__free(t);
    free(t);
    return rc;
}
