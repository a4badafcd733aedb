/*
 * A small, bounded JSON reader for what the agent and elasticctl read back:
 * workers' error files and event-log lines. Input length, nesting depth and
 * value count are capped; anything malformed is ELASTIC_EPROTO, never a crash.
 */
#ifndef ELASTIC_COMMON_JSON_H
#define ELASTIC_COMMON_JSON_H

#include <stdbool.h>
#include <stddef.h>

#define JSON__MAX_DEPTH 32
#define JSON__MAX_VALUES 8192
#define JSON__MAX_INPUT (1u << 20)

typedef enum json__type { JSON__NULL, JSON__BOOL, JSON__NUMBER, JSON__STRING, JSON__ARRAY, JSON__OBJECT } json__type;

typedef struct json__value json__value;
struct json__value {
    json__type type;
    const char *key;                 /* a member's key inside an object; NULL otherwise */
    const char *string;              /* STRING: decoded, NUL-terminated (embedded NULs cut it short) */
    double number;                   /* NUMBER; BOOL: 0 or 1 */
    json__value *first, *next;       /* ARRAY/OBJECT: first child; siblings */
};

typedef struct json__doc json__doc;

/* Parses one JSON value (surrounding whitespace allowed). *doc is freed with
 * json__free; its root is json__root(doc). */
int json__parse(const char *text, size_t len, json__doc **doc);
const json__value *json__root(const json__doc *doc);
void json__free(json__doc *doc);

/* The member `key` of an object, or NULL (also when obj is not an object). */
const json__value *json__get(const json__value *obj, const char *key);
/* A member's string, or NULL when absent or not a string. */
const char *json__get_string(const json__value *obj, const char *key);
/* A member's number; false when absent or not a number. */
bool json__get_number(const json__value *obj, const char *key, double *out);

#endif /* ELASTIC_COMMON_JSON_H */
