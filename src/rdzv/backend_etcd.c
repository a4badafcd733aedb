/*
 * The rendezvous backend on etcd v3: get/set/delete as Range/Put/
 * DeleteRange, multi_set and compare_set as one Txn each, add as a Txn on a
 * counter key (etcd counts a key's versions for us), keys as a keys-only
 * Range. Watches are in backend_etcd_watch.c, leases in backend_etcd_lease.c.
 */
#include "rdzv/backend_etcd.h"
#include "common/parse_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* A counter kept by add(+1) holds this marker; its value is the key's
 * version (how often it was written since created), so concurrent adds are
 * one Put each instead of compare-and-set retries. Rendezvous values are
 * printable text, so the marker cannot collide with them. */
static const char COUNTER[] = "\001c";
#define COUNTER_LEN  2
#define ADD_ATTEMPTS 1000 /* contention bound for other deltas */

static rdzv__etcd_backend *self(rdzv__backend *b)
{
    return (rdzv__etcd_backend *)b;
}

int rdzv__etcd_full_key(rdzv__etcd_backend *b, const char *key, char *out, size_t cap)
{
    size_t len = strlen(key);
    if (b->prefix_len + len + 1 > cap)
        return elastic__fail(ELASTIC_EINVAL, "etcd: key \"%.60s\" is too long", key);
    memcpy(out, b->prefix, b->prefix_len);
    memcpy(out + b->prefix_len, key, len + 1);
    return 0;
}

int rdzv__etcd_kv_value(json_object *kv, char **value, size_t *len)
{
    int rc = etcd__unb64(etcd__json_field(kv, "value", json_type_string), value, len);
    if (rc != 0 || *len != COUNTER_LEN || memcmp(*value, COUNTER, COUNTER_LEN) != 0) return rc;
    int64_t version = 0;
    rc = etcd__json_i64(kv, "version", 0, &version);
    free(*value);
    *value = NULL;
    if (rc != 0 || version < 1)
        return rc != 0 ? rc : elastic__fail(ELASTIC_EPROTO, "etcd: counter without a version");
    char text[24];
    int n = snprintf(text, sizeof text, "%" PRId64, version);
    *value = elastic__strdup(text);
    *len = (size_t)n;
    return *value != NULL ? 0 : elastic__fail(ELASTIC_ENOMEM, "etcd: out of memory");
}

/* ---- request builders ---- */

json_object *rdzv__etcd_key_object(rdzv__etcd_backend *b, const char *key)
{
    char full[512];
    if (rdzv__etcd_full_key(b, key, full, sizeof full) != 0) return NULL;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "key", etcd__b64(full, strlen(full)));
    return o;
}

json_object *rdzv__etcd_put_object(rdzv__etcd_backend *b, const char *key, const void *value,
                                   size_t len, int64_t lease, bool prev_kv)
{
    json_object *o = rdzv__etcd_key_object(b, key), *encoded = etcd__b64(value, len);
    if (o == NULL || encoded == NULL) {
        json_object_put(o);
        json_object_put(encoded);
        return NULL;
    }
    json_object_object_add(o, "value", encoded);
    if (lease != 0) json_object_object_add(o, "lease", json_object_new_int64(lease));
    if (prev_kv) json_object_object_add(o, "prev_kv", json_object_new_boolean(1));
    return o;
}

static json_object *wrap(const char *name, json_object *inner)
{
    if (inner == NULL) return NULL;
    json_object *o = json_object_new_object();
    json_object_object_add(o, name, inner);
    return o;
}

/* compare: "VALUE" == value, or "CREATE"/"MOD" == revision, "VERSION" == version. */
static json_object *compare_object(rdzv__etcd_backend *b, const char *key, const char *target,
                                   const void *value, size_t len, int64_t revision)
{
    json_object *o = rdzv__etcd_key_object(b, key);
    if (o == NULL) return NULL;
    json_object_object_add(o, "target", json_object_new_string(target));
    json_object_object_add(o, "result", json_object_new_string("EQUAL"));
    if (strcmp(target, "VALUE") == 0)
        json_object_object_add(o, "value", etcd__b64(value, len));
    else if (strcmp(target, "CREATE") == 0)
        json_object_object_add(o, "create_revision", json_object_new_int64(revision));
    else if (strcmp(target, "VERSION") == 0)
        json_object_object_add(o, "version", json_object_new_int64(revision));
    else
        json_object_object_add(o, "mod_revision", json_object_new_int64(revision));
    return o;
}

/* A Txn of one compare, one success op, and a read of key on failure. */
static int txn(rdzv__etcd_backend *b, json_object *compare, json_object *success, const char *key,
               json_object **reply, bool *succeeded)
{
    *reply = NULL;
    if (compare == NULL || success == NULL) {
        json_object_put(compare);
        json_object_put(success);
        return elastic__fail(ELASTIC_ELIMIT, "etcd: key \"%.60s\" or its value is too large", key);
    }
    json_object *body = json_object_new_object(), *cmp = json_object_new_array(),
                *ok = json_object_new_array(), *fail = json_object_new_array();
    if (compare != NULL) json_object_array_add(cmp, compare);
    json_object_array_add(ok, success);
    json_object_array_add(fail, wrap("request_range", rdzv__etcd_key_object(b, key)));
    json_object_object_add(body, "compare", cmp);
    json_object_object_add(body, "success", ok);
    json_object_object_add(body, "failure", fail);
    int rc = etcd__call(b->client, "/v3/kv/txn", body, 0, false, reply);
    if (rc != 0) return rc;
    json_object *flag = etcd__json_field(*reply, "succeeded", json_type_boolean);
    *succeeded = flag != NULL && json_object_get_boolean(flag);
    return 0;
}

