/*
 * The goodput accounting on a Prometheus page (/metrics): the ratio as a
 * gauge, wall, productive and lost seconds per bucket and per cause as
 * counters. An accounting redone later can move time between productive and
 * redone (redone work is known once the next generation says where it
 * resumed): the caller's `floor` keeps every counter from going back.
 */
#include "common/goodput.h"
#include "common/text.h"

#include <string.h>

static double at_least(double value, double *floor)
{
    if (floor == NULL) return value;
    if (value < *floor) return *floor;
    *floor = value;
    return value;
}

void goodput__render_metrics(const goodput_report *r, goodput_floor *floor, elastic__text *out)
{
    elastic__text_printf(out,
                         "# HELP elastic_goodput_ratio effective training time ratio so far: "
                         "productive / wall (docs/OPERATIONS.md, goodput)\n"
                         "# TYPE elastic_goodput_ratio gauge\nelastic_goodput_ratio %.6f\n",
                         r->ettr);
    elastic__text_printf(out,
                         "# HELP elastic_goodput_wall_seconds_total the job's wall time so far\n"
                         "# TYPE elastic_goodput_wall_seconds_total counter\n"
                         "elastic_goodput_wall_seconds_total %.3f\n",
                         at_least(r->wall_ms / 1000.0, floor ? &floor->wall_s : NULL));
    elastic__text_printf(out,
                         "# HELP elastic_goodput_productive_seconds_total training not redone\n"
                         "# TYPE elastic_goodput_productive_seconds_total counter\n"
                         "elastic_goodput_productive_seconds_total %.3f\n",
                         at_least(r->productive_ms / 1000.0, floor ? &floor->productive_s : NULL));
    elastic__text_printf(out, "# HELP elastic_goodput_lost_seconds_total time lost, by bucket\n"
                              "# TYPE elastic_goodput_lost_seconds_total counter\n");
    for (int b = 0; b < GP_BUCKETS; b++)
        elastic__text_printf(out, "elastic_goodput_lost_seconds_total{bucket=\"%s\"} %.3f\n",
                             goodput__bucket_name(b),
                             at_least(r->lost_ms[b] / 1000.0, floor ? &floor->lost_s[b] : NULL));
    elastic__text_printf(out,
                         "# HELP elastic_goodput_cause_lost_seconds_total time lost, by cause\n"
                         "# TYPE elastic_goodput_cause_lost_seconds_total counter\n");
    for (int c = 0; c < GP_CAUSES; c++)
        elastic__text_printf(out, "elastic_goodput_cause_lost_seconds_total{cause=\"%s\"} %.3f\n",
                             goodput__cause_name(c),
                             at_least(r->cause_ms[c] / 1000.0, floor ? &floor->cause_s[c] : NULL));
}
