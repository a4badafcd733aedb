/*
 * The one JSON writer: objects, arrays, strings, integers, doubles, bools and
 * null into a caller's fixed buffer. Output is bounded and always valid: a
 * member (key and value) or element that does not fit is left out whole, the
 * writer remembers the overflow, and elastic__jw_finish reports it
 * (ELASTIC_ELIMIT), so nothing is cut silently. Room for the closing brackets
 * of every open container is kept in reserve, so the text always closes.
 *
 * Strings: '"' and '\\' escaped, \n and \t as themselves, every other control
 * byte and DEL as \u00XX; valid UTF-8 is copied as is, and each byte of an
 * invalid sequence (stray continuation, overlong form, surrogate, past
 * U+10FFFF, cut short) becomes \ufffd, so the output is always valid UTF-8.
 */
#ifndef ELASTIC_COMMON_JSON_WRITER_H
#define ELASTIC_COMMON_JSON_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ELASTIC__JW_MAX_DEPTH 16

typedef struct elastic__jw {
    char *buf;
    size_t cap;          /* bytes of buf, the NUL included */
    size_t len;          /* bytes written, buf[len] == '\0' */
    int depth;           /* open containers */
    int skipped;         /* containers being left out (opened without room): their contents too */
    bool overflow;       /* something was left out (no room, or nesting too deep) */
    bool after_key;      /* a key was written: its value comes next, no comma */
    bool failed_key;     /* the key did not fit: its value is left out too */
    size_t member_start; /* where the current member began (a key's comma) */
    bool first[ELASTIC__JW_MAX_DEPTH]; /* no element yet in the container */
} elastic__jw;

void elastic__jw_init(elastic__jw *w, char *buf, size_t cap);

void elastic__jw_object_begin(elastic__jw *w);
void elastic__jw_object_end(elastic__jw *w);
void elastic__jw_array_begin(elastic__jw *w);
void elastic__jw_array_end(elastic__jw *w);

/* Inside an object: the member's key; the next call writes its value. */
void elastic__jw_key(elastic__jw *w, const char *key);

void elastic__jw_string(elastic__jw *w, const char *text); /* NULL: null */
void elastic__jw_string_n(elastic__jw *w, const char *text, size_t len);
void elastic__jw_int(elastic__jw *w, int64_t value);
void elastic__jw_uint(elastic__jw *w, uint64_t value);
/* `decimals` digits after the point (printf's %.*f); NaN and infinities,
 * which JSON cannot say, are written as null. */
void elastic__jw_double(elastic__jw *w, double value, int decimals);
/* `significant` digits, printf's %.*g (1e+06 style when shorter); null as above. */
void elastic__jw_double_g(elastic__jw *w, double value, int significant);
void elastic__jw_bool(elastic__jw *w, bool value);
void elastic__jw_null(elastic__jw *w);

/* The length written, or ELASTIC_ELIMIT (elastic_last_error names the
 * bound) when anything was left out or a container is still open. */
int elastic__jw_finish(elastic__jw *w, size_t *len);

/* Escapes `text` into out (NUL-terminated, without the quotes): 0, or
 * ELASTIC_ELIMIT with out empty when it does not fit. */
int elastic__json_escape(const char *text, char *out, size_t size);

/* The longest prefix of text[0..len), ending at a whole character, whose
 * escaped form takes at most max_escaped bytes (for a field a format bounds). */
size_t elastic__json_escaped_prefix(const char *text, size_t len, size_t max_escaped);

#endif
