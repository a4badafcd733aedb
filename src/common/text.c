/*
 * A growing text buffer with a hard ceiling (common/text.h), for the metrics
 * page, captured debugger output, HTTP and etcd answers: writes past the
 * ceiling are cut and flagged.
 */
#include "common/text.h"

#include <stdio.h>
#include <stdlib.h>

void elastic__text_init(elastic__text *t, size_t max)
{
    memset(t, 0, sizeof *t);
    t->max = max;
}

static bool reserve(elastic__text *t, size_t need)
{
    if (need <= t->cap) return true;
    size_t cap = t->cap ? t->cap : 4096;
    while (cap < need) cap *= 2;
    if (cap > t->max + 1) cap = t->max + 1;
    if (cap < need) return false;
    char *data = realloc(t->data, cap);
    if (data == NULL) return false;
    t->data = data;
    t->cap = cap;
    return true;
}

/* Room for `want` more bytes and the NUL, cut at the ceiling (overflow
 * marked); false when even that cannot be allocated. */
static bool make_room(elastic__text *t, size_t *want)
{
    if (t->len + *want > t->max) {
        t->overflow = true;
        *want = t->max - t->len;
    }
    if (!reserve(t, t->len + *want + 1)) {
        t->overflow = true;
        return false;
    }
    return true;
}

void elastic__text_printf(elastic__text *t, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(NULL, 0, fmt, args);
    va_end(args);
    if (n < 0) return;
    size_t want = (size_t)n;
    if (!make_room(t, &want)) return;
    char *scratch = t->data + t->len;
    va_start(args, fmt);
    vsnprintf(scratch, want + 1, fmt, args);
    va_end(args);
    t->len += want;
}

void elastic__text_append(elastic__text *t, const void *bytes, size_t len)
{
    size_t want = len;
    if (!make_room(t, &want)) return;
    if (want > 0) memcpy(t->data + t->len, bytes, want);
    t->len += want;
    t->data[t->len] = '\0';
}

void elastic__text_free(elastic__text *t)
{
    free(t->data);
    memset(t, 0, sizeof *t);
}