/* The kv the n-th response of a Txn carries: response_range's first kv or
 * response_put's prev_kv. NULL when none. */
static json_object *txn_kv(json_object *reply, const char *kind, const char *field)
{
    json_object *responses = etcd__json_field(reply, "responses", json_type_array);
    if (responses == NULL || json_object_array_length(responses) < 1) return NULL;
    json_object *inner =
        etcd__json_field(json_object_array_get_idx(responses, 0), kind, json_type_object);
    if (strcmp(field, "kvs") == 0) {
        json_object *kvs = etcd__json_field(inner, "kvs", json_type_array);
        if (kvs == NULL || json_object_array_length(kvs) < 1) return NULL;
        json_object *kv = json_object_array_get_idx(kvs, 0);
        return json_object_is_type(kv, json_type_object) ? kv : NULL;
    }
    return etcd__json_field(inner, field, json_type_object);
}

/* ---- operations ---- */

static int etcd_get(rdzv__backend *base, const char *key, void **value, size_t *len)
{
    rdzv__etcd_backend *b = self(base);
    *value = NULL;
    *len = 0;
    json_object *reply = NULL;
    int rc = etcd__call(b->client, "/v3/kv/range", rdzv__etcd_key_object(b, key), 0, false, &reply);
    if (rc == 0) {
        json_object *kvs = etcd__json_field(reply, "kvs", json_type_array);
        json_object *kv = kvs != NULL && json_object_array_length(kvs) > 0
                              ? json_object_array_get_idx(kvs, 0)
                              : NULL;
        if (kv == NULL || !json_object_is_type(kv, json_type_object))
            rc = ELASTIC_ENOTFOUND;
        else
            rc = rdzv__etcd_kv_value(kv, (char **)value, len);
    }
    json_object_put(reply);
    rdzv__count(base, strlen(key), rc == 0 ? *len : 0);
    return rc;
}

static int etcd_set(rdzv__backend *base, const char *key, const void *value, size_t len)
{
    json_object *reply = NULL;
    rdzv__count(base, strlen(key) + len, 0);
    int rc =
        etcd__call(self(base)->client, "/v3/kv/put",
                   rdzv__etcd_put_object(self(base), key, value, len, 0, false), 0, false, &reply);
    json_object_put(reply);
    return rc;
}

static int etcd_set_leased(rdzv__backend *base, const char *key, const void *value, size_t len,
                           uint64_t lease)
{
    json_object *reply = NULL;
    rdzv__count(base, strlen(key) + len + 8, 0);
    int rc = etcd__call(self(base)->client, "/v3/kv/put",
                        rdzv__etcd_put_object(self(base), key, value, len, (int64_t)lease, false),
                        0, false, &reply);
    json_object_put(reply);
    return rc;
}

size_t rdzv__etcd_txn_ops(rdzv__etcd_backend *b)
{
    return (size_t)__atomic_load_n(&b->txn_ops, __ATOMIC_RELAXED);
}

bool rdzv__etcd_txn_refused(rdzv__etcd_backend *b, size_t ops, int rc)
{
    if (rc == 0 || ops <= ETCD__MAX_TXN_OPS) return false;
    const char *why = elastic_last_error();
    /* --max-txn-ops ("too many operations in txn request"), --max-request-bytes
     * ("request is too large"), gRPC's own receive limit ("larger than max") */
    if (strstr(why, "too many operations") == NULL && strstr(why, "too large") == NULL &&
        strstr(why, "larger than max") == NULL)
        return false;
    __atomic_store_n(&b->txn_ops, ETCD__MAX_TXN_OPS, __ATOMIC_RELAXED);
    ELASTIC_LOG_D("rdzv", "etcd refused a Txn of %zu ops (%s): %d per Txn from now on", ops, why,
                  ETCD__MAX_TXN_OPS);
    return true;
}

/* One Txn per rdzv__etcd_txn_ops keys: each chunk is atomic; the rendezvous needs
 * no atomicity across them (every reader waits for its own key). */
static int etcd_multi_set(rdzv__backend *base, const char *const *keys, const void *const *values,
                          const size_t *lens, size_t n)
{
    rdzv__etcd_backend *b = self(base);
    for (size_t first = 0; first < n;) {
        size_t step = rdzv__etcd_txn_ops(b);
        size_t last = first + step < n ? first + step : n, sent = 0;
        json_object *body = json_object_new_object(), *ops = json_object_new_array();
        json_object_object_add(body, "success", ops);
        for (size_t i = first; i < last; i++) {
            json_object *put = rdzv__etcd_put_object(b, keys[i], values[i], lens[i], 0, false);
            if (put == NULL) {
                json_object_put(body);
                return elastic__fail(ELASTIC_ELIMIT,
                                     "etcd: key \"%.60s\" or its value is too large", keys[i]);
            }
            json_object_array_add(ops, wrap("request_put", put));
            sent += strlen(keys[i]) + lens[i];
        }
        rdzv__count(base, sent, 0);
        json_object *reply = NULL;
        int rc = etcd__call(b->client, "/v3/kv/txn", body, 0, false, &reply);
        json_object_put(reply);
        if (rdzv__etcd_txn_refused(b, last - first, rc)) continue; /* the same keys, smaller */
        if (rc != 0) return rc;
        first = last;
    }
    return 0;
}

