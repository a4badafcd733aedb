/*
 * The job-wide bound on infrastructure failures (rdzv__consume_infra): the
 * generations a lost node or a member stepping aside for a spare ended.
 * They spend none of max_restarts. At most max_infra_restarts of them
 * within one hour (a window that opens with the first such end after the
 * last window closed): a fleet that keeps failing under the job (nodes
 * lost, replaced, lost again) ends it within the hour, while a long job on
 * a large healthy fleet, which loses a node now and then, never does; a
 * count over the job's whole life could not tell the two apart.
 *
 * "infra_window" holds "<start wall ms> <count>", advanced by
 * compare-and-set (only the node whose end of the generation won counts
 * it); "infra_restarts" counts every such end of the job. Both live in the
 * rendezvous' own keys, the c10d store or etcd alike.
 */
#include "common/parse_int.h"
#include "rdzv/rdzv.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define WINDOW_KEY "infra_window"
#define WINDOW_MAX 48 /* "<20 digits> <20 digits>" */

/* "<start> <count>", validated: the store is input. */
static int parse_window(const void *value, size_t len, uint64_t *start, int64_t *count)
{
    const char *text = value, *space = len < WINDOW_MAX ? memchr(text, ' ', len) : NULL;
    if (space == NULL)
        return elastic__fail(ELASTIC_ECORRUPT, "rdzv: corrupt \"%s\"", WINDOW_KEY);
    size_t head = (size_t)(space - text);
    if (elastic__parse_u64_n(NULL, text, head, 0, UINT64_MAX, start) != 0 ||
        elastic__parse_i64_n(NULL, space + 1, len - head - 1, 0, INT32_MAX, count) != 0)
        return elastic__fail(ELASTIC_ECORRUPT, "rdzv: corrupt \"%s\"", WINDOW_KEY);
    return 0;
}

/* One more end in the window open at now (a new one when none is, or the
 * value is corrupt): its count after this end in *count. */
static int count_in_window(elastic_rdzv *r, uint64_t now, int64_t *count)
{
    void *current = NULL;
    size_t clen = 0;
    int rc = r->backend->ops->get(r->backend, WINDOW_KEY, &current, &clen);
    if (rc == ELASTIC_ENOTFOUND) rc = 0;
    for (int attempt = 0; rc == 0 && attempt < 16; attempt++) {
        uint64_t start = now;
        int64_t n = 0;
        if (current != NULL && parse_window(current, clen, &start, &n) != 0) {
            ELASTIC_LOG_W("rdzv", "run %s: %s: a new window", r->run_id, elastic_last_error());
            start = now, n = 0;
        }
        if (now < start || now - start >= RDZV__INFRA_WINDOW_MS) start = now, n = 0;
        char next[WINDOW_MAX];
        int len = snprintf(next, sizeof next, "%" PRIu64 " %" PRId64, start, n + 1);
        void *after = NULL;
        size_t alen = 0;
        rc = r->backend->ops->compare_set(r->backend, WINDOW_KEY, current, clen, next, (size_t)len,
                                          &after, &alen);
        bool won = rc == 0 && alen == (size_t)len && memcmp(after, next, alen) == 0;
        elastic_free(current);
        current = after, clen = alen;
        if (won) {
            elastic_free(current);
            *count = n + 1;
            return 0;
        }
    }
    elastic_free(current);
    return rc != 0 ? rc
                   : elastic__fail(ELASTIC_EBUSY, "rdzv: run %s: \"%s\" kept changing", r->run_id,
                                   WINDOW_KEY);
}

int rdzv__consume_infra(elastic_rdzv *r, const elastic_rdzv_cause *cause)
{
    int64_t total = 0, in_window = 0;
    int rc = r->backend->ops->add(r->backend, "infra_restarts", 1, &total);
    if (rc == 0) rc = count_in_window(r, elastic__wall_ms(), &in_window);
    if (rc != 0 || in_window <= r->max_infra_restarts) return rc;
    ELASTIC_LOG_W("rdzv",
                  "run %s: %" PRId64 " infrastructure failures within an hour exceed "
                  "max_infra_restarts %d; shutting the job",
                  r->run_id, in_window, r->max_infra_restarts);
    char reason[sizeof cause->reason];
    snprintf(reason, sizeof reason,
             RDZV__INFRA_REASON "lost or replaced nodes ended %" PRId64
                                " generation%s within an hour, --max-infra-restarts %d (last: "
                                "node %.40s, %.30s)",
             in_window, in_window == 1 ? "" : "s", r->max_infra_restarts, cause->node_id,
             cause->reason);
    elastic_rdzv_cause closing;
    rdzv__fill_cause(r, &closing, ELASTIC_RDZV_JOB_ENDED, cause->generation, cause->node_id,
                     reason);
    return rdzv__shut_job(r, &closing, false);
}
