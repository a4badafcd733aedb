/*
 * Where the job's store of a generation lives, published in the rendezvous'
 * key space (r/<g>/store, on the publisher's lease so it vanishes with its
 * host): the agent of group rank 0 hosts the store and publishes
 * "S1 <host:port> <token>", the others read it. Used with etcd, where no
 * agent's store outlives the generation it served.
 */
#include "rdzv/rdzv.h"

#include "common/clock.h"

#include <stdio.h>
#include <stdlib.h>

#define RDZV__LOOKUP_SLICE_MS 2000 /* how often the wait looks whether the generation ended */

int rdzv__jobstore_publish(elastic_rdzv *r, uint64_t generation, const char *endpoint,
                           const char *token)
{
    char key[64], value[RDZV__MAX_RECORD];
    if (!rdzv__valid_token(endpoint, RDZV__MAX_ADDR) ||
        (token[0] != '\0' && !rdzv__valid_token(token, 128)))
        return elastic__fail(ELASTIC_EINVAL, "rdzv: job store endpoint or token is not a token");
    int len = snprintf(value, sizeof value, "S1 %s %s", endpoint, token[0] != '\0' ? token : "-");
    rdzv__key_round(key, sizeof key, generation, "store");
    if (!r->have_lease)
        return elastic__fail(ELASTIC_ESTATE, "rdzv: no lease to publish the job store on");
    return r->backend->ops->set_leased(r->backend, key, value, (size_t)len, r->lease);
}

int rdzv__jobstore_lookup(elastic_rdzv *r, uint64_t generation, int timeout_ms, char *endpoint,
                          size_t endpoint_size, char *token, size_t token_size)
{
    char key[64];
    void *value = NULL;
    size_t len = 0;
    rdzv__key_round(key, sizeof key, generation, "store");
    /* In slices: a host that cannot publish (cut off, frozen: its lease
     * lapses) gets the generation ended by the others' monitors within a
     * lease; waiting on for the whole timeout would only be silence. */
    uint64_t deadline = elastic__deadline_ms(timeout_ms);
    int rc;
    for (;;) {
        int left = elastic__ms_left(deadline);
        int slice = left < RDZV__LOOKUP_SLICE_MS ? left : RDZV__LOOKUP_SLICE_MS;
        rc = rdzv__wait_value(r, key, slice > 0 ? slice : 1, &value, &len);
        if (rc != ELASTIC_ETIMEDOUT || elastic__ms_left(deadline) == 0) break;
        pthread_mutex_lock(&r->lock);
        bool ended = r->generation == generation && r->phase == RDZV__ENDED;
        pthread_mutex_unlock(&r->lock);
        if (ended)
            return elastic__fail(ELASTIC_ETIMEDOUT,
                                 "rdzv: run %s: generation %llu ended before its store host "
                                 "published where its store listens",
                                 r->run_id, (unsigned long long)generation);
    }
    if (rc != 0) return rc;
    char ep[RDZV__MAX_ADDR], tok[128];
    char format[32];
    snprintf(format, sizeof format, "S1 %%%zus %%%zus", sizeof ep - 1, sizeof tok - 1);
    bool ok = len < RDZV__MAX_RECORD && strlen(value) == len &&
              sscanf(value, format, ep, tok) == 2 && rdzv__valid_token(ep, sizeof ep) &&
              strlen(ep) < endpoint_size && strlen(tok) < token_size;
    elastic_free(value);
    if (!ok)
        return elastic__fail(ELASTIC_ECORRUPT,
                             "rdzv: run %s: corrupt job store record of generation %llu", r->run_id,
                             (unsigned long long)generation);
    snprintf(endpoint, endpoint_size, "%s", ep);
    snprintf(token, token_size, "%s", strcmp(tok, "-") == 0 ? "" : tok);
    return 0;
}

void rdzv__jobstore_forget(elastic_rdzv *r, uint64_t generation)
{
    char key[64];
    rdzv__key_round(key, sizeof key, generation, "store");
    (void)r->backend->ops->del(r->backend, key);
}

int rdzv__jobstore_host_lost(elastic_rdzv *r, uint64_t generation, const char *why)
{
    rdzv__info info;
    rdzv__record *members = NULL;
    int rc = rdzv__read_info(r, generation, 0, &info, &members);
    if (rc == 0 && (info.group_world_size < 1 || members == NULL))
        rc = elastic__fail(ELASTIC_ECORRUPT, "rdzv: generation %llu has no members",
                           (unsigned long long)generation);
    if (rc != 0) {
        free(members);
        return rc;
    }
    elastic_rdzv_cause cause;
    char reason[256];
    snprintf(reason, sizeof reason, "job store host lost (%.200s)", why);
    /* Group rank 0 hosted the store: name it, so nobody mistakes the cause
     * for a loss of its own node. */
    rdzv__fill_cause(r, &cause, ELASTIC_RDZV_NODE_LOST, generation, members[0].node_id, reason);
    free(members);
    /* The host is gone (its store reset the connection): the survivors'
     * next round must not wait for it as for a survivor, until its lease
     * expires. Counted once, by whoever marks it first, before the end
     * wakes anyone. */
    char key[64];
    void *current = NULL;
    size_t clen = 0;
    bool won = false;
    rdzv__key_round(key, sizeof key, generation, "host_gone");
    size_t id_len = strlen(r->node_id); /* unique: "equals what we wrote" means we wrote it */
    rc =
        r->backend->ops->compare_set(r->backend, key, NULL, 0, r->node_id, id_len, &current, &clen);
    bool first =
        rc == 0 && current != NULL && clen == id_len && memcmp(current, r->node_id, id_len) == 0;
    elastic_free(current);
    int64_t gone = 0;
    if (rc == 0 && first) {
        rdzv__key_round(key, sizeof key, generation, "gone");
        rc = r->backend->ops->add(r->backend, key, 1, &gone);
    }
    if (rc != 0) return rc;
    return rdzv__end(r, generation, &cause, &won);
}

int rdzv__wait_closed(elastic_rdzv *r, int timeout_ms)
{
    void *value = NULL;
    size_t len = 0;
    int rc = rdzv__wait_value(r, "closed", timeout_ms, &value, &len);
    elastic_free(value);
    return rc;
}
