/*
 * JSON pieces of etcd's gateway: keys and values travel as base64, 64-bit
 * numbers as decimal strings. Every field read back is type-checked and
 * bounded here so the callers see only valid data.
 */
#include "etcd/etcd.h"
#include "common/parse_int.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>

json_object *etcd__b64(const void *data, size_t len)
{
    if (len > ETCD__MAX_VALUE) return NULL;
    size_t cap = 4 * ((len + 2) / 3) + 1;
    unsigned char *text = malloc(cap);
    if (text == NULL) return NULL;
    int n = EVP_EncodeBlock(text, data, (int)len);
    json_object *out = json_object_new_string_len((const char *)text, n);
    free(text);
    return out;
}

int etcd__unb64(json_object *value, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    if (value == NULL) { /* the gateway leaves empty values out */
        *out = calloc(1, 1);
        return *out != NULL ? 0 : elastic__fail(ELASTIC_ENOMEM, "etcd: out of memory");
    }
    if (!json_object_is_type(value, json_type_string))
        return elastic__fail(ELASTIC_EPROTO, "etcd: a key or value is not a base64 string");
    size_t text_len = (size_t)json_object_get_string_len(value);
    const char *text = json_object_get_string(value);
    if (text_len % 4 != 0 || text_len / 4 * 3 > ETCD__MAX_VALUE)
        return elastic__fail(ELASTIC_EPROTO, "etcd: malformed or oversized base64 (%zu characters)",
                             text_len);
    char *buf = malloc(text_len / 4 * 3 + 1);
    if (buf == NULL) return elastic__fail(ELASTIC_ENOMEM, "etcd: out of memory");
    int n = text_len > 0
                ? EVP_DecodeBlock((unsigned char *)buf, (const unsigned char *)text, (int)text_len)
                : 0;
    if (n < 0) {
        free(buf);
        return elastic__fail(ELASTIC_EPROTO, "etcd: malformed base64");
    }
    /* EVP_DecodeBlock counts the padding as zero bytes. */
    if (text_len > 0 && text[text_len - 1] == '=') n--;
    if (text_len > 1 && text[text_len - 2] == '=') n--;
    buf[n] = '\0';
    *out = buf;
    *len = (size_t)n;
    return 0;
}

int etcd__json_i64(json_object *obj, const char *field, int64_t dflt, int64_t *out)
{
    json_object *value = NULL;
    *out = dflt;
    if (obj == NULL || !json_object_object_get_ex(obj, field, &value) || value == NULL) return 0;
    if (json_object_is_type(value, json_type_int)) {
        *out = json_object_get_int64(value);
        return 0;
    }
    if (!json_object_is_type(value, json_type_string))
        return elastic__fail(ELASTIC_EPROTO, "etcd: field %s is neither a number nor a string",
                             field);
    const char *text = json_object_get_string(value);
    int64_t parsed;
    if (elastic__parse_i64(NULL, text, INT64_MIN, INT64_MAX, &parsed) != 0)
        return elastic__fail(ELASTIC_EPROTO, "etcd: field %s is not a 64-bit integer", field);
    *out = parsed;
    return 0;
}

json_object *etcd__json_field(json_object *obj, const char *field, json_type type)
{
    json_object *value = NULL;
    if (obj == NULL || !json_object_object_get_ex(obj, field, &value) || value == NULL) return NULL;
    return json_object_is_type(value, type) ? value : NULL;
}

void etcd__range_end(const char *prefix, char *out, size_t cap)
{
    snprintf(out, cap, "%s", prefix);
    size_t len = strlen(out);
    /* Our prefixes end in '/', never in 0xff: bump the last byte. */
    if (len > 0) out[len - 1] = (char)(out[len - 1] + 1);
}
