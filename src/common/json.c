/*
 * The bounded JSON reader (json.h): json-c does the parsing; this file adds
 * the limits a hostile or truncated file needs (length, depth, one whole
 * value, no embedded NUL in the text) and the type-checked field reads.
 */
#include "common/json.h"

#include "common/common.h"

#include <math.h>
#include <string.h>

/* json-c's tokenizer accepts a few non-JSON spellings (NaN, Infinity, single
 * quotes, trailing commas) unless told to be strict. */
#define JSON__TOKENER_FLAGS JSON_TOKENER_STRICT

/* JSON allows no raw control bytes (strings escape them); json-c lets some
 * through inside strings even when strict, so they are refused here. */
static bool has_control_byte(const char *text, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c < 0x20 && c != ' ' && c != '\t' && c != '\r' && c != '\n') return true;
    }
    return false;
}

static bool only_space(const char *text, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (strchr(" \t\r\n", text[i]) == NULL) return false;
    return true;
}

int json__parse(const char *text, size_t len, json_object **out)
{
    *out = NULL;
    if (len > JSON__MAX_INPUT)
        return elastic__fail(ELASTIC_EPROTO, "JSON: a text of %zu bytes (at most %u)", len,
                             JSON__MAX_INPUT);
    if (has_control_byte(text, len))
        return elastic__fail(ELASTIC_EPROTO, "JSON: a raw control byte in the text");
    json_tokener *tok = json_tokener_new_ex(JSON__MAX_DEPTH);
    if (tok == NULL) return elastic__fail(ELASTIC_ENOMEM, "out of memory");
    json_tokener_set_flags(tok, JSON__TOKENER_FLAGS);
    json_object *value = json_tokener_parse_ex(tok, text, (int)len);
    enum json_tokener_error err = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    int rc = 0;
    if (err == json_tokener_continue)
        rc = elastic__fail(ELASTIC_EPROTO, "JSON: the text ends inside a value");
    else if (err != json_tokener_success)
        rc = elastic__fail(ELASTIC_EPROTO, "JSON: %s", json_tokener_error_desc(err));
    else if (!only_space(text + end, len - end))
        rc = elastic__fail(ELASTIC_EPROTO, "JSON: the text goes on after its value");
    if (rc != 0) {
        json_object_put(value);
        return rc;
    }
    *out = value;
    return 0;
}

json_object *json__get(json_object *obj, const char *key)
{
    json_object *value = NULL;
    if (obj == NULL || !json_object_is_type(obj, json_type_object)) return NULL;
    return json_object_object_get_ex(obj, key, &value) ? value : NULL;
}

const char *json__get_string(json_object *obj, const char *key)
{
    json_object *value = json__get(obj, key);
    if (value == NULL || !json_object_is_type(value, json_type_string)) return NULL;
    /* An escaped NUL ("\u0000") would cut the C string short and make two
     * different names read the same: such a string is not read at all. */
    const char *text = json_object_get_string(value);
    return strlen(text) == (size_t)json_object_get_string_len(value) ? text : NULL;
}

bool json__get_int(json_object *obj, const char *key, int64_t min, int64_t max, int64_t *out)
{
    json_object *value = json__get(obj, key);
    int64_t v;
    if (value != NULL && json_object_is_type(value, json_type_int)) {
        v = json_object_get_int64(
            value); /* json-c clamps what does not fit: out of any range asked */
    } else if (value != NULL && json_object_is_type(value, json_type_double)) {
        double d = json_object_get_double(value);
        if (!isfinite(d) || d != floor(d) || d < -9.0e18 || d > 9.0e18) return false;
        v = (int64_t)d;
    } else {
        return false;
    }
    if (v < min || v > max) return false;
    *out = v;
    return true;
}