static int etcd_del(rdzv__backend *base, const char *key)
{
    json_object *reply = NULL;
    rdzv__count(base, strlen(key), 0);
    int rc = etcd__call(self(base)->client, "/v3/kv/deleterange",
                        rdzv__etcd_key_object(self(base), key), 0, false, &reply);
    if (rc == 0) {
        int64_t deleted = 0;
        rc = etcd__json_i64(reply, "deleted", 0, &deleted);
        if (rc == 0 && deleted == 0) rc = ELASTIC_ENOTFOUND;
    }
    json_object_put(reply);
    return rc;
}

/* One DeleteRange over [prefix, the first key after it): one Raft write. */
static int etcd_del_prefix(rdzv__backend *base, const char *prefix)
{
    rdzv__etcd_backend *b = self(base);
    char full[512], end[512];
    int rc = rdzv__etcd_full_key(b, prefix, full, sizeof full);
    if (rc != 0) return rc;
    if (prefix[0] == '\0')
        return elastic__fail(ELASTIC_EINVAL, "etcd: del_prefix of the whole run refused");
    etcd__range_end(full, end, sizeof end);
    json_object *body = json_object_new_object(), *reply = NULL;
    json_object_object_add(body, "key", etcd__b64(full, strlen(full)));
    json_object_object_add(body, "range_end", etcd__b64(end, strlen(end)));
    rdzv__count(base, strlen(prefix), 0);
    rc = etcd__call(b->client, "/v3/kv/deleterange", body, 0, false, &reply);
    json_object_put(reply);
    return rc;
}

static int etcd_compare_set(rdzv__backend *base, const char *key, const void *expected, size_t elen,
                            const void *desired, size_t dlen, void **current, size_t *clen)
{
    rdzv__etcd_backend *b = self(base);
    *current = NULL;
    *clen = 0;
    json_object *compare = expected != NULL ? compare_object(b, key, "VALUE", expected, elen, 0)
                                            : compare_object(b, key, "CREATE", NULL, 0, 0);
    json_object *reply = NULL;
    bool succeeded = false;
    /* Re-sending a compare-and-set is harmless: if the first one applied,
     * the second fails its compare and reads back what the first wrote. */
    int rc =
        txn(b, compare, wrap("request_put", rdzv__etcd_put_object(b, key, desired, dlen, 0, false)),
            key, &reply, &succeeded);
    if (rc == 0 && succeeded) {
        *current = malloc(dlen + 1);
        if (*current == NULL)
            rc = elastic__fail(ELASTIC_ENOMEM, "etcd: out of memory");
        else
            memcpy(*current, desired, dlen), ((char *)*current)[dlen] = '\0', *clen = dlen;
    } else if (rc == 0) {
        json_object *kv = txn_kv(reply, "response_range", "kvs");
        if (kv != NULL) rc = rdzv__etcd_kv_value(kv, (char **)current, clen);
    }
    json_object_put(reply);
    rdzv__count(base, strlen(key) + elen + dlen, rc == 0 ? *clen : 0);
    return rc;
}

/* add(+1) on a counter as one Txn, nested so that no race costs a retry:
 * "if the key holds the marker, Put it again (prev_kv: the result is the
 * previous version + 1); else if it is absent (version 0), create it (1);
 * else read it" (a plain number: the caller's compare-and-set loop). etcd
 * applies a Txn atomically, so the inner compare sees what the outer one saw.
 * The same object is a request_txn inside add_get's Txn. */
static json_object *add_txn_body(rdzv__etcd_backend *b, const char *key)
{
    json_object *bump =
        wrap("request_put", rdzv__etcd_put_object(b, key, COUNTER, COUNTER_LEN, 0, true));
    json_object *create =
        wrap("request_put", rdzv__etcd_put_object(b, key, COUNTER, COUNTER_LEN, 0, false));
    json_object *read = wrap("request_range", rdzv__etcd_key_object(b, key));
    json_object *is_counter = compare_object(b, key, "VALUE", COUNTER, COUNTER_LEN, 0);
    json_object *absent = compare_object(b, key, "VERSION", NULL, 0, 0);
    if (bump == NULL || create == NULL || read == NULL || is_counter == NULL || absent == NULL) {
        json_object_put(bump);
        json_object_put(create);
        json_object_put(read);
        json_object_put(is_counter);
        json_object_put(absent);
        return NULL;
    }
    json_object *inner = json_object_new_object(), *list = json_object_new_array();
    json_object_array_add(list, absent);
    json_object_object_add(inner, "compare", list);
    list = json_object_new_array();
    json_object_array_add(list, create);
    json_object_object_add(inner, "success", list);
    list = json_object_new_array();
    json_object_array_add(list, read);
    json_object_object_add(inner, "failure", list);
    json_object *outer = json_object_new_object();
    list = json_object_new_array();
    json_object_array_add(list, is_counter);
    json_object_object_add(outer, "compare", list);
    list = json_object_new_array();
    json_object_array_add(list, bump);
    json_object_object_add(outer, "success", list);
    list = json_object_new_array();
    json_object_array_add(list, wrap("request_txn", inner));
    json_object_object_add(outer, "failure", list);
    return outer;
}

