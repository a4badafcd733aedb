/*
 * A growing text buffer with a hard ceiling (text.c): the metrics page,
 * captured debugger output, the worker environment, HTTP answers. Writes past
 * the ceiling are cut and flagged, so a caller checks once at the end.
 */
#ifndef ELASTIC_COMMON_TEXT_H
#define ELASTIC_COMMON_TEXT_H

#include "common/common.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct elastic__text {
    char *data; /* NUL-terminated once anything was written; NULL before */
    size_t len, cap, max;
    bool overflow; /* a write was cut at max (or memory ran out) */
} elastic__text;

void elastic__text_init(elastic__text *t, size_t max);
void elastic__text_printf(elastic__text *t, const char *fmt, ...) ELASTIC__PRINTF(2, 3);
/* Appends len raw bytes (NULs included; data stays NUL-terminated after them). */
void elastic__text_append(elastic__text *t, const void *bytes, size_t len);
void elastic__text_free(elastic__text *t);

#endif /* ELASTIC_COMMON_TEXT_H */
