/*
 * The bounded JSON writer (see json_writer.h).
 */
#include "common/json_writer.h"
#include "common/common.h"

#include <math.h>
#include <stdio.h>

void elastic__jw_init(elastic__jw *w, char *buf, size_t cap)
{
    *w = (elastic__jw){ .buf = buf, .cap = cap };
    if (cap > 0)
        buf[0] = '\0';
    else
        w->overflow = true;
}

/* Bytes free for values: the closers of the open containers stay in reserve. */
static size_t room(const elastic__jw *w)
{
    size_t reserved = w->len + (size_t)w->depth + 1;
    return w->cap > reserved ? w->cap - reserved : 0;
}

static bool put(elastic__jw *w, const char *bytes, size_t n)
{
    if (n > room(w)) return false;
    memcpy(w->buf + w->len, bytes, n);
    w->len += n;
    w->buf[w->len] = '\0';
    return true;
}

/* Starts a value: the comma before it unless it is a member's value or the
 * container's first. Returns false when the value is to be left out. */
static bool value_begin(elastic__jw *w)
{
    if (w->failed_key) return false;
    if (w->after_key) return true;
    w->member_start = w->len;
    if (w->depth > 0 && !w->first[w->depth - 1]) return put(w, ",", 1);
    return true;
}

/* Ends a value: kept, or the whole member (key included) taken back. */
static void value_end(elastic__jw *w, bool ok)
{
    if (!ok && !w->failed_key) {
        w->len = w->member_start;
        if (w->cap > 0) w->buf[w->len] = '\0';
    }
    if (!ok)
        w->overflow = true;
    else if (w->depth > 0)
        w->first[w->depth - 1] = false;
    w->after_key = false;
    w->failed_key = false;
}

static void scalar(elastic__jw *w, const char *text, size_t n)
{
    if (w->skipped > 0) return;
    bool ok = value_begin(w);
    value_end(w, ok && put(w, text, n));
}

static void open_container(elastic__jw *w, char bracket)
{
    if (w->skipped > 0) {
        w->skipped++;
        return;
    }
    bool ok = value_begin(w) && w->depth < ELASTIC__JW_MAX_DEPTH;
    /* The opener and its own closer's reserve must both fit. */
    ok = ok && room(w) >= 2 && put(w, &bracket, 1);
    if (!ok) {
        value_end(w, false);
        w->skipped = 1; /* its contents and its closer are left out with it */
        return;
    }
    if (w->depth > 0) w->first[w->depth - 1] = false;
    w->first[w->depth++] = true;
    w->after_key = w->failed_key = false;
}

static void close_container(elastic__jw *w, char bracket)
{
    if (w->skipped > 0) {
        w->skipped--;
        return;
    }
    if (w->depth == 0) {
        w->overflow = true; /* more closers than openers: a caller's bug, reported */
        return;
    }
    w->depth--; /* its reserved byte is now free */
    put(w, &bracket, 1);
}

void elastic__jw_object_begin(elastic__jw *w)
{
    open_container(w, '{');
}

void elastic__jw_object_end(elastic__jw *w)
{
    close_container(w, '}');
}

void elastic__jw_array_begin(elastic__jw *w)
{
    open_container(w, '[');
}

void elastic__jw_array_end(elastic__jw *w)
{
    close_container(w, ']');
}

/* The length of the valid UTF-8 sequence at s (at most n bytes), 0 if invalid. */
static size_t utf8_valid(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
    if (c < 0xc2 || c > 0xf4 || n < len) return 0; /* continuation, overlong lead, cut */
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (c == 0xe0 && s[1] < 0xa0) return 0;  /* overlong */
    if (c == 0xed && s[1] >= 0xa0) return 0; /* surrogate */
    if (c == 0xf0 && s[1] < 0x90) return 0;  /* overlong */
    if (c == 0xf4 && s[1] >= 0x90) return 0; /* past U+10FFFF */
    return len;
}

/* The escaped form of the character at s[0..n) into *out and *len (esc is its
 * scratch); returns the input bytes it stands for. */
static size_t escape_unit(const unsigned char *s, size_t n, char esc[8], const char **out,
                          size_t *len)
{
    unsigned char c = s[0];
    *out = (const char *)s;
    *len = 1;
    if (c == '"' || c == '\\')
        *len = (size_t)snprintf(esc, 8, "\\%c", c), *out = esc;
    else if (c == '\n')
        *out = "\\n", *len = 2;
    else if (c == '\t')
        *out = "\\t", *len = 2;
    else if (c < 0x20 || c == 0x7f)
        *len = (size_t)snprintf(esc, 8, "\\u%04x", c), *out = esc;
    else if (c >= 0x80 && (*len = utf8_valid(s, n)) == 0)
        *out = "\\ufffd", *len = 6;
    else
        return *len; /* itself: one byte, or a valid multibyte sequence whole */
    return 1;
}

