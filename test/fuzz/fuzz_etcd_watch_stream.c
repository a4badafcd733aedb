/* libFuzzer target for the watch stream's budget (src/etcd/json_bound.c):
 * a stream arrives in pieces of any size, and the per-message count must
 * not depend on where the pieces break. The first byte picks a piece size;
 * the rest, fed whole and fed piecewise, must reach the same verdict and
 * the same counts. */
#include "etcd/etcd.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    size_t piece = (size_t)data[0] % 17 + 1;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    etcd__json_budget whole, parts;
    etcd__json_budget_reset(&whole);
    etcd__json_budget_reset(&parts);
    char why[128];
    int rc_whole = etcd__json_budget_add(&whole, text, len, why, sizeof why);
    int rc_parts = 0;
    for (size_t at = 0; at < len && rc_parts == 0; at += piece) {
        size_t n = len - at < piece ? len - at : piece;
        rc_parts = etcd__json_budget_add(&parts, text + at, n, why, sizeof why);
    }
    if ((rc_whole == 0) != (rc_parts == 0)) abort();
    if (rc_whole == 0 && (whole.elements != parts.elements || whole.depth != parts.depth ||
                          whole.in_string != parts.in_string || whole.bytes != parts.bytes))
        abort();
    if (rc_whole != 0 && rc_whole != ELASTIC_ELIMIT) abort();
    return 0;
}