static bool txn_succeeded(json_object *reply)
{
    json_object *flag = etcd__json_field(reply, "succeeded", json_type_boolean);
    return flag != NULL && json_object_get_boolean(flag);
}

/* The outcome of add_txn_body's Txn (a reply, or a response_txn): *result,
 * or *not_counter with the plain number and its mod_revision. */
static int add_txn_result(json_object *reply, const char *key, int64_t *result, bool *not_counter,
                          int64_t *mod_revision, int64_t *current)
{
    if (txn_succeeded(reply)) {
        json_object *kv = txn_kv(reply, "response_put", "prev_kv");
        int64_t version = 0;
        int rc = kv != NULL
                     ? etcd__json_i64(kv, "version", 0, &version)
                     : elastic__fail(ELASTIC_EPROTO, "etcd: add: no previous version in the reply");
        if (rc == 0) *result = version + 1;
        return rc;
    }
    json_object *responses = etcd__json_field(reply, "responses", json_type_array);
    json_object *inner = responses != NULL && json_object_array_length(responses) == 1
                             ? etcd__json_field(json_object_array_get_idx(responses, 0),
                                                "response_txn", json_type_object)
                             : NULL;
    if (inner == NULL) return elastic__fail(ELASTIC_EPROTO, "etcd: add: malformed Txn reply");
    if (txn_succeeded(inner)) { /* created */
        *result = 1;
        return 0;
    }
    json_object *kv = txn_kv(inner, "response_range", "kvs");
    if (kv == NULL) /* deleted between the two compares: impossible within one Txn */
        return elastic__fail(ELASTIC_EPROTO, "etcd: add: %s neither absent nor present", key);
    char *value = NULL;
    size_t len = 0;
    int rc = rdzv__etcd_kv_value(kv, &value, &len);
    if (rc == 0) rc = etcd__json_i64(kv, "mod_revision", 0, mod_revision);
    *current = 0;
    if (rc == 0 && elastic__parse_i64_n(NULL, value, len, INT64_MIN, INT64_MAX, current) != 0)
        rc = elastic__fail(ELASTIC_EINVAL, "etcd: add: key %s holds no integer", key);
    free(value);
    *not_counter = true;
    return rc;
}

static int add_one(rdzv__etcd_backend *b, const char *key, int64_t *result, bool *not_counter,
                   int64_t *mod_revision, int64_t *current)
{
    json_object *body = add_txn_body(b, key), *reply = NULL;
    if (body == NULL) return elastic__fail(ELASTIC_ELIMIT, "etcd: key \"%.60s\" is too long", key);
    int rc = etcd__call(b->client, "/v3/kv/txn", body, 0, false, &reply);
    if (rc == 0) rc = add_txn_result(reply, key, result, not_counter, mod_revision, current);
    json_object_put(reply);
    return rc;
}

static int etcd_add(rdzv__backend *base, const char *key, int64_t delta, int64_t *result)
{
    rdzv__etcd_backend *b = self(base);
    rdzv__count(base, strlen(key) + 8, 8);
    bool not_counter = delta != 1;
    int64_t mod_revision = 0, current = 0;
    if (!not_counter) {
        int rc = add_one(b, key, result, &not_counter, &mod_revision, &current);
        if (rc != 0 || !not_counter) return rc;
    }
    /* A plain decimal value (or delta != 1): compare-and-set on mod_revision. */
    for (int attempt = 0; attempt < ADD_ATTEMPTS; attempt++) {
        if (mod_revision == 0 && attempt > 0) current = 0;
        if ((delta > 0 && current > INT64_MAX - delta) ||
            (delta < 0 && current < INT64_MIN - delta))
            return elastic__fail(ELASTIC_ERANGE, "etcd: add on %s overflows", key);
        char text[24];
        int n = snprintf(text, sizeof text, "%" PRId64, current + delta);
        json_object *compare = mod_revision != 0
                                   ? compare_object(b, key, "MOD", NULL, 0, mod_revision)
                                   : compare_object(b, key, "CREATE", NULL, 0, 0);
        json_object *reply = NULL;
        bool succeeded = false;
        int rc = txn(b, compare,
                     wrap("request_put", rdzv__etcd_put_object(b, key, text, (size_t)n, 0, false)),
                     key, &reply, &succeeded);
        if (rc == 0 && succeeded) *result = current + delta;
        json_object *kv = rc == 0 && !succeeded ? txn_kv(reply, "response_range", "kvs") : NULL;
        mod_revision = 0;
        if (kv != NULL) {
            char *value = NULL;
            size_t len = 0;
            rc = rdzv__etcd_kv_value(kv, &value, &len);
            if (rc == 0) rc = etcd__json_i64(kv, "mod_revision", 0, &mod_revision);
            if (rc == 0 &&
                elastic__parse_i64_n(NULL, value, len, INT64_MIN, INT64_MAX, &current) != 0)
                rc = elastic__fail(ELASTIC_EINVAL, "etcd: add: key %s holds no integer", key);
            free(value);
        }
        json_object_put(reply);
        if (rc != 0 || succeeded) return rc;
    }
    return elastic__fail(ELASTIC_EBUSY, "etcd: add on %s lost %d races", key, ADD_ATTEMPTS);
}

