/*
 * Strict decimal integers (common/parse_int.h): one loop that accumulates
 * the magnitude with an overflow check, then the sign and the bounds
 * (fuzzed by test/fuzz/fuzz_parse_int.c).
 */
#include "common/parse_int.h"

#include "common/common.h"

#include <inttypes.h>

/* How much of a bad value an error message quotes. */
#define PARSE_INT_QUOTE 40

/* The magnitude of [negative]digits; false on an empty, non-digit or
 * overflowing text (above UINT64_MAX). */
static bool magnitude(const char *text, size_t len, bool allow_minus, bool *negative,
                      uint64_t *value)
{
    size_t i = 0;
    *negative = false;
    if (allow_minus && len > 0 && text[0] == '-') {
        *negative = true;
        i = 1;
    }
    if (i == len) return false;
    uint64_t v = 0;
    for (; i < len; i++) {
        if (text[i] < '0' || text[i] > '9') return false;
        unsigned digit = (unsigned)(text[i] - '0');
        if (v > (UINT64_MAX - digit) / 10) return false;
        v = v * 10 + digit;
    }
    *value = v;
    return true;
}

static int refuse_signed(const char *what, const char *text, size_t len, int64_t min, int64_t max)
{
    if (what == NULL) return ELASTIC_EINVAL;
    int shown = len > PARSE_INT_QUOTE ? PARSE_INT_QUOTE : (int)len;
    return elastic__fail(ELASTIC_EINVAL,
                         "%s: \"%.*s%s\" is not a whole number in [%" PRId64 ", %" PRId64 "]", what,
                         shown, text, len > PARSE_INT_QUOTE ? "..." : "", min, max);
}

static int refuse_unsigned(const char *what, const char *text, size_t len, uint64_t min,
                           uint64_t max)
{
    if (what == NULL) return ELASTIC_EINVAL;
    int shown = len > PARSE_INT_QUOTE ? PARSE_INT_QUOTE : (int)len;
    return elastic__fail(ELASTIC_EINVAL,
                         "%s: \"%.*s%s\" is not a whole number in [%" PRIu64 ", %" PRIu64 "]", what,
                         shown, text, len > PARSE_INT_QUOTE ? "..." : "", min, max);
}

int elastic__parse_i64_n(const char *what, const char *text, size_t len, int64_t min, int64_t max,
                         int64_t *out)
{
    bool negative;
    uint64_t mag;
    if (text == NULL) return refuse_signed(what, "", 0, min, max);
    if (!magnitude(text, len, true, &negative, &mag))
        return refuse_signed(what, text, len, min, max);
    int64_t value;
    if (negative) {
        if (mag > (uint64_t)INT64_MAX + 1) return refuse_signed(what, text, len, min, max);
        value = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
    } else {
        if (mag > (uint64_t)INT64_MAX) return refuse_signed(what, text, len, min, max);
        value = (int64_t)mag;
    }
    if (value < min || value > max) return refuse_signed(what, text, len, min, max);
    *out = value;
    return 0;
}

int elastic__parse_u64_n(const char *what, const char *text, size_t len, uint64_t min, uint64_t max,
                         uint64_t *out)
{
    bool negative;
    uint64_t value;
    if (text == NULL) return refuse_unsigned(what, "", 0, min, max);
    if (!magnitude(text, len, false, &negative, &value) || value < min || value > max)
        return refuse_unsigned(what, text, len, min, max);
    *out = value;
    return 0;
}

int elastic__parse_i64(const char *what, const char *text, int64_t min, int64_t max, int64_t *out)
{
    return elastic__parse_i64_n(what, text, text ? strlen(text) : 0, min, max, out);
}

int elastic__parse_u64(const char *what, const char *text, uint64_t min, uint64_t max,
                       uint64_t *out)
{
    return elastic__parse_u64_n(what, text, text ? strlen(text) : 0, min, max, out);
}

int elastic__parse_int(const char *what, const char *text, int min, int max, int *out)
{
    int64_t wide;
    int rc = elastic__parse_i64(what, text, min, max, &wide);
    if (rc == 0) *out = (int)wide;
    return rc;
}
