/*
 * Watching on etcd: one streaming Watch from a revision, closed at the first
 * event, so no change after that revision is missed (a dropped stream is
 * re-opened from the same revision on the next endpoint). multi_get waits
 * for keys to exist with such watches.
 */
#include "rdzv/backend_etcd.h"

#include "common/clock.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct watch_ctx {
    rdzv__etcd_backend *b;
    const char *key;
    bool prefix;
    int64_t start_revision;
    uint64_t revision; /* out: the change's revision */
    bool want_value;   /* a single key's wait: keep what its last event wrote */
    char *value;       /* out (want_value): the value the key holds after the events, */
    size_t len;        /* NULL when the last event deleted it */
    /* watch_area: full keys whose Puts are no change (NULL: none), and the
     * end mark whose Put's value it keeps (end_value: NULL when none came) */
    const char *ignore_put[2];
    const char *end_key;
    char *end_value;
    size_t end_len;
    char error[200];
} watch_ctx;

static json_object *watch_body(void *user)
{
    watch_ctx *w = user;
    json_object *create = json_object_new_object();
    json_object_object_add(create, "key", etcd__b64(w->key, strlen(w->key)));
    if (w->prefix) {
        char end[512];
        etcd__range_end(w->key, end, sizeof end);
        json_object_object_add(create, "range_end", etcd__b64(end, strlen(end)));
    }
    json_object_object_add(create, "start_revision", json_object_new_int64(w->start_revision));
    json_object *body = json_object_new_object();
    json_object_object_add(body, "create_request", create);
    return body;
}

static bool same_key(const char *full, const char *name, size_t len)
{
    return full != NULL && strlen(full) == len && memcmp(full, name, len) == 0;
}

/* watch_area: whether an event is a Put of one of w's ignored keys (then
 * skipped); a Put of its end mark leaves the value in w->end_value. */
static bool ignored_put(watch_ctx *w, json_object *event, json_object *kv)
{
    if (w->ignore_put[0] == NULL) return false;
    json_object *type = etcd__json_field(event, "type", json_type_string);
    if (type != NULL && strcmp(json_object_get_string(type), "PUT") != 0) return false;
    json_object *key = etcd__json_field(kv, "key", json_type_string);
    char *name = NULL;
    size_t len = 0;
    if (key == NULL || etcd__unb64(key, &name, &len) != 0) return false;
    bool ignored = same_key(w->ignore_put[0], name, len) || same_key(w->ignore_put[1], name, len);
    if (!ignored && same_key(w->end_key, name, len)) {
        free(w->end_value);
        w->end_value = NULL;
        w->end_len = 0;
        if (rdzv__etcd_kv_value(kv, &w->end_value, &w->end_len) != 0) { /* the caller reads it */
            w->end_value = NULL;
            w->end_len = 0;
        }
    }
    free(name);
    return ignored;
}

/* 1: an event (or a compaction: the caller re-reads); 0: keep reading. */
static int on_watch_message(void *user, json_object *message)
{
    watch_ctx *w = user;
    json_object *error = etcd__json_field(message, "error", json_type_object);
    if (error != NULL) {
        json_object *text = etcd__json_field(error, "message", json_type_string);
        snprintf(w->error, sizeof w->error, "%.150s",
                 text != NULL ? json_object_get_string(text) : "watch error");
        return ELASTIC_EPROTO;
    }
    json_object *result = etcd__json_field(message, "result", json_type_object);
    if (result == NULL) {
        snprintf(w->error, sizeof w->error, "a watch message without a result");
        return ELASTIC_EPROTO;
    }
    int64_t compacted = 0, header_revision = 0, revision = 0;
    json_object *header = etcd__json_field(result, "header", json_type_object);
    if (etcd__json_i64(result, "compact_revision", 0, &compacted) != 0 ||
        etcd__json_i64(header, "revision", 0, &header_revision) != 0) {
        snprintf(w->error, sizeof w->error, "malformed watch header");
        return ELASTIC_EPROTO;
    }
    if (compacted > 0) { /* history before our revision is gone: report "changed" */
        w->revision = (uint64_t)(header_revision > 0 ? header_revision : compacted);
        return 1;
    }
    json_object *events = etcd__json_field(result, "events", json_type_array);
    size_t n = events != NULL ? json_object_array_length(events) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *kv =
            etcd__json_field(json_object_array_get_idx(events, i), "kv", json_type_object);
        int64_t mod = 0;
        if (kv == NULL || etcd__json_i64(kv, "mod_revision", 0, &mod) != 0 ||
            mod < w->start_revision) {
            snprintf(w->error, sizeof w->error, "malformed watch event");
            return ELASTIC_EPROTO;
        }
        if (ignored_put(w, json_object_array_get_idx(events, i), kv)) continue;
        if (mod > revision) revision = mod;
        if (w->want_value) {
            /* The event carries the key's new value: no read after the wait.
             * A PUT's "type" is absent (the enum's zero), a delete says DELETE. */
            json_object *type =
                etcd__json_field(json_object_array_get_idx(events, i), "type", json_type_string);
            free(w->value);
            w->value = NULL;
            w->len = 0;
            if ((type == NULL || strcmp(json_object_get_string(type), "PUT") == 0) &&
                rdzv__etcd_kv_value(kv, &w->value, &w->len) != 0) {
                snprintf(w->error, sizeof w->error, "a watch event without a valid value");
                return ELASTIC_EPROTO;
            }
        }
    }
    if (revision == 0) return 0; /* "created", a progress notice, or only ignored Puts */
    w->revision = (uint64_t)revision;
    return 1;
}