/* The value of a Txn's response_range (NULL, 0 when the key is absent). */
static int range_value(json_object *response, void **value, size_t *len)
{
    json_object *range = etcd__json_field(response, "response_range", json_type_object);
    json_object *kvs = etcd__json_field(range, "kvs", json_type_array);
    json_object *kv =
        kvs != NULL && json_object_array_length(kvs) > 0 ? json_object_array_get_idx(kvs, 0) : NULL;
    *value = NULL;
    *len = 0;
    if (kv == NULL || !json_object_is_type(kv, json_type_object)) return 0;
    return rdzv__etcd_kv_value(kv, (char **)value, len);
}

#define ADD_GET_MAX_ADDS 8 /* a join adds one or two */

/* The reads of a Txn whose guard held (add_get_unless): the failure branch's
 * Ranges, one per key. */
static int guarded_reads(json_object *reply, size_t n_get, void **values, size_t *lens,
                         size_t *received)
{
    json_object *responses = etcd__json_field(reply, "responses", json_type_array);
    if (responses == NULL || json_object_array_length(responses) != n_get)
        return elastic__fail(ELASTIC_EPROTO, "etcd: a Txn of %zu reads answered with another count",
                             n_get);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n_get; i++) {
        rc = range_value(json_object_array_get_idx(responses, i), &values[i], &lens[i]);
        *received += lens[i];
    }
    return rc;
}

/* n_add counters +1, then n_get reads, in one Txn: "if every counter holds
 * the marker, Put each again" (prev_kv: the results), else each as
 * add_txn_body's nested Txn (absent: create). The reads follow the adds in
 * either branch, and a read in a Txn sees the Txn's earlier writes, so they
 * see the state right after the adds with no other client's write in
 * between. A counter that holds a plain number goes through etcd_add's loop
 * on its own afterwards, and then the reads are made again. One Raft round
 * (the adds) and one request for what the store does in one batch. With
 * unless_key: that Txn nested in one that makes it only while unless_key is
 * absent (else it reads the keys alone: *added false). */
/* add_get's Txn: per add, the compare "holds the marker" with a Put in the
 * success branch and add_txn_body's nested Txn in the failure branch; per
 * read, a Range in both. *sent: the payload bytes. */
static int add_get_body(rdzv__etcd_backend *b, const char *const *add_keys, size_t n_add,
                        const char *const *get_keys, size_t n_get, json_object **out, size_t *sent)
{
    json_object *body = json_object_new_object(), *compare = json_object_new_array(),
                *success = json_object_new_array(), *failure = json_object_new_array();
    json_object_object_add(body, "compare", compare);
    json_object_object_add(body, "success", success);
    json_object_object_add(body, "failure", failure);
    *out = NULL;
    *sent = 0;
    for (size_t i = 0; i < n_add + n_get; i++) {
        const char *key = i < n_add ? add_keys[i] : get_keys[i - n_add];
        *sent += strlen(key) + (i < n_add ? 8 : 0);
        json_object *is_counter = NULL, *first = NULL, *second = NULL;
        if (i < n_add) {
            is_counter = compare_object(b, key, "VALUE", COUNTER, COUNTER_LEN, 0);
            first =
                wrap("request_put", rdzv__etcd_put_object(b, key, COUNTER, COUNTER_LEN, 0, true));
            second = wrap("request_txn", add_txn_body(b, key));
        } else {
            first = wrap("request_range", rdzv__etcd_key_object(b, key));
            second = wrap("request_range", rdzv__etcd_key_object(b, key));
        }
        if ((i < n_add && is_counter == NULL) || first == NULL || second == NULL) {
            json_object_put(is_counter);
            json_object_put(first);
            json_object_put(second);
            json_object_put(body);
            return elastic__fail(ELASTIC_ELIMIT, "etcd: key \"%.60s\" is too long", key);
        }
        if (is_counter != NULL) json_object_array_add(compare, is_counter);
        json_object_array_add(success, first);
        json_object_array_add(failure, second);
    }
    *out = body;
    return 0;
}

/* *body nested in a Txn made only while unless_key is absent, whose failure
 * branch reads the keys alone. */
