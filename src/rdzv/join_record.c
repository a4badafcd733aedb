/*
 * A joining node's leased record in its round (r/<round>/n/<slot>/rec: its
 * id, address, master port, ranks) — alone (under a new lease where the old
 * one ended), or with the first wait for its assignment (set_leased_wait).
 */
#include "rdzv/rdzv.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

/* A port free on this node right now, for the workers' master if this node
 * becomes group rank 0 (bind port 0, read it back, release it). */
static int pick_free_port(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return elastic__fail(ELASTIC_ESYS, "rdzv: socket: cannot pick a master port");
    struct sockaddr_in addr = { .sin_family = AF_INET,
                                .sin_addr.s_addr = htonl(INADDR_ANY),
                                .sin_port = 0 };
    socklen_t len = sizeof addr;
    int rc = bind(fd, (struct sockaddr *)&addr, sizeof addr) == 0 &&
                     getsockname(fd, (struct sockaddr *)&addr, &len) == 0
                 ? 0
                 : elastic__fail(ELASTIC_ESYS, "rdzv: bind: cannot pick a master port");
    close(fd);
    *port = ntohs(addr.sin_port);
    return rc;
}

static int ensure_lease(elastic_rdzv *r, bool renew)
{
    /* A fenced node's lease is gone (or about to go): never reuse it. */
    if (__atomic_exchange_n(&r->lease_lost, 0, __ATOMIC_ACQ_REL)) renew = true;
    if (r->have_lease && !renew) return 0;
    int rc = r->backend->ops->lease_grant(r->backend, r->keepalive_timeout_ms,
                                          r->keepalive_interval_ms, &r->lease);
    r->have_lease = rc == 0;
    return rc;
}

/* This node's record, encoded into value (RDZV__MAX_RECORD bytes). */
static int record_text(elastic_rdzv *r, char *value, size_t *len)
{
    rdzv__record rec = { .local_world_size = r->local_world_size,
                         .prev_rank = -1,
                         .preferred_rank = r->preferred_rank };
    int rc = pick_free_port(&rec.master_port);
    if (rc != 0) return rc;
    pthread_mutex_lock(&r->lock);
    if (r->generation > 0 && !r->fenced) { /* a fenced node comes back as a new member */
        rec.prev_generation = r->generation;
        rec.prev_rank = r->group_rank;
    }
    pthread_mutex_unlock(&r->lock);
    snprintf(rec.node_id, sizeof rec.node_id, "%s", r->node_id);
    snprintf(rec.addr, sizeof rec.addr, "%s", r->node_addr);
    *len = rdzv__record_encode(&rec, value, RDZV__MAX_RECORD);
    return 0;
}

int rdzv__write_record(elastic_rdzv *r, uint64_t round, int slot)
{
    char key[64], value[RDZV__MAX_RECORD];
    size_t len = 0;
    int rc = record_text(r, value, &len);
    if (rc != 0) return rc;
    rdzv__key_slot(key, sizeof key, round, slot, "rec");
    for (int attempt = 0; attempt < 2; attempt++) {
        rc = ensure_lease(r, attempt > 0);
        if (rc == 0) rc = r->backend->ops->set_leased(r->backend, key, value, len, r->lease);
        if (rc != ELASTIC_ENOTFOUND) return rc;
    }
    return rc;
}

int rdzv__record_and_wait(elastic_rdzv *r, uint64_t round, int slot, int wait_ms,
                          rdzv__assignment *a, uint64_t *record_revision)
{
    *record_revision = 0;
    if (!r->have_lease || __atomic_load_n(&r->lease_lost, __ATOMIC_ACQUIRE))
        return ELASTIC_EUNSUPPORTED; /* a new lease first: rdzv__write_record */
    char key[64], wait_key[64], value[RDZV__MAX_RECORD];
    size_t len = 0;
    int rc = record_text(r, value, &len);
    if (rc != 0) return rc;
    rdzv__key_slot(key, sizeof key, round, slot, "rec");
    rdzv__key_slot(wait_key, sizeof wait_key, round, slot, "a");
    void *answer = NULL;
    size_t answer_len = 0;
    rc = r->backend->ops->set_leased_wait(r->backend, key, value, len, r->lease, wait_key,
                                          wait_ms > 0 ? wait_ms : 1, &answer, &answer_len,
                                          record_revision);
    if (rc == 0) rc = rdzv__assignment_decode(answer, answer_len, a);
    elastic_free(answer);
    /* The lease ended meanwhile: the caller writes the record anew (a new lease). */
    if (rc == ELASTIC_ENOTFOUND) *record_revision = 0;
    return rc == ELASTIC_ENOTFOUND ? ELASTIC_EUNSUPPORTED : rc;
}