/* Runs w's watch until its first event; w->value is the caller's to free. */
static int watch_ctx_run(watch_ctx *w, int timeout_ms)
{
    if (w->start_revision < 1) w->start_revision = 1;
    int rc = etcd__stream(w->b->client, "/v3/watch", watch_body, timeout_ms, on_watch_message, w);
    if (rc != 0) {
        free(w->value);
        w->value = NULL;
    }
    if (rc == ELASTIC_EPROTO && w->error[0] != '\0')
        return elastic__fail(rc, "etcd watch: %s", w->error);
    return rc;
}

int rdzv__etcd_watch_from(rdzv__etcd_backend *b, const char *full_key, bool prefix,
                          int64_t start_revision, int timeout_ms, uint64_t *revision)
{
    watch_ctx w = { .b = b, .key = full_key, .prefix = prefix, .start_revision = start_revision };
    int rc = watch_ctx_run(&w, timeout_ms);
    if (rc == 0) *revision = w.revision;
    return rc;
}

/* Whether a key exists at `full` (under it, when prefix), and the revision
 * etcd answered at. */
static int any_key(rdzv__etcd_backend *b, const char *full, bool prefix, int64_t *revision,
                   bool *any)
{
    json_object *body = json_object_new_object(), *reply = NULL;
    json_object_object_add(body, "key", etcd__b64(full, strlen(full)));
    if (prefix) {
        char end[512];
        etcd__range_end(full, end, sizeof end);
        json_object_object_add(body, "range_end", etcd__b64(end, strlen(end)));
    }
    json_object_object_add(body, "keys_only", json_object_new_boolean(1));
    json_object_object_add(body, "limit", json_object_new_int64(1));
    int rc = etcd__call(b->client, "/v3/kv/range", body, 0, false, &reply);
    json_object *header = rc == 0 ? etcd__json_field(reply, "header", json_type_object) : NULL;
    if (rc == 0) rc = etcd__json_i64(header, "revision", 0, revision);
    if (rc == 0 && *revision <= 0)
        rc = elastic__fail(ELASTIC_EPROTO, "etcd range: no revision in the reply");
    json_object *kvs = rc == 0 ? etcd__json_field(reply, "kvs", json_type_array) : NULL;
    *any = kvs != NULL && json_object_array_length(kvs) > 0;
    json_object_put(reply);
    return rc;
}

