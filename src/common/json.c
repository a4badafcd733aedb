/*
 * The bounded JSON reader (json.h): recursive descent over a length-limited
 * buffer into one arena (values and decoded strings), so a document is one
 * allocation to free and a hostile input can only be rejected.
 */
#include "common/json.h"

#include "common/common.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct json__doc {
    json__value *values;
    size_t nvalues, cap_values;
    char *strings;                   /* decoded strings, each NUL-terminated */
    size_t strings_len, strings_cap;
};

typedef struct parser {
    const char *start, *p, *end;
    json__doc *doc;
    int depth;
} parser;

static int bad(const parser *ps, const char *what)
{
    return elastic__fail(ELASTIC_EPROTO, "JSON: %s at byte %zu", what, (size_t)(ps->p - ps->start));
}

static void skip_ws(parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) ps->p++;
}

static json__value *new_value(parser *ps, json__type type)
{
    if (ps->doc->nvalues == ps->doc->cap_values) return NULL;
    json__value *v = &ps->doc->values[ps->doc->nvalues++];
    memset(v, 0, sizeof *v);
    v->type = type;
    return v;
}

static void put_byte(json__doc *doc, char c) { doc->strings[doc->strings_len++] = c; }

static void put_utf8(json__doc *doc, uint32_t cp)
{
    if (cp < 0x80) put_byte(doc, (char)cp);
    else if (cp < 0x800) put_byte(doc, (char)(0xc0 | cp >> 6)), put_byte(doc, (char)(0x80 | (cp & 0x3f)));
    else if (cp < 0x10000)
        put_byte(doc, (char)(0xe0 | cp >> 12)), put_byte(doc, (char)(0x80 | ((cp >> 6) & 0x3f))),
            put_byte(doc, (char)(0x80 | (cp & 0x3f)));
    else
        put_byte(doc, (char)(0xf0 | cp >> 18)), put_byte(doc, (char)(0x80 | ((cp >> 12) & 0x3f))),
            put_byte(doc, (char)(0x80 | ((cp >> 6) & 0x3f))), put_byte(doc, (char)(0x80 | (cp & 0x3f)));
}

static bool hex4(parser *ps, uint32_t *out)
{
    if (ps->end - ps->p < 4) return false;
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = *ps->p++;
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
        else return false;
    }
    *out = v;
    return true;
}

/* Decodes a string (ps->p after the opening quote) into the arena. The arena
 * holds at least the input's length plus one NUL per value, and a decoded
 * string is never longer than its escaped form, so it cannot overflow. */
static int parse_string(parser *ps, const char **out)
{
    json__doc *doc = ps->doc;
    *out = doc->strings + doc->strings_len;
    for (;;) {
        if (ps->p >= ps->end) return bad(ps, "unterminated string");
        unsigned char c = (unsigned char)*ps->p++;
        if (c == '"') break;
        if (c < 0x20) return bad(ps, "control character in a string");
        if (c != '\\') {
            put_byte(doc, (char)c);
            continue;
        }
        if (ps->p >= ps->end) return bad(ps, "unterminated escape");
        char e = *ps->p++;
        uint32_t cp;
        switch (e) {
        case '"': case '\\': case '/': put_byte(doc, e); break;
        case 'b': put_byte(doc, '\b'); break;
        case 'f': put_byte(doc, '\f'); break;
        case 'n': put_byte(doc, '\n'); break;
        case 'r': put_byte(doc, '\r'); break;
        case 't': put_byte(doc, '\t'); break;
        case 'u':
            if (!hex4(ps, &cp)) return bad(ps, "bad \\u escape");
            if (cp >= 0xd800 && cp < 0xdc00) { /* a surrogate pair, or U+FFFD */
                uint32_t low;
                if (ps->end - ps->p >= 6 && ps->p[0] == '\\' && ps->p[1] == 'u') {
                    ps->p += 2;
                    if (!hex4(ps, &low)) return bad(ps, "bad \\u escape");
                    cp = low >= 0xdc00 && low < 0xe000 ? 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00) : 0xfffd;
                } else {
                    cp = 0xfffd;
                }
            } else if (cp >= 0xdc00 && cp < 0xe000) {
                cp = 0xfffd;
            }
            if (cp == 0) cp = 0xfffd; /* keep strings NUL-terminated C strings */
            put_utf8(doc, cp);
            break;
        default: return bad(ps, "unknown escape");
        }
    }
    put_byte(doc, '\0');
    return 0;
}

static int parse_value(parser *ps, json__value **out);

