/* libFuzzer target for src/common/parse_int.c, checked against an oracle
 * written differently (128-bit arithmetic): the first 16 bytes are the
 * bounds, the rest the text. Accepted exactly when the text is [-]digits
 * (the '-' for signed only) and the value lies within the bounds; the value
 * must then match; refused calls leave the output untouched. */
#include "common/common.h"
#include "common/parse_int.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The oracle: syntax, then the value (saturated far above 64 bits). */
static bool oracle(const char *text, size_t len, bool is_signed, __int128 *value)
{
    size_t i = is_signed && len > 0 && text[0] == '-' ? 1 : 0;
    if (i == len) return false;
    __int128 v = 0;
    for (size_t k = i; k < len; k++) {
        if (text[k] < '0' || text[k] > '9') return false;
        if (v < ((__int128)1 << 70)) v = v * 10 + (text[k] - '0');
    }
    *value = i ? -v : v;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 16) return 0;
    uint64_t a = 0, b = 0;
    memcpy(&a, data, 8);
    memcpy(&b, data + 8, 8);
    const char *text = (const char *)data + 16;
    size_t len = size - 16;
    __int128 want;

    int64_t smin = (int64_t)(a < b ? a : b), smax = (int64_t)(a < b ? b : a), s = 12345;
    if (smin > smax) {
        int64_t t = smin;
        smin = smax;
        smax = t;
    }
    bool ok = oracle(text, len, true, &want) && want >= smin && want <= smax;
    int rc = elastic__parse_i64_n(NULL, text, len, smin, smax, &s);
    if ((rc == 0) != ok || (ok && s != (int64_t)want) || (!ok && s != 12345)) abort();

    uint64_t umin = a < b ? a : b, umax = a < b ? b : a, u = 777;
    ok = oracle(text, len, false, &want) && want >= (__int128)umin && want <= (__int128)umax;
    rc = elastic__parse_u64_n(NULL, text, len, umin, umax, &u);
    if ((rc == 0) != ok || (ok && u != (uint64_t)want) || (!ok && u != 777)) abort();

    /* The NUL-terminated form and the error line agree with the counted one. */
    char *copy = malloc(len + 1);
    if (copy == NULL) return 0;
    memcpy(copy, text, len);
    copy[len] = '\0';
    int64_t s2 = 12345;
    if (memchr(text, '\0', len) == NULL) {
        int rc2 = elastic__parse_i64("field", copy, smin, smax, &s2);
        if (rc2 != elastic__parse_i64_n(NULL, text, len, smin, smax, &s) || (rc2 == 0 && s2 != s))
            abort();
        if (rc2 != 0 && strncmp(elastic_last_error(), "field: \"", 8) != 0) abort();
    }
    free(copy);
    return 0;
}
