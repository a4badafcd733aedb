/*
 * `elasticctl timeline` and `elasticctl summary`: load a job's event logs
 * (timeline_load.c) and draw them as SVG (timeline_svg.c) or text
 * (timeline_text.c).
 */
#include "elasticctl/ctl.h"
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