static int guard_body(rdzv__etcd_backend *b, const char *unless_key, const char *const *get_keys,
                      size_t n_get, json_object **body)
{
    json_object *guard = compare_object(b, unless_key, "CREATE", NULL, 0, 0),
                *outer = json_object_new_object(), *list = json_object_new_array();
    if (guard == NULL) {
        json_object_put(outer);
        json_object_put(list);
        json_object_put(*body);
        *body = NULL;
        return elastic__fail(ELASTIC_ELIMIT, "etcd: key \"%.60s\" is too long", unless_key);
    }
    json_object_array_add(list, guard);
    json_object_object_add(outer, "compare", list);
    list = json_object_new_array();
    json_object_array_add(list, wrap("request_txn", *body));
    json_object_object_add(outer, "success", list);
    list = json_object_new_array();
    for (size_t i = 0; i < n_get; i++)
        json_object_array_add(list, wrap("request_range", rdzv__etcd_key_object(b, get_keys[i])));
    json_object_object_add(outer, "failure", list);
    *body = outer;
    return 0;
}

/* The adds' results from the Txn's responses: from the Puts' prev_kv when
 * every counter held the marker (all), else from each nested Txn, where
 * plain[i] says a counter held a plain number (*any: one did). */
static int take_sums(json_object *responses, bool all, const char *const *add_keys, size_t n_add,
                     int64_t *sums, bool *plain, bool *any)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n_add; i++) {
        json_object *one = json_object_array_get_idx(responses, i);
        if (all) {
            json_object *put = etcd__json_field(one, "response_put", json_type_object);
            json_object *kv = etcd__json_field(put, "prev_kv", json_type_object);
            int64_t version = 0;
            rc = kv != NULL
                     ? etcd__json_i64(kv, "version", 0, &version)
                     : elastic__fail(ELASTIC_EPROTO, "etcd: add: no previous version in the reply");
            sums[i] = version + 1;
        } else {
            int64_t mod_revision = 0, current = 0;
            json_object *nested = etcd__json_field(one, "response_txn", json_type_object);
            rc = nested != NULL ? add_txn_result(nested, add_keys[i], &sums[i], &plain[i],
                                                 &mod_revision, &current)
                                : elastic__fail(ELASTIC_EPROTO, "etcd: add: malformed Txn reply");
            *any |= plain[i];
        }
    }
    return rc;
}

static void clear_values(void **values, size_t *lens, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(values[i]);
        values[i] = NULL;
        lens[i] = 0;
    }
}

static int add_get_guarded(rdzv__backend *base, const char *unless_key, const char *const *add_keys,
                           size_t n_add, int64_t *sums, const char *const *get_keys, size_t n_get,
                           void **values, size_t *lens, bool *added)
{
    rdzv__etcd_backend *b = self(base);
    *added = false;
    for (size_t i = 0; i < n_get; i++) values[i] = NULL, lens[i] = 0;
    for (size_t i = 0; i < n_add; i++) sums[i] = 0;
    if (n_add < 1 || n_add > ADD_GET_MAX_ADDS || n_add + n_get > ETCD__MAX_TXN_OPS)
        return elastic__fail(ELASTIC_EINVAL, "etcd: add_get of %zu adds and %zu reads", n_add,
                             n_get);
    json_object *body = NULL, *reply = NULL;
    size_t sent = 0;
    int rc = add_get_body(b, add_keys, n_add, get_keys, n_get, &body, &sent);
    if (rc == 0 && unless_key != NULL) {
        rc = guard_body(b, unless_key, get_keys, n_get, &body);
        sent += strlen(unless_key);
    }
    if (rc != 0) return rc;
    rc = etcd__call(b->client, "/v3/kv/txn", body, 0, false, &reply);
    size_t received = 8 * n_add;
    json_object *inner = reply;
    if (rc == 0 && unless_key != NULL) {
        json_object *outer = etcd__json_field(reply, "responses", json_type_array);
        if (!txn_succeeded(reply)) { /* unless_key exists: only the reads */
            rc = guarded_reads(reply, n_get, values, lens, &received);
            json_object_put(reply);
            rdzv__count(base, sent, received);
            if (rc != 0) clear_values(values, lens, n_get);
            return rc;
        }
        inner = outer != NULL && json_object_array_length(outer) == 1
                    ? etcd__json_field(json_object_array_get_idx(outer, 0), "response_txn",
                                       json_type_object)
                    : NULL;
        if (inner == NULL) rc = elastic__fail(ELASTIC_EPROTO, "etcd: add_get: malformed Txn reply");
    }
    *added = rc == 0;
    json_object *responses = rc == 0 ? etcd__json_field(inner, "responses", json_type_array) : NULL;
    if (rc == 0 && (responses == NULL || json_object_array_length(responses) != n_add + n_get))
        rc = elastic__fail(ELASTIC_EPROTO, "etcd: a Txn of %zu answered with another count",
                           n_add + n_get);
    bool plain[ADD_GET_MAX_ADDS] = { false }, any = false;
    if (rc == 0)
        rc = take_sums(responses, txn_succeeded(inner), add_keys, n_add, sums, plain, &any);
    for (size_t i = 0; rc == 0 && i < n_get; i++) {
        rc = range_value(json_object_array_get_idx(responses, n_add + i), &values[i], &lens[i]);
        received += lens[i];
    }
    json_object_put(reply);
    rdzv__count(base, sent, received);
    for (size_t i = 0; rc == 0 && i < n_add; i++)
        if (plain[i]) rc = etcd_add(base, add_keys[i], 1, &sums[i]);
    if (rc == 0 && any && n_get > 0) { /* read after every add, as the store does */
        for (size_t i = 0; i < n_get; i++) free(values[i]);
        rc = rdzv__etcd_get_some(base, get_keys, n_get, values, lens);
    }
    if (rc != 0) clear_values(values, lens, n_get);
    return rc;
}