int rdzv__etcd_watch(rdzv__backend *base, const char *prefix, uint64_t after_revision,
                     int timeout_ms, uint64_t *revision)
{
    rdzv__etcd_backend *b = (rdzv__etcd_backend *)base;
    char full[512];
    int rc = rdzv__etcd_full_key(b, prefix, full, sizeof full);
    if (rc != 0) return rc;
    rdzv__count(base, strlen(prefix) + 12, 8);
    if (after_revision >= (uint64_t)INT64_MAX)
        return elastic__fail(ELASTIC_EINVAL, "etcd watch: revision too large");
    bool is_prefix = full[0] != '\0' && full[strlen(full) - 1] == '/';
    if (after_revision == 0) {
        /* "Changed since the beginning" is true the moment a key exists: one
         * Range answers it instead of a stream replaying the whole history
         * (which etcd serves from its history loop, up to 100 ms late). Only
         * an empty prefix, whose keys may have come and gone, needs that
         * history watch. */
        int64_t now = 0;
        bool any = false;
        rc = any_key(b, full, is_prefix, &now, &any);
        if (rc != 0) return rc;
        if (any) {
            *revision = (uint64_t)now;
            return 0;
        }
    }
    return rdzv__etcd_watch_from(b, full, is_prefix, (int64_t)after_revision + 1, timeout_ms,
                                 revision);
}

/* Reads every key, one Txn per rdzv__etcd_txn_ops keys; *missing: the first
 * absent one (or -1), and *revision: the store revision the first read of
 * that key saw. */
static int read_all(rdzv__etcd_backend *b, const char *const *keys, size_t n, void **values,
                    size_t *lens, long *missing, int64_t *revision)
{
    int rc = 0;
    *missing = -1;
    for (size_t first = 0, last = 0; rc == 0 && *missing < 0 && first < n; first = last) {
        size_t step = rdzv__etcd_txn_ops(b);
        last = first + step < n ? first + step : n;
        json_object *body = json_object_new_object(), *ops = json_object_new_array();
        json_object_object_add(body, "success", ops);
        for (size_t i = first; rc == 0 && i < last; i++) {
            char full[512];
            rc = rdzv__etcd_full_key(b, keys[i], full, sizeof full);
            if (rc != 0) break;
            json_object *range = json_object_new_object(), *op = json_object_new_object();
            json_object_object_add(range, "key", etcd__b64(full, strlen(full)));
            json_object_object_add(op, "request_range", range);
            json_object_array_add(ops, op);
        }
        json_object *reply = NULL;
        if (rc != 0)
            json_object_put(body);
        else
            rc = etcd__call(b->client, "/v3/kv/txn", body, 0, false, &reply);
        rdzv__count(&b->base, 0, 0);
        if (rdzv__etcd_txn_refused(b, last - first, rc)) { /* the same keys, smaller */
            rc = 0;
            last = first;
            continue;
        }
        json_object *responses =
            rc == 0 ? etcd__json_field(reply, "responses", json_type_array) : NULL;
        json_object *header = rc == 0 ? etcd__json_field(reply, "header", json_type_object) : NULL;
        if (rc == 0) rc = etcd__json_i64(header, "revision", 0, revision);
        if (rc == 0 && (responses == NULL || json_object_array_length(responses) != last - first))
            rc =
                elastic__fail(ELASTIC_EPROTO,
                              "etcd: a Txn of %zu reads answered with another count", last - first);
        for (size_t i = first; rc == 0 && i < last; i++) {
            json_object *range = etcd__json_field(json_object_array_get_idx(responses, i - first),
                                                  "response_range", json_type_object);
            json_object *kvs = etcd__json_field(range, "kvs", json_type_array);
            json_object *kv = kvs != NULL && json_object_array_length(kvs) > 0
                                  ? json_object_array_get_idx(kvs, 0)
                                  : NULL;
            if (kv == NULL || !json_object_is_type(kv, json_type_object)) {
                *missing = (long)i;
                break;
            }
            rc = rdzv__etcd_kv_value(kv, (char **)&values[i], &lens[i]);
        }
        json_object_put(reply);
    }
    if (rc != 0 || *missing >= 0) {
        for (size_t i = 0; i < n; i++) {
            free(values[i]);
            values[i] = NULL;
            lens[i] = 0;
        }
    }
    return rc;
}

