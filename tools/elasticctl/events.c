/*
 * `elasticctl timeline`, `summary` and `goodput`: load a job's event logs
 * (timeline_load.c) and draw them as SVG (timeline_svg.c) or text
 * (timeline_text.c), or account their time (goodput*.c).
 */
#include "elasticctl/ctl.h"
#include "elasticctl/explain.h"
#include "elasticctl/goodput.h"
#include "elasticctl/goodput_classes.h"
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
    goodput_report *goodput = NULL;
    rc = goodput__of_timeline(t, &goodput);
    if (rc == 0) rc = timeline__write_text(t, goodput, out);
    free(goodput);
    unload(t);
    return rc;
}

static int write_to(const char *path, const goodput_report *r, const timeline *t,
                    int (*writer)(const goodput_report *, const timeline *, FILE *))
{
    FILE *f = fopen(path, "w");
    if (f == NULL) return elastic__fail(ELASTIC_EIO, "%s: %s", path, strerror(errno));
    int written = writer(r, t, f);
    if (fclose(f) != 0 || written != 0)
        return elastic__fail(ELASTIC_EIO, "writing %s failed", path);
    return 0;
}

static int svg_writer(const goodput_report *r, const timeline *t, FILE *out)
{
    return goodput__write_svg(r, t->run_id, out);
}

/* `elasticctl goodput`: text on out, or JSON; the picture, profile and trace
 * where asked for. */
int ctl_goodput(const char *const *paths, int count, const char *run_id, const ctl_goodput_opts *o,
                FILE *out)
{
    timeline *t = calloc(1, sizeof *t);
    if (t == NULL) return elastic__fail(ELASTIC_ENOMEM, "out of memory");
    goodput_report *report = NULL;
    int rc = timeline__load(paths, count, run_id, t);
    if (rc == 0) rc = goodput__of_timeline(t, &report);
    if (rc == 0 && o->svg_path != NULL) rc = write_to(o->svg_path, report, t, svg_writer);
    if (rc == 0 && o->profile_path != NULL)
        rc = write_to(o->profile_path, report, t, goodput__write_profile);
    if (rc == 0 && o->trace_path != NULL)
        rc = write_to(o->trace_path, report, t, goodput__write_trace);
    /* The same logs' failures by class (explain's reading) for the class table. */
    explain_report *classified = rc == 0 ? calloc(1, sizeof *classified) : NULL;
    goodput_classes classes = { .any = false };
    if (classified != NULL && explain__load(paths, count, run_id, classified) == 0)
        goodput__classes_of(report, classified, &classes);
    free(classified);
    if (rc == 0 && o->json) rc = goodput__write_json_classes(report, t->run_id, &classes, out);
    if (rc == 0 && !o->json) {
        rc = goodput__write_text(report, t->run_id, out);
        goodput__write_classes_text(&classes, out);
    }
    free(report);
    if (rc == 0 || t->events != NULL) timeline__free(t);
    free(t);
    return rc;
}
