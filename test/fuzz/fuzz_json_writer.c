/* libFuzzer target for src/common/json_writer.c: the input drives a
 * well-formed sequence of calls (keys before an object's values, every
 * container closed) under a bound from the first byte. Whatever fits, the
 * text stays within the bound, and unless the top value itself was left out
 * it is one valid JSON value a strict reader (json-c) takes back; a clean
 * finish means nothing was left out. */
#include "common/common.h"
#include "common/json.h"
#include "common/json_writer.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One value at the current place: a container (closed later) or a scalar. */
static void value(elastic__jw *w, const uint8_t **p, const uint8_t *end, bool *stack, int *depth)
{
    uint8_t op = *(*p)++;
    size_t n = *p < end ? (size_t)(**p % 24) : 0;
    if (n > (size_t)(end - *p)) n = (size_t)(end - *p);
    switch (op % 6) {
    case 0:
    case 1:
        if (*depth >= 20) break; /* deeper than the writer allows: it must refuse cleanly */
        stack[(*depth)++] = op % 2 == 0;
        if (op % 2 == 0)
            elastic__jw_object_begin(w);
        else
            elastic__jw_array_begin(w);
        return;
    case 2: elastic__jw_string_n(w, (const char *)*p, n), *p += n; return;
    case 3: elastic__jw_int(w, (int64_t)op * -7919); return;
    case 4: elastic__jw_double(w, (double)op / 7.0, op % 9); return;
    default: break;
    }
    elastic__jw_bool(w, op & 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    size_t cap = (size_t)data[0] * 4 + 1;
    char *buf = malloc(cap);
    elastic__jw w;
    elastic__jw_init(&w, buf, cap);
    bool stack[32]; /* true: object */
    int depth = 0;
    const uint8_t *p = data + 1, *end = data + size;
    elastic__jw_array_begin(&w);
    stack[depth++] = false;
    while (p < end) {
        if (*p == 0xff && depth > 1) { /* close the innermost */
            p++;
            if (stack[--depth])
                elastic__jw_object_end(&w);
            else
                elastic__jw_array_end(&w);
            continue;
        }
        if (stack[depth - 1]) elastic__jw_key(&w, depth % 2 ? "k\"\n" : "key");
        value(&w, &p, end, stack, &depth);
    }
    while (depth > 0) {
        if (stack[--depth])
            elastic__jw_object_end(&w);
        else
            elastic__jw_array_end(&w);
    }
    size_t len = 0;
    int rc = elastic__jw_finish(&w, &len);
    if (len >= cap || strlen(buf) != len) abort();
    if (rc != 0 && rc != ELASTIC_ELIMIT) abort();
    if (len > 0) {
        json_object *parsed = NULL;
        if (json__parse(buf, len, &parsed) != 0) abort();
        json_object_put(parsed);
    }
    free(buf);
    return 0;
}
