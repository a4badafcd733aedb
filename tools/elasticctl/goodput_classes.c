/*
 * `elasticctl goodput`'s time lost per failure class: each disruption's lost
 * time (the accounting's line, by the generation it ended) charged to the
 * class of that generation's causing failure, as `elasticctl explain` reads
 * it from the same logs, so both commands use one set of classes.
 */
#include "elasticctl/goodput_classes.h"

#include <string.h>

void goodput__classes_of(const goodput_report *r, const explain_report *e, goodput_classes *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < r->line_count; i++) {
        const goodput_line *l = &r->lines[i];
        if (l->cause == GP_CAUSE_START || l->cause == GP_CAUSE_MEMBERSHIP)
            continue; /* no failure */
        int cls =
            l->generation >= 0 ? explain__class_of_generation(e, (uint64_t)l->generation) : -1;
        if (cls < 0) /* nothing classified for it: what the accounting's cause alone says */
            cls = l->cause == GP_CAUSE_HANG                                       ? FC_HANG
                  : l->cause == GP_CAUSE_NODE_LOST || l->cause == GP_CAUSE_FENCED ? FC_NODE_LOST
                                                                                  : FC_UNKNOWN;
        out->ms[cls] += l->lost_ms;
        out->count[cls]++;
        out->any = true;
    }
}

void goodput__write_classes_text(const goodput_classes *c, FILE *out)
{
    if (!c->any) return;
    fputs("lost per failure class:", out);
    bool first = true;
    for (int k = 0; k < FC_CLASSES; k++) {
        if (c->count[k] == 0) continue;
        fprintf(out, "%s %s %.3f s (%d)", first ? "" : ",", failure__class_label(k),
                c->ms[k] / 1000.0, c->count[k]);
        first = false;
    }
    fputc('\n', out);
}

void goodput__write_classes_json(const goodput_classes *c, elastic__jw *w)
{
    elastic__jw_key(w, "classes");
    elastic__jw_object_begin(w);
    for (int k = 0; k < FC_CLASSES; k++) {
        elastic__jw_key(w, failure__class_name(k));
        elastic__jw_object_begin(w);
        elastic__jw_key(w, "count");
        elastic__jw_int(w, c->count[k]);
        elastic__jw_key(w, "lost_s");
        elastic__jw_double(w, c->ms[k] / 1000.0, 3);
        elastic__jw_object_end(w);
    }
    elastic__jw_object_end(w);
}
