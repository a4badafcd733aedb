/*
 * `elasticctl goodput`: a job's event logs (timeline_load.c) turned into the
 * records of the shared accounting (src/common/goodput.c), then printed as
 * text, JSON or an SVG of stacked bars. Part of elasticctl only.
 */
#ifndef ELASTICCTL_GOODPUT_H
#define ELASTICCTL_GOODPUT_H

#include "common/goodput.h"
#include "elasticctl/timeline.h"

#include <stdio.h>

/* The accounting records of a loaded timeline (malloc'd, *out freed by the caller). */
int goodput__records_of(const timeline *t, goodput_record **out, size_t *count);

/* Accounts a loaded timeline into *out (malloc'd; free() it). */
int goodput__of_timeline(const timeline *t, goodput_report **out);

int goodput__write_text(const goodput_report *r, const char *run_id, FILE *out);
int goodput__write_json(const goodput_report *r, const char *run_id, FILE *out);
/* The JSON with "classes" (the time lost per failure class) when classes is not NULL. */
struct goodput_classes;
int goodput__write_json_classes(const goodput_report *r, const char *run_id,
                                const struct goodput_classes *classes, FILE *out);
int goodput__write_svg(const goodput_report *r, const char *run_id, FILE *out);

/* The run as `elasticctl simulate` input: its measured recovery profile
 * (profile "measured": each bucket's mean over the run's disruptions) and its
 * failures (when each happened, of which class). */
int goodput__write_profile(const goodput_report *r, const timeline *t, FILE *out);
int goodput__write_trace(const goodput_report *r, const timeline *t, FILE *out);

/* One line, the accounting's verdict, for `elasticctl summary`: "goodput: ETTR 97.3% ...". */
void goodput__write_verdict(const goodput_report *r, FILE *out);

#endif /* ELASTICCTL_GOODPUT_H */