/* Writes the escaped text (no quotes); false when it does not fit. */
static bool put_escaped(elastic__jw *w, const char *text, size_t n)
{
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < n;) {
        char esc[8];
        const char *out;
        size_t len;
        size_t step = escape_unit(&s[i], n - i, esc, &out, &len);
        if (!put(w, out, len)) return false;
        i += step;
    }
    return true;
}

size_t elastic__json_escaped_prefix(const char *text, size_t len, size_t max_escaped)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0, escaped = 0;
    while (i < len) {
        char esc[8];
        const char *out;
        size_t n;
        size_t step = escape_unit(&s[i], len - i, esc, &out, &n);
        if (escaped + n > max_escaped) break;
        escaped += n;
        i += step;
    }
    return i;
}

void elastic__jw_string_n(elastic__jw *w, const char *text, size_t len)
{
    if (w->skipped > 0) return;
    bool ok = value_begin(w);
    ok = ok && put(w, "\"", 1) && put_escaped(w, text, len) && put(w, "\"", 1);
    value_end(w, ok);
}

void elastic__jw_string(elastic__jw *w, const char *text)
{
    if (text == NULL)
        elastic__jw_null(w);
    else
        elastic__jw_string_n(w, text, strlen(text));
}

void elastic__jw_key(elastic__jw *w, const char *key)
{
    if (w->skipped > 0) return;
    w->failed_key = false;
    w->after_key = false;
    bool ok = value_begin(w);
    ok = ok && put(w, "\"", 1) && put_escaped(w, key, strlen(key)) && put(w, "\":", 2);
    if (ok) {
        w->after_key = true;
        return;
    }
    value_end(w, false);
    w->failed_key = true; /* its value is left out with it */
}

void elastic__jw_int(elastic__jw *w, int64_t value)
{
    char text[24];
    scalar(w, text, (size_t)snprintf(text, sizeof text, "%lld", (long long)value));
}

void elastic__jw_uint(elastic__jw *w, uint64_t value)
{
    char text[24];
    scalar(w, text, (size_t)snprintf(text, sizeof text, "%llu", (unsigned long long)value));
}

void elastic__jw_double(elastic__jw *w, double value, int decimals)
{
    if (!isfinite(value)) {
        elastic__jw_null(w);
        return;
    }
    char text[352]; /* %.*f of DBL_MAX is 309 digits before the point */
    if (decimals < 0) decimals = 0;
    if (decimals > 17) decimals = 17;
    int n = snprintf(text, sizeof text, "%.*f", decimals, value);
    scalar(w, text, (size_t)n);
}

void elastic__jw_double_g(elastic__jw *w, double value, int significant)
{
    if (!isfinite(value)) {
        elastic__jw_null(w);
        return;
    }
    char text[40];
    if (significant < 1) significant = 1;
    if (significant > 17) significant = 17;
    scalar(w, text, (size_t)snprintf(text, sizeof text, "%.*g", significant, value));
}

void elastic__jw_bool(elastic__jw *w, bool value)
{
    scalar(w, value ? "true" : "false", value ? 4 : 5);
}

void elastic__jw_null(elastic__jw *w)
{
    scalar(w, "null", 4);
}

int elastic__jw_finish(elastic__jw *w, size_t *len)
{
    if (len != NULL) *len = w->len;
    if (w->overflow)
        return elastic__fail(ELASTIC_ELIMIT, "JSON text over its %zu-byte bound (fields left out)",
                             w->cap > 0 ? w->cap - 1 : 0);
    if (w->depth != 0 || w->skipped != 0)
        return elastic__fail(ELASTIC_ELIMIT, "JSON text with %d container(s) left open",
                             w->depth + w->skipped);
    return 0;
}

int elastic__json_escape(const char *text, char *out, size_t size)
{
    if (size == 0) return elastic__fail(ELASTIC_ELIMIT, "JSON string with no room at all");
    elastic__jw w;
    elastic__jw_init(&w, out, size);
    if (text == NULL || put_escaped(&w, text, strlen(text))) return 0;
    out[0] = '\0';
    return elastic__fail(ELASTIC_ELIMIT, "JSON string over its %zu-byte bound", size - 1);
}