static int etcd_add_get(rdzv__backend *base, const char *const *add_keys, size_t n_add,
                        int64_t *sums, const char *const *get_keys, size_t n_get, void **values,
                        size_t *lens)
{
    bool added = false;
    return add_get_guarded(base, NULL, add_keys, n_add, sums, get_keys, n_get, values, lens,
                           &added);
}

static int etcd_add_get_unless(rdzv__backend *base, const char *unless_key,
                               const char *const *add_keys, size_t n_add, int64_t *sums,
                               const char *const *get_keys, size_t n_get, void **values,
                               size_t *lens, bool *added)
{
    if (unless_key == NULL)
        return elastic__fail(ELASTIC_EINVAL, "etcd: add_get_unless without a key to test");
    return add_get_guarded(base, unless_key, add_keys, n_add, sums, get_keys, n_get, values, lens,
                           added);
}

int rdzv__etcd_get_some(rdzv__backend *base, const char *const *keys, size_t n, void **values,
                        size_t *lens)
{
    rdzv__etcd_backend *b = self(base);
    size_t sent = 0, received = 0;
    for (size_t i = 0; i < n; i++) {
        values[i] = NULL;
        lens[i] = 0;
        sent += strlen(keys[i]);
    }
    if (n > ETCD__MAX_TXN_OPS)
        return elastic__fail(ELASTIC_EINVAL, "etcd: get_some of %zu keys (at most %d)", n,
                             ETCD__MAX_TXN_OPS);
    json_object *body = json_object_new_object(), *ops = json_object_new_array();
    json_object_object_add(body, "success", ops);
    for (size_t i = 0; i < n; i++) {
        json_object *range = wrap("request_range", rdzv__etcd_key_object(b, keys[i]));
        if (range == NULL) {
            json_object_put(body);
            return elastic__fail(ELASTIC_ELIMIT, "etcd: key \"%.60s\" is too long", keys[i]);
        }
        json_object_array_add(ops, range);
    }
    json_object *reply = NULL;
    int rc = etcd__call(b->client, "/v3/kv/txn", body, 0, false, &reply);
    json_object *responses = rc == 0 ? etcd__json_field(reply, "responses", json_type_array) : NULL;
    if (rc == 0 && (responses == NULL || json_object_array_length(responses) != n))
        rc = elastic__fail(ELASTIC_EPROTO, "etcd: a Txn of %zu reads answered with another count",
                           n);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        json_object *range = etcd__json_field(json_object_array_get_idx(responses, i),
                                              "response_range", json_type_object);
        json_object *kvs = etcd__json_field(range, "kvs", json_type_array);
        json_object *kv = kvs != NULL && json_object_array_length(kvs) > 0
                              ? json_object_array_get_idx(kvs, 0)
                              : NULL;
        if (kv == NULL || !json_object_is_type(kv, json_type_object)) continue;
        rc = rdzv__etcd_kv_value(kv, (char **)&values[i], &lens[i]);
        received += lens[i];
    }
    json_object_put(reply);
    for (size_t i = 0; rc != 0 && i < n; i++) {
        free(values[i]);
        values[i] = NULL;
        lens[i] = 0;
    }
    rdzv__count(base, sent, received);
    return rc;
}

/* keys_at: the names and the revision etcd answered at (a watch from the
 * next one misses no change made since the listing). */
