/*
 * Time lost per failure class (goodput_classes.c), for `elasticctl goodput`:
 * the classes of src/common/failure_class.h, as `elasticctl explain` says them.
 */
#ifndef ELASTICCTL_GOODPUT_CLASSES_H
#define ELASTICCTL_GOODPUT_CLASSES_H

#include "common/goodput.h"
#include "common/json_writer.h"
#include "elasticctl/explain.h"

#include <stdio.h>

typedef struct goodput_classes {
    double ms[FC_CLASSES];
    int count[FC_CLASSES];
    bool any;
} goodput_classes;

void goodput__classes_of(const goodput_report *r, const explain_report *e, goodput_classes *out);
/* "lost per failure class: user code 12.000 s (2), ..." (nothing without failures). */
void goodput__write_classes_text(const goodput_classes *c, FILE *out);
/* The member "classes":{"user_code":{"count":2,"lost_s":12.000},...} */
void goodput__write_classes_json(const goodput_classes *c, elastic__jw *w);

#endif /* ELASTICCTL_GOODPUT_CLASSES_H */
