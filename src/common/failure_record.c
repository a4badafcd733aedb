/*
 * The failure record's text form (failure_record.h): tab-separated fields,
 * the signature last (it may hold anything but a newline).
 */
#include "common/failure_record.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t failure_record__encode(const failure_policy_entry *e, char *out, size_t size)
{
    if (strpbrk(e->node, "\t\n") != NULL || strchr(e->signature, '\n') != NULL) return 0;
    int n = snprintf(out, size,
                     "F1\t%" PRIu64 "\t%" PRId64 "\t%d\t%d\t%d\t%d\t%" PRIu64 "\t%016" PRIx64
                     "\t%s\t%s",
                     e->generation, e->step, e->rank, e->cls, e->consequence ? 1 : 0,
                     e->replaced ? 1 : 0, e->time_ms, e->signature_hash, e->node, e->signature);
    return n > 0 && (size_t)n < size ? (size_t)n : 0;
}

/* The next tab-terminated field as a bounded integer. */
static bool next_int(const char **p, const char *end, int64_t min, int64_t max, int base,
                     int64_t *out)
{
    const char *tab = memchr(*p, '\t', (size_t)(end - *p));
    if (tab == NULL || tab == *p || tab - *p > 24) return false;
    char field[32];
    memcpy(field, *p, (size_t)(tab - *p));
    field[tab - *p] = '\0';
    char *stop = NULL;
    errno = 0;
    int64_t v;
    if (base == 16) {
        uint64_t u = strtoull(field, &stop, 16);
        v = (int64_t)u; /* the hash: all 64 bits */
        if (field[0] == '-' || field[0] == '+') return false;
    } else {
        v = strtoll(field, &stop, 10);
        if (v < min || v > max) return false;
    }
    if (errno != 0 || *stop != '\0') return false;
    *out = v;
    *p = tab + 1;
    return true;
}

int failure_record__decode(const char *text, size_t len, failure_policy_entry *out)
{
    memset(out, 0, sizeof *out);
    if (len < 3 || len >= FAILURE_RECORD_MAX || memcmp(text, "F1\t", 3) != 0 ||
        memchr(text, '\n', len) != NULL || memchr(text, '\0', len) != NULL)
        return -1;
    const char *p = text + 3, *end = text + len;
    int64_t gen, step, rank, cls, consequence, replaced, time_ms, hash;
    if (!next_int(&p, end, 0, INT64_MAX / 2, 10, &gen) ||
        !next_int(&p, end, -1, INT64_MAX / 2, 10, &step) ||
        !next_int(&p, end, -1, 1 << 24, 10, &rank) ||
        !next_int(&p, end, 0, FC_CLASSES - 1, 10, &cls) ||
        !next_int(&p, end, 0, 1, 10, &consequence) || !next_int(&p, end, 0, 1, 10, &replaced) ||
        !next_int(&p, end, 0, INT64_C(1) << 52, 10, &time_ms) ||
        !next_int(&p, end, 0, 0, 16, &hash))
        return -1;
    const char *tab = memchr(p, '\t', (size_t)(end - p));
    if (tab == NULL || tab == p || (size_t)(tab - p) >= sizeof out->node) return -1;
    memcpy(out->node, p, (size_t)(tab - p));
    out->node[tab - p] = '\0';
    size_t sig_len = (size_t)(end - tab - 1);
    if (sig_len >= sizeof out->signature) return -1;
    memcpy(out->signature, tab + 1, sig_len);
    out->signature[sig_len] = '\0';
    out->generation = (uint64_t)gen;
    out->step = step;
    out->rank = (int)rank;
    out->cls = (int)cls;
    out->consequence = consequence != 0;
    out->replaced = replaced != 0;
    out->time_ms = (uint64_t)time_ms;
    out->signature_hash = (uint64_t)hash;
    return 0;
}
