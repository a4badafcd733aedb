/*
 * The one decimal integer grammar for text from flags, the environment, file
 * names and the store: digits only (a leading '-' for the signed variants),
 * the whole text consumed, no '+', no spaces, overflow detected, [min, max]
 * enforced. The same rules everywhere, so "1 " or "0x10" means the same
 * thing (nothing) on every path.
 */
#ifndef ELASTIC_COMMON_PARSE_INT_H
#define ELASTIC_COMMON_PARSE_INT_H

#include <stddef.h>
#include <stdint.h>

/* Each returns 0, or ELASTIC_EINVAL leaving *out untouched. `what` names
 * the field for the error detail: one line, "what: "text" is not ..." with
 * the bounds; NULL records no detail (the caller explains, or probes). */
int elastic__parse_i64(const char *what, const char *text, int64_t min, int64_t max, int64_t *out);
int elastic__parse_u64(const char *what, const char *text, uint64_t min, uint64_t max,
                       uint64_t *out);
int elastic__parse_int(const char *what, const char *text, int min, int max, int *out);
/* The same over len bytes that need not end with a NUL (an embedded NUL is
 * refused like any other non-digit). */
int elastic__parse_i64_n(const char *what, const char *text, size_t len, int64_t min, int64_t max,
                         int64_t *out);
int elastic__parse_u64_n(const char *what, const char *text, size_t len, uint64_t min, uint64_t max,
                         uint64_t *out);

#endif /* ELASTIC_COMMON_PARSE_INT_H */
