/*
 * A join's adds and what the joining node reads right after them, in one
 * backend call (add_get; add_get_unless while the round pointer is unread):
 * the round pointer, the job's closed marker, the round's count and, for a
 * survivor, how many of its last generation are gone. One message on etcd
 * and on a store that batches; the plain calls in sequence elsewhere.
 */
#include "rdzv/rdzv.h"

#include <stdlib.h>

/* Parses the view's values: round, closed, count, gone (n of them). */
static int parse_view(elastic_rdzv *r, const char *const *keys, void **values, size_t *lens,
                      size_t n, rdzv__round_ptr *ptr, rdzv__join_view *view)
{
    int rc = rdzv__round_parse(r, values[0], lens[0], ptr);
    if (rc == 0) {
        view->have_closed = true;
        view->closed_rc = rdzv__closed_code(r, values[1], lens[1]);
    }
    int64_t *counts[2] = { &view->count, &view->gone };
    bool *known[2] = { &view->have_count, &view->have_gone };
    for (size_t i = 2; rc == 0 && i < n; i++) {
        *counts[i - 2] = 0; /* absent: nobody counted yet */
        if (values[i] != NULL &&
            rdzv__parse_int(values[i], lens[i], INT32_MIN, INT64_MAX, counts[i - 2]) != 0)
            rc = elastic__fail(ELASTIC_ECORRUPT, "rdzv: key %s holds no integer", keys[i]);
        *known[i - 2] = rc == 0;
    }
    return rc;
}

int rdzv__join_count(elastic_rdzv *r, uint64_t round, bool survivor, bool unread, int64_t *slot,
                     int64_t *back, rdzv__round_ptr *ptr, rdzv__join_view *view)
{
    memset(view, 0, sizeof *view);
    *back = -1;
    *slot = 0;
    char count_key[64], back_key[64], gone_key[64];
    rdzv__key_round(count_key, sizeof count_key, round, "count");
    rdzv__key_round(back_key, sizeof back_key, round, "back");
    rdzv__key_round(gone_key, sizeof gone_key, round - 1, "gone");
    const char *adds[2] = { count_key, back_key };
    const char *keys[4] = { "round", "closed", count_key, gone_key };
    int64_t sums[2] = { 0, -1 };
    void *values[4] = { NULL, NULL, NULL, NULL };
    size_t lens[4] = { 0, 0, 0, 0 }, n = survivor && round > 1 ? 4 : 3;
    bool added = true;
    /* Unread: round 1, and only while the round pointer is absent (round 1
     * is open until its seal writes the pointer); else the view alone. */
    int rc = unread ? r->backend->ops->add_get_unless(r->backend, "round", adds, survivor ? 2 : 1,
                                                      sums, keys, n, values, lens, &added)
                    : r->backend->ops->add_get(r->backend, adds, survivor ? 2 : 1, sums, keys, n,
                                               values, lens);
    if (rc == 0) rc = parse_view(r, keys, values, lens, n, ptr, view);
    for (size_t i = 0; i < n; i++) elastic_free(values[i]);
    if (!added) return rc; /* *slot 0: not joined; *ptr says the open round */
    *slot = sums[0];
    if (survivor) *back = sums[1];
    return rc;
}