int rdzv__etcd_multi_get(rdzv__backend *base, const char *const *keys, size_t n, int timeout_ms,
                         void **values, size_t *lens)
{
    rdzv__etcd_backend *b = (rdzv__etcd_backend *)base;
    uint64_t deadline = elastic__deadline_ms(timeout_ms);
    size_t sent = 0, received = 0;
    for (size_t i = 0; i < n; i++) {
        sent += strlen(keys[i]);
        values[i] = NULL;
        lens[i] = 0;
    }
    int rc;
    for (;;) {
        long missing = -1;
        int64_t revision = 0;
        rc = read_all(b, keys, n, values, lens, &missing, &revision);
        __atomic_fetch_add(&base->traffic.bytes_sent, (uint64_t)sent, __ATOMIC_RELAXED);
        if (rc != 0 || missing < 0) break;
        /* Wait for the first absent key to appear after what we read. */
        int left = elastic__ms_left(deadline);
        if (left <= 0) {
            rc = elastic__fail(ELASTIC_ETIMEDOUT, "etcd: key %s absent after %d ms", keys[missing],
                               timeout_ms);
            break;
        }
        char full[512];
        rc = rdzv__etcd_full_key(b, keys[missing], full, sizeof full);
        watch_ctx w = { .b = b, .key = full, .start_revision = revision + 1, .want_value = n == 1 };
        if (rc == 0) rc = watch_ctx_run(&w, left);
        rdzv__count(base, strlen(keys[missing]) + 12, 8);
        if (rc == 0 && w.value != NULL) { /* one key, and its event says what it holds */
            values[0] = w.value;
            lens[0] = w.len;
            break;
        }
        free(w.value); /* deleted again, or one of several keys: read them all again */
        if (rc == ELASTIC_ETIMEDOUT) {
            rc = elastic__fail(ELASTIC_ETIMEDOUT, "etcd: key %s absent after %d ms", keys[missing],
                               timeout_ms);
            break;
        }
        if (rc != 0) break;
    }
    for (size_t i = 0; rc == 0 && i < n; i++) received += lens[i];
    __atomic_fetch_add(&base->traffic.bytes_received, (uint64_t)received, __ATOMIC_RELAXED);
    return rc;
}

/* The join's record and its first wait for the assignment: one Txn puts the
 * leased record and reads the assignment (present when the sealer was
 * quicker), and only when it is absent a watch from that Txn's revision,
 * whose event carries the value. Two requests where a Put, a read and a
 * watch were three; the Put is the one Raft round, as before. */