static int parse_container(parser *ps, json__value *v, char close)
{
    if (++ps->depth > JSON__MAX_DEPTH) return bad(ps, "nested too deeply");
    json__value **link = &v->first;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        ps->depth--;
        return 0;
    }
    for (;;) {
        const char *key = NULL;
        skip_ws(ps);
        if (close == '}') {
            if (ps->p >= ps->end || *ps->p != '"') return bad(ps, "expected a key");
            ps->p++;
            int rc = parse_string(ps, &key);
            if (rc != 0) return rc;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') return bad(ps, "expected ':'");
            ps->p++;
        }
        json__value *child = NULL;
        int rc = parse_value(ps, &child);
        if (rc != 0) return rc;
        child->key = key;
        *link = child;
        link = &child->next;
        skip_ws(ps);
        if (ps->p >= ps->end) return bad(ps, "unterminated container");
        char c = *ps->p++;
        if (c == close) break;
        if (c != ',') return bad(ps, "expected ',' or the container's end");
    }
    ps->depth--;
    return 0;
}

static int parse_number(parser *ps, json__value *v)
{
    char buf[64];
    size_t n = 0;
    while (ps->p < ps->end && n + 1 < sizeof buf && strchr("+-0123456789.eE", *ps->p) != NULL) buf[n++] = *ps->p++;
    buf[n] = '\0';
    char *end = NULL;
    v->number = strtod(buf, &end);
    if (n == 0 || end != buf + n) return bad(ps, "bad number");
    return 0;
}

static bool literal(parser *ps, const char *word)
{
    size_t len = strlen(word);
    if ((size_t)(ps->end - ps->p) < len || memcmp(ps->p, word, len) != 0) return false;
    ps->p += len;
    return true;
}

static int parse_value(parser *ps, json__value **out)
{
    skip_ws(ps);
    if (ps->p >= ps->end) return bad(ps, "expected a value");
    char c = *ps->p;
    json__type type = c == '{' ? JSON__OBJECT : c == '[' ? JSON__ARRAY : c == '"' ? JSON__STRING
                    : c == 't' || c == 'f' ? JSON__BOOL : c == 'n' ? JSON__NULL : JSON__NUMBER;
    json__value *v = new_value(ps, type);
    if (v == NULL) return bad(ps, "too many values");
    *out = v;
    switch (type) {
    case JSON__OBJECT: ps->p++; return parse_container(ps, v, '}');
    case JSON__ARRAY: ps->p++; return parse_container(ps, v, ']');
    case JSON__STRING: ps->p++; return parse_string(ps, &v->string);
    case JSON__BOOL:
        if (literal(ps, "true")) v->number = 1;
        else if (!literal(ps, "false")) return bad(ps, "bad literal");
        return 0;
    case JSON__NULL: return literal(ps, "null") ? 0 : bad(ps, "bad literal");
    default: return parse_number(ps, v);
    }
}

int json__parse(const char *text, size_t len, json__doc **out)
{
    *out = NULL;
    if (len > JSON__MAX_INPUT) return elastic__fail(ELASTIC_ELIMIT, "JSON: %zu bytes is over the %u limit", len, JSON__MAX_INPUT);
    json__doc *doc = calloc(1, sizeof *doc);
    if (doc == NULL) return elastic__fail(ELASTIC_ENOMEM, "out of memory");
    /* A value needs at least one input byte, so len+1 values always suffice. */
    doc->cap_values = len + 1 < JSON__MAX_VALUES ? len + 1 : JSON__MAX_VALUES;
    doc->strings_cap = len + 2 * doc->cap_values + 1;
    doc->values = calloc(doc->cap_values, sizeof *doc->values);
    doc->strings = malloc(doc->strings_cap);
    if (doc->values == NULL || doc->strings == NULL) {
        json__free(doc);
        return elastic__fail(ELASTIC_ENOMEM, "out of memory");
    }
    parser ps = {.start = text, .p = text, .end = text + len, .doc = doc};
    json__value *root = NULL;
    int rc = parse_value(&ps, &root);
    if (rc == 0) {
        skip_ws(&ps);
        if (ps.p != ps.end) rc = bad(&ps, "trailing bytes");
    }
    if (rc != 0) {
        json__free(doc);
        return rc;
    }
    *out = doc;
    return 0;
}

const json__value *json__root(const json__doc *doc) { return doc != NULL && doc->nvalues > 0 ? &doc->values[0] : NULL; }

void json__free(json__doc *doc)
{
    if (doc == NULL) return;
    free(doc->values);
    free(doc->strings);
    free(doc);
}

const json__value *json__get(const json__value *obj, const char *key)
{
    if (obj == NULL || obj->type != JSON__OBJECT) return NULL;
    for (const json__value *v = obj->first; v != NULL; v = v->next)
        if (v->key != NULL && strcmp(v->key, key) == 0) return v;
    return NULL;
}

const char *json__get_string(const json__value *obj, const char *key)
{
    const json__value *v = json__get(obj, key);
    return v != NULL && v->type == JSON__STRING ? v->string : NULL;
}

bool json__get_number(const json__value *obj, const char *key, double *out)
{
    const json__value *v = json__get(obj, key);
    if (v == NULL || v->type != JSON__NUMBER) return false;
    *out = v->number;
    return true;
}