static int etcd_keys_at(rdzv__backend *base, const char *prefix, size_t max, char ***keys,
                        size_t *n, uint64_t *revision)
{
    rdzv__etcd_backend *b = self(base);
    *keys = NULL;
    *n = 0;
    char full[512], end[512];
    int rc = rdzv__etcd_full_key(b, prefix, full, sizeof full);
    if (rc != 0) return rc;
    etcd__range_end(full, end, sizeof end);
    json_object *body = json_object_new_object();
    json_object_object_add(body, "key", etcd__b64(full, strlen(full)));
    json_object_object_add(body, "range_end", etcd__b64(end, strlen(end)));
    json_object_object_add(body, "keys_only", json_object_new_boolean(1));
    json_object_object_add(body, "limit", json_object_new_int64((int64_t)max));
    json_object *reply = NULL;
    rc = etcd__call(b->client, "/v3/kv/range", body, 0, false, &reply);
    json_object *kvs = rc == 0 ? etcd__json_field(reply, "kvs", json_type_array) : NULL;
    int64_t at = 0;
    if (rc == 0 && revision != NULL) {
        rc =
            etcd__json_i64(etcd__json_field(reply, "header", json_type_object), "revision", 0, &at);
        if (rc == 0 && at <= 0)
            rc = elastic__fail(ELASTIC_EPROTO, "etcd range: no revision in the reply");
    }
    size_t count = kvs != NULL ? json_object_array_length(kvs) : 0, total = 0, received = 0;
    if (count > max) count = max;
    char **decoded = calloc(count + 1, sizeof *decoded);
    size_t *lens = calloc(count + 1, sizeof *lens);
    if (rc == 0 && (decoded == NULL || lens == NULL))
        rc = elastic__fail(ELASTIC_ENOMEM, "etcd: out of memory");
    size_t full_len = strlen(full);
    for (size_t i = 0; rc == 0 && i < count; i++) {
        json_object *kv = json_object_array_get_idx(kvs, i);
        rc = etcd__unb64(etcd__json_field(kv, "key", json_type_string), &decoded[i], &lens[i]);
        if (rc == 0 && (lens[i] < full_len || memcmp(decoded[i], full, full_len) != 0))
            rc = elastic__fail(ELASTIC_EPROTO, "etcd: range returned a key outside the prefix");
        if (rc == 0) total += lens[i] - b->prefix_len + 1;
    }
    /* One allocation: the pointer array, then the names. */
    char **names = rc == 0 ? malloc(count * sizeof *names + total + 1) : NULL;
    if (rc == 0 && names == NULL) rc = elastic__fail(ELASTIC_ENOMEM, "etcd: out of memory");
    char *text = names != NULL ? (char *)(names + count) : NULL;
    for (size_t i = 0; decoded != NULL && i < count; i++) {
        if (rc == 0) {
            size_t len = lens[i] - b->prefix_len;
            memcpy(text, decoded[i] + b->prefix_len, len + 1);
            names[i] = text;
            text += len + 1;
            received += len;
        }
        free(decoded[i]);
    }
    free(decoded);
    free(lens);
    json_object_put(reply);
    rdzv__count(base, strlen(prefix) + 8, received);
    if (rc != 0) return rc;
    *keys = names;
    *n = count;
    if (revision != NULL) *revision = (uint64_t)at;
    return 0;
}

static int etcd_keys(rdzv__backend *base, const char *prefix, size_t max, char ***keys, size_t *n)
{
    return etcd_keys_at(base, prefix, max, keys, n, NULL);
}

static void etcd_close(rdzv__backend *base)
{
    if (base == NULL) return;
    rdzv__etcd_backend *b = self(base);
    rdzv__etcd_keeper_stop(b);
    pthread_mutex_destroy(&b->keeper.lock);
    pthread_cond_destroy(&b->keeper.wake);
    etcd__client_close(b->client);
    free(b);
}

/* etcd outlives its clients (its keeper reports a lost lease) and its
 * watch events carry values: see backend.h. */
static const rdzv__backend_ops etcd_ops = {
    .outlives_clients = true,
    .watch_gives_end = true,
    .get = etcd_get,
    .multi_get = rdzv__etcd_multi_get,
    .set = etcd_set,
    .multi_set = etcd_multi_set,
    .del = etcd_del,
    .add = etcd_add,
    .compare_set = etcd_compare_set,
    .watch = rdzv__etcd_watch,
    .keys = etcd_keys,
    .lease_grant = rdzv__etcd_lease_grant,
    .lease_revoke = rdzv__etcd_lease_revoke,
    .set_leased = etcd_set_leased,
    .lease_check = rdzv__etcd_lease_check,
    .del_prefix = etcd_del_prefix,
    .add_get = etcd_add_get,
    .add_get_unless = etcd_add_get_unless,
    .set_leased_wait = rdzv__etcd_set_leased_wait,
    .keys_at = etcd_keys_at,
    .watch_area = rdzv__etcd_watch_area,
    .close = etcd_close,
};

int rdzv__backend_etcd_open(const rdzv__etcd_conf *conf, const char *run_id,
                            rdzv__backend **backend)
{
    *backend = NULL;
    const char *root = conf->prefix != NULL && conf->prefix[0] != '\0' ? conf->prefix : "/elastic";
    if (strlen(root) > 128 || strchr(root, ' ') != NULL)
        return elastic__fail(ELASTIC_EINVAL,
                             "etcd: prefix must be up to 128 characters without spaces");
    rdzv__etcd_backend *b = calloc(1, sizeof *b);
    if (b == NULL) return elastic__fail(ELASTIC_ENOMEM, "etcd: out of memory");
    b->base.ops = &etcd_ops;
    b->txn_ops = RDZV__ETCD_BIG_TXN_OPS;
    size_t root_len = strlen(root);
    while (root_len > 0 && root[root_len - 1] == '/') root_len--;
    snprintf(b->prefix, sizeof b->prefix, "%.*s/%s/rdzv/", (int)root_len, root, run_id);
    b->prefix_len = strlen(b->prefix);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&b->keeper.lock, NULL);
    pthread_cond_init(&b->keeper.wake, &attr);
    pthread_condattr_destroy(&attr);
    etcd__opts opts = { .endpoints = conf->endpoints,
                        .ca_file = conf->ca_file,
                        .cert_file = conf->cert_file,
                        .key_file = conf->key_file,
                        .user = conf->user,
                        .password = conf->password,
                        .timeout_ms = conf->timeout_ms };
    int rc = etcd__client_open(&opts, &b->client);
    if (rc != 0) {
        etcd_close(&b->base);
        return rc;
    }
    etcd__client_count_wire(b->client, &b->base.traffic.wire_bytes);
    *backend = &b->base;
    return 0;
}