int rdzv__etcd_set_leased_wait(rdzv__backend *base, const char *key, const void *value, size_t len,
                               uint64_t lease, const char *wait_key, int timeout_ms,
                               void **wait_value, size_t *wait_len, uint64_t *set_revision)
{
    rdzv__etcd_backend *b = (rdzv__etcd_backend *)base;
    *wait_value = NULL;
    *wait_len = 0;
    *set_revision = 0;
    char full[512];
    int rc = rdzv__etcd_full_key(b, wait_key, full, sizeof full);
    if (rc != 0) return rc;
    if (lease == 0 || lease > (uint64_t)INT64_MAX)
        return elastic__fail(ELASTIC_EINVAL, "etcd: set_leased_wait without a valid lease");
    json_object *put = rdzv__etcd_put_object(b, key, value, len, (int64_t)lease, true),
                *read = rdzv__etcd_key_object(b, wait_key);
    if (put == NULL || read == NULL) {
        json_object_put(put);
        json_object_put(read);
        return elastic__fail(ELASTIC_ELIMIT, "etcd: key \"%.60s\" or its value is too large", key);
    }
    json_object *body = json_object_new_object(), *ops = json_object_new_array(),
                *put_op = json_object_new_object(), *read_op = json_object_new_object();
    json_object_object_add(put_op, "request_put", put);
    json_object_object_add(read_op, "request_range", read);
    json_object_array_add(ops, put_op);
    json_object_array_add(ops, read_op);
    json_object_object_add(body, "success", ops);
    json_object *reply = NULL;
    /* Sent again after a lost reply it writes the same record on the same
     * lease: harmless. A lease that ended fails the whole Txn (ENOTFOUND). */
    rc = etcd__call(b->client, "/v3/kv/txn", body, 0, false, &reply);
    rdzv__count(base, strlen(key) + len + 8 + strlen(wait_key), 0);
    json_object *responses = rc == 0 ? etcd__json_field(reply, "responses", json_type_array) : NULL;
    json_object *header = rc == 0 ? etcd__json_field(reply, "header", json_type_object) : NULL;
    int64_t revision = 0;
    if (rc == 0) rc = etcd__json_i64(header, "revision", 0, &revision);
    if (rc == 0 && (responses == NULL || json_object_array_length(responses) != 2 || revision < 1))
        rc = elastic__fail(ELASTIC_EPROTO, "etcd: a Txn of a put and a read answered otherwise");
    /* The record's revision is its creation's: a Put sent again (its reply
     * lost) lands later, after the sealer may have read the first one. */
    json_object *prev =
        rc == 0 ? etcd__json_field(etcd__json_field(json_object_array_get_idx(responses, 0),
                                                    "response_put", json_type_object),
                                   "prev_kv", json_type_object)
                : NULL;
    int64_t created = revision;
    if (prev != NULL && etcd__json_i64(prev, "create_revision", 0, &created) != 0)
        rc = elastic__fail(ELASTIC_EPROTO, "etcd: a Put's previous record without a revision");
    if (rc == 0)
        *set_revision = (uint64_t)(created > 0 && created <= revision ? created : revision);
    json_object *range = rc == 0 ? etcd__json_field(json_object_array_get_idx(responses, 1),
                                                    "response_range", json_type_object)
                                 : NULL;
    json_object *kvs = etcd__json_field(range, "kvs", json_type_array);
    json_object *kv =
        kvs != NULL && json_object_array_length(kvs) > 0 ? json_object_array_get_idx(kvs, 0) : NULL;
    if (rc == 0 && kv != NULL && json_object_is_type(kv, json_type_object))
        rc = rdzv__etcd_kv_value(kv, (char **)wait_value, wait_len);
    json_object_put(reply);
    if (rc != 0 || *wait_value != NULL) {
        __atomic_fetch_add(&base->traffic.bytes_received, (uint64_t)*wait_len, __ATOMIC_RELAXED);
        return rc;
    }
    watch_ctx w = { .b = b, .key = full, .start_revision = revision + 1, .want_value = true };
    rc = watch_ctx_run(&w, timeout_ms > 0 ? timeout_ms : 1);
    rdzv__count(base, strlen(wait_key) + 12, w.len);
    if (rc == 0 && w.value == NULL) rc = ELASTIC_ETIMEDOUT; /* deleted again: wait on */
    if (rc != 0) {
        free(w.value);
        return rc;
    }
    *wait_value = w.value;
    *wait_len = w.len;
    return 0;
}

/* The monitor's watch of a node's area ("r/<g>/n/<slot>/"): as rdzv__etcd_watch,
 * from a revision (never 0: that is a look, rdzv__etcd_watch's business), with
 * the Puts of the area's "a" and "rec" skipped on the stream. */
int rdzv__etcd_watch_area(rdzv__backend *base, const char *prefix, uint64_t after_revision,
                          int timeout_ms, uint64_t *revision, void **end_value, size_t *end_len)
{
    rdzv__etcd_backend *b = (rdzv__etcd_backend *)base;
    *end_value = NULL;
    *end_len = 0;
    if (after_revision == 0) return rdzv__etcd_watch(base, prefix, 0, timeout_ms, revision);
    if (after_revision >= (uint64_t)INT64_MAX)
        return elastic__fail(ELASTIC_EINVAL, "etcd watch: revision too large");
    char full[512], assignment[520], record[520], end[520];
    int rc = rdzv__etcd_full_key(b, prefix, full, sizeof full);
    size_t len = strlen(full);
    if (rc == 0 && (len == 0 || full[len - 1] != '/'))
        rc = elastic__fail(ELASTIC_EINVAL, "etcd: watch_area of \"%.60s\", not an area", prefix);
    if (rc != 0) return rc;
    snprintf(assignment, sizeof assignment, "%sa", full);
    snprintf(record, sizeof record, "%srec", full);
    snprintf(end, sizeof end, "%se", full);
    rdzv__count(base, strlen(prefix) + 12, 8);
    watch_ctx w = { .b = b,
                    .key = full,
                    .prefix = true,
                    .start_revision = (int64_t)after_revision + 1,
                    .ignore_put = { assignment, record },
                    .end_key = end };
    rc = watch_ctx_run(&w, timeout_ms);
    if (rc == 0) {
        *revision = w.revision;
        *end_value = w.end_value;
        *end_len = w.end_len;
    } else {
        free(w.end_value);
    }
    return rc;
}
