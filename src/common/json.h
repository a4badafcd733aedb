/*
 * Bounded JSON reading for what the agent and elasticctl read back (workers'
 * error files, event-log lines), on top of json-c: the input length and the
 * nesting depth are capped, the whole input must be one value, and fields are
 * read type-checked and range-checked, so malformed input is ELASTIC_EPROTO.
 */
#ifndef ELASTIC_COMMON_JSON_H
#define ELASTIC_COMMON_JSON_H

#include <json-c/json.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JSON__MAX_DEPTH 32
#define JSON__MAX_INPUT (1u << 20)

/* Parses exactly one JSON value (surrounding whitespace allowed) from
 * text[0..len); *out is released with json_object_put. */
int json__parse(const char *text, size_t len, json_object **out);

/* The member `key` of an object, or NULL (also when obj is not an object). */
json_object *json__get(json_object *obj, const char *key);
/* A member's string, or NULL when absent, not a string or holding a NUL. */
const char *json__get_string(json_object *obj, const char *key);
/* A member's integer within [min, max] (an integral number written as a
 * double counts); false when absent, not a number or out of range. */
bool json__get_int(json_object *obj, const char *key, int64_t min, int64_t max, int64_t *out);

#endif /* ELASTIC_COMMON_JSON_H */
