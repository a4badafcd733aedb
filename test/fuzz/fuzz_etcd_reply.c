/* libFuzzer target for an etcd unary reply as the client takes it
 * (src/etcd/etcd_http.c): the raw bytes are counted against the budget
 * (json_bound.c) and only what it accepts goes to json-c, then through the
 * field decoders every reply meets (header revision, kvs' base64 keys and
 * values, their revisions). Oracle: an accepted reply parses within
 * ETCD__MAX_DEPTH; a budget over the bound always says which bound. */
#include "etcd/etcd.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void walk_kvs(json_object *kvs)
{
    size_t n = json_object_array_length(kvs);
    for (size_t i = 0; i < n; i++) {
        json_object *kv = json_object_array_get_idx(kvs, i);
        if (!json_object_is_type(kv, json_type_object)) continue;
        json_object *field = NULL;
        char *text = NULL;
        size_t len = 0;
        if (json_object_object_get_ex(kv, "key", &field) && etcd__unb64(field, &text, &len) == 0) {
            if (len > ETCD__MAX_VALUE || text[len] != '\0') abort();
            free(text);
        }
        if (json_object_object_get_ex(kv, "value", &field) &&
            etcd__unb64(field, &text, &len) == 0) {
            if (len > ETCD__MAX_VALUE) abort();
            free(text);
        }
        int64_t v;
        (void)etcd__json_i64(kv, "mod_revision", 0, &v);
        (void)etcd__json_i64(kv, "lease", 0, &v);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    etcd__json_budget budget;
    etcd__json_budget_reset(&budget);
    char why[128] = "";
    if (etcd__json_budget_add(&budget, (const char *)data, size, why, sizeof why) != 0) {
        if (why[0] == '\0') abort();
        return 0;
    }
    json_tokener *tok = etcd__json_tokener();
    if (tok == NULL) return 0;
    json_object *reply = json_tokener_parse_ex(tok, (const char *)data, (int)size);
    /* The budget counted the nesting json-c sees: never deeper than allowed. */
    if (json_tokener_get_error(tok) == json_tokener_error_depth) abort();
    json_tokener_free(tok);
    if (reply == NULL) return 0;
    if (json_object_is_type(reply, json_type_object)) {
        json_object *header = etcd__json_field(reply, "header", json_type_object);
        int64_t revision;
        if (header != NULL) (void)etcd__json_i64(header, "revision", 0, &revision);
        json_object *kvs = etcd__json_field(reply, "kvs", json_type_array);
        if (kvs != NULL) walk_kvs(kvs);
        json_object *responses = etcd__json_field(reply, "responses", json_type_array);
        for (size_t i = 0; responses != NULL && i < json_object_array_length(responses); i++) {
            json_object *r = json_object_array_get_idx(responses, i);
            json_object *range = json_object_is_type(r, json_type_object)
                                     ? etcd__json_field(r, "response_range", json_type_object)
                                     : NULL;
            json_object *inner = range ? etcd__json_field(range, "kvs", json_type_array) : NULL;
            if (inner != NULL) walk_kvs(inner);
        }
    }
    json_object_put(reply);
    return 0;
}
