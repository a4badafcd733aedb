/*
 * Batches on the client side: several store operations in one request
 * (STORE__OP_BATCH), run by the server in order with nobody else's in
 * between, answered in one response; with stop_on_error the first that
 * fails cancels the rest (ELASTIC_ECANCELED). Only the last may wait (a
 * multi_get that waits for its keys). A server from before batches does not
 * offer them (store__batch_supported): callers then make one call per
 * operation. Keys get the handle's prefix, as in every call.
 */
#ifndef ELASTIC_STORE_BATCH_H
#define ELASTIC_STORE_BATCH_H

#include "store/client.h"

/* One operation's answer: its status and body (into the response). */
typedef struct store__batch_answer {
    int status;
    const uint8_t *body;
    uint32_t len;
} store__batch_answer;

typedef struct store__batch {
    elastic_store *store;
    bytes__buf frame; /* the request being built */
    size_t frame_start;
    uint32_t n;
    bool failed;       /* a bad argument or more than STORE__MAX_BATCH operations */
    int wait_ms;       /* the last operation's wait (-1: none waits) */
    uint64_t revision; /* after the run: the store's revision once the operations ran */
    uint8_t *response;
    store__batch_answer answers[STORE__MAX_BATCH];
} store__batch;

/* Whether the server of s's connection runs batches. */
bool store__batch_supported(elastic_store *s);

void store__batch_begin(store__batch *b, elastic_store *s);
void store__batch_add(store__batch *b, const char *key, int64_t delta);
void store__batch_get(store__batch *b, const char *key); /* never waits: absent is ENOTFOUND */
void store__batch_set_leased(store__batch *b, const char *key, const void *value, size_t len,
                             uint64_t lease);
void store__batch_keys(store__batch *b, const char *prefix, uint32_t max);
/* Waits up to timeout_ms (1 .. STORE__MAX_WAIT_MS) for every key: the last operation. */
void store__batch_multi_get(store__batch *b, const char *const *keys, size_t n, int timeout_ms);

/* Sends the batch and waits for its answer: 0 when the batch was answered
 * (each operation's status is in answers[i]), else the batch's error. */
int store__batch_run(store__batch *b, bool stop_on_error);
/* Decoders of answers[i]: its status when it failed (with the server's
 * text in elastic_last_error()), else 0 and the value. */
int store__batch_int(store__batch *b, uint32_t i, int64_t *out);
int store__batch_value(store__batch *b, uint32_t i, void **value, size_t *len); /* get */
int store__batch_values(store__batch *b, uint32_t i, size_t n, void **values,
                        size_t *lens); /* multi_get */
/* Key names (the handle's prefix removed) in one allocation, as elastic_store_keys. */
int store__batch_keys_answer(store__batch *b, uint32_t i, char ***keys, size_t *n);
void store__batch_free(store__batch *b);

#endif /* ELASTIC_STORE_BATCH_H */
