/*
 * The job's outcome, owed by the c10d store's host to every other node.
 *
 * c10d cannot outlive the agent that hosts its store, and a node cut off or
 * frozen as the job ends can read how it ended only from that store. A fixed
 * linger after the close (2 s before) lost that race whenever the node came
 * back later, e.g. after TCP's retransmission backoff on a healed link, and
 * such a node then exited 1 saying the store was lost although the job had
 * succeeded. So each node marks itself as owed the outcome, with a key on a
 * lease of a connection of its own, and the host serves until no mark is
 * left. A mark goes when its node settles (it exits knowing the outcome:
 * its connection closes and the lease with it), when its agent dies (the
 * kernel closes the connection: nobody left to tell), or outcome_timeout
 * after its last keep-alive (a host powered off, or a node cut off longer
 * than that). The host's wait therefore ends on an event, each mark bounded
 * by its own lease.
 */
#include "agent/outcome.h"

#include "common/clock.h"
#include "common/common.h"

#include <stdio.h>
#include <string.h>

#define OUTCOME_CALL_TIMEOUT_MS 5000 /* each call of the mark's own connection */
#define OUTCOME_WATCH_SLICE_MS  1000 /* how often the host's wait looks at *stop */

static void owed_prefix(char *buf, size_t cap, const char *run_id)
{
    snprintf(buf, cap, "agent/%s/owed/", run_id);
}

int agent__outcome_owe(const char *endpoint, const char *token, const char *run_id,
                       const char *node_id, int ttl_ms, agent_outcome_mark *mark)
{
    memset(mark, 0, sizeof *mark);
    char prefix[256];
    owed_prefix(prefix, sizeof prefix, run_id);
    int len = snprintf(mark->key, sizeof mark->key, "%s%s", prefix, node_id);
    if (len < 0 || (size_t)len >= sizeof mark->key)
        return elastic__fail(ELASTIC_EINVAL, "outcome mark: run id and node id too long");
    if (ttl_ms <= 0) return elastic__fail(ELASTIC_EINVAL, "outcome mark: no outcome_timeout");
    elastic_store_opts opts;
    elastic_store_opts_init(&opts, sizeof opts);
    opts.token = token;
    opts.timeout_ms = OUTCOME_CALL_TIMEOUT_MS;
    /* Keep-alives from the client's I/O thread, six per TTL (5 s at the
     * default): a few lost ones cost nothing, and at thousands of nodes the
     * host's store gets a small fraction of the rendezvous' keep-alives. */
    int interval_ms = ttl_ms / 6 > 100 ? ttl_ms / 6 : 100;
    elastic_store *store = NULL;
    uint64_t lease = 0;
    int rc = elastic_store_connect(endpoint, &opts, &store);
    if (rc == 0) rc = elastic_store_lease_grant(store, ttl_ms, interval_ms, &lease);
    if (rc == 0) rc = elastic_store_set_leased(store, mark->key, "1", 1, lease);
    if (rc != 0) {
        char detail[300];
        snprintf(detail, sizeof detail, "%s", elastic_last_error());
        elastic_store_close(store);
        return elastic__fail(rc, "outcome mark %s: %s", mark->key, detail);
    }
    mark->store = store;
    return 0;
}

void agent__outcome_settled(agent_outcome_mark *mark)
{
    /* Closing revokes the lease, and the mark with it, while the connection
     * lives; a dead connection took it along already. */
    elastic_store_close(mark->store);
    mark->store = NULL;
}

int agent__outcome_wait_settled(elastic_store *store, const char *run_id, int timeout_ms,
                                const int *stop)
{
    char prefix[256];
    owed_prefix(prefix, sizeof prefix, run_id);
    uint64_t deadline = elastic__deadline_ms(timeout_ms);
    uint64_t revision = 0; /* wake on any change of a mark after this */
    for (;;) {
        char **keys = NULL;
        size_t n = 0;
        int rc = elastic_store_keys(store, prefix, 1, &keys, &n);
        if (rc == 0 && n > 0 && revision == 0) {
            /* A change after the listing has a later revision than this mark's own. */
            uint64_t key_revision = 0;
            rc = elastic_store_get_revision(store, keys[0], NULL, NULL, &key_revision);
            if (rc == ELASTIC_ENOTFOUND) rc = 0; /* gone meanwhile: list again */
            revision = key_revision;
        }
        elastic_free(keys);
        if (rc != 0) return rc;
        if (n == 0) return 0;
        int left = elastic__ms_left(deadline);
        if (left == 0 || __atomic_load_n(stop, __ATOMIC_ACQUIRE))
            return elastic__fail(ELASTIC_ETIMEDOUT, "a node's outcome mark is left (%s...)",
                                 prefix);
        uint64_t now_revision = revision;
        rc = elastic_store_watch(store, prefix, revision,
                                 left < OUTCOME_WATCH_SLICE_MS ? left : OUTCOME_WATCH_SLICE_MS,
                                 &now_revision);
        if (rc == 0)
            revision = now_revision;
        else if (rc != ELASTIC_ETIMEDOUT)
            return rc;
    }
}
