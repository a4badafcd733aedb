/*
 * The store server's internal structures: the server (one libuv loop on its
 * own thread), its connections, and the parked calls (get/wait/watch) that
 * changes to the table wake. Everything here runs on the loop thread.
 */
#ifndef ELASTIC_STORE_SERVER_H
#define ELASTIC_STORE_SERVER_H

#include "store/kv.h"
#include "store/store.h"
#include "store/tls.h"

#include <pthread.h>
#include <uv.h>

#define STORE__WAIT_BUCKETS        1024 /* parked key waits, hashed by the key they wait for */
#define STORE__WATCH_BUCKETS       4096 /* parked watches, hashed by their prefix */
#define STORE__DELETE_LOG          1024 /* recent deletions remembered for watches */
#define STORE__MAX_LEASES_PER_CONN 1024
/* Every connection may hold this much input and unsent output whatever the
 * others hold, so small requests are always served; beyond it a connection
 * is paused while max_buffered_bytes is spent. */
#define STORE__CONN_FLOOR_BYTES (64u << 10)
/* The answers a batch whose last operation waits may hold while it is
 * parked; beyond it that operation is refused (ELASTIC_ELIMIT) at once. */
#define STORE__MAX_BATCH_HELD (64u << 10)

typedef struct store__conn store__conn;
typedef struct store__waiter store__waiter;

/* How many parked watches have a prefix of this length: a change probes
 * one watch bucket per length in use, not every watch. */
typedef struct store__watch_length {
    size_t len;
    size_t watches;
} store__watch_length;

typedef struct store__deletion {
    char *key;
    size_t key_len;
    uint64_t revision;
} store__deletion;

struct elastic_store_server {
    elastic_store_server_opts opts;
    char *token;
    store__limits limits;
    size_t max_frame_body;
    uv_loop_t loop;
    uv_tcp_t listener;
    uv_async_t stop_async;
    pthread_t thread;
    int port;
    store__kv kv;
    store__conn *conns;
    size_t conn_count;
    store__conn *dirty; /* connections with responses to flush, in the order they got them */
    store__conn *dirty_tail;
    store__waiter *wait_buckets[STORE__WAIT_BUCKETS];
    store__waiter *watch_buckets[STORE__WATCH_BUCKETS];
    store__watch_length *watch_lengths; /* ascending by len */
    size_t watch_length_count, watch_length_cap;
    store__deletion deletions[STORE__DELETE_LOG];
    size_t deletion_next;
    uint64_t deletion_horizon; /* deletions at or below this revision are forgotten */
    size_t buffered;           /* input buffers' capacity + responses in flight, all connections */
    size_t paused_count;       /* connections not read until buffered falls */
    size_t parked_calls;       /* atomic: get/wait/watch calls parked now (tests wait on it) */
    uv_timer_t pump_timer;     /* decrypts what resumed TLS connections hold already */
    uint64_t op_counts[STORE__OP_END_];         /* atomic: requests executed, by op (benchmarks) */
    uint64_t batched_op_counts[STORE__OP_END_]; /* atomic: the operations inside batches */
    bool without_batch; /* atomic: acts as a server from before BATCH (tests) */
};

/* With a token, CONN_TLS (the TLS handshake) comes between PROOF and READY. */
enum store__conn_state { CONN_HELLO, CONN_PROOF, CONN_TLS, CONN_READY, CONN_CLOSING, CONN_CLOSED };

struct store__conn {
    uv_tcp_t tcp;
    uv_timer_t timer; /* handshake deadline, then idle timeout */
    elastic_store_server *server;
    store__conn *prev, *next;
    store__conn *dirty_next;
    bool dirty;
    enum store__conn_state state;
    int open_handles; /* freed when both handles have closed */
    uint8_t client_nonce[STORE__NONCE_BYTES];
    uint8_t server_nonce[STORE__NONCE_BYTES];
    bytes__buf in;
    bytes__buf out;
    /* While a batch runs (in_batch), answers to this connection's other
     * parked calls that its changes wake go here, after the batch's frame. */
    bytes__buf aside;
    bool in_batch;
    size_t bytes_in_flight; /* handed to uv_write, not yet written */
    size_t in_accounted;    /* in.cap as counted in server->buffered */
    bool paused;            /* reading stopped: over max_buffered_bytes */
    bool over_limit;        /* past max_connections: refused (see refuse()) */
    bool shut;              /* refused: half-closed, waiting for the peer's close */
    bool frame_pending;     /* a frame has started: frame_timeout_ms runs */
    store__tls
        *tls; /* with a token, after READY: in holds decrypted bytes, out is encrypted on flush */
    uint8_t *raw; /* TLS: socket reads land here before decryption */
    size_t waiter_count;
    store__waiter *waiters;
    store__lease *leases;
    size_t lease_count;
    char peer[64];
};

struct store__waiter {
    uv_timer_t timer;
    store__conn *conn;
    uint32_t id;
    uint16_t op;
    store__waiter *conn_prev, *conn_next;
    store__waiter **list; /* the bucket or watcher list it is parked on */
    store__waiter *list_prev, *list_next;
    uint32_t key_count;
    uint32_t missing;        /* keys[0..missing) existed when last checked */
    uint64_t after_revision; /* watch */
    /* The last operation of a batch: its answer is the batch's frame, and
     * this (u32 n, u64 revision, the other operations' answers) opens it. */
    uint8_t *batch_prefix;
    size_t batch_prefix_len;
    store__slice *keys; /* point into storage */
    uint8_t storage[];
};

/* Calls parked on the server right now; safe from any thread. Lets a test
 * make its change only once the call it tests is really waiting. */
size_t store__server_parked_calls(const elastic_store_server *server);
/* Requests the server has executed so far, by op (out[op], STORE__OP_END_
 * entries; unknown ops under 0), and (batched, when not NULL) the
 * operations inside batches; safe from any thread. The benchmarks count
 * round trips by type with it. */
void store__server_op_counts(const elastic_store_server *server, uint64_t *out, uint64_t *batched);
/* From now on the server neither offers nor runs BATCH, as servers before it
 * (connections made before keep what their welcome said): tests of the
 * clients' fallback. */
void store__server_without_batch(elastic_store_server *server);

/* server_conn.c */
void store__conn_accept(elastic_store_server *server);
void store__conn_close(store__conn *conn, const char *why);
/* Queues bytes already framed in conn->out for sending (flushed after the
 * current callback by store__server_flush). */
void store__conn_mark_dirty(store__conn *conn);
void store__server_flush(elastic_store_server *server);
/* pump_timer: decrypts and handles what resumed TLS connections hold. */
void store__conn_pump_resumed(uv_timer_t *timer);
/* A frame with only a status and an optional message. */
void store__reply_status(store__conn *conn, uint32_t id, int status, const char *message);

/* server_ops.c */
/* Returns the call it parked (a waiting get/wait/multi_get/watch), or NULL. */
store__waiter *store__execute(store__conn *conn, const store__request *req);
void store__conn_end_leases(store__conn *conn);

/* server_wait.c */
/* Answers a get/wait/multi_get/watch at once when it can, else parks it
 * until a change satisfies it or its timeout passes. */
store__waiter *store__wait_park(store__conn *conn, const store__request *req);
/* Makes a parked call the last operation of a batch: its answer will open
 * with these bytes (copied). False when out of memory (still parked). */
bool store__wait_adopt_batch(store__waiter *w, const uint8_t *prefix, size_t len);
/* Unparks a call without answering it. */
void store__wait_drop(store__waiter *w);
void store__wait_cancel_all(store__conn *conn);
void store__wait_on_change(void *server, const char *key, size_t key_len, uint64_t revision,
                           bool deleted);
void store__wait_free_index(elastic_store_server *server);
/* Writes a get/multi_get response for keys that all exist. */
void store__reply_values(store__conn *conn, uint32_t id, uint16_t op, const store__slice *keys,
                         uint32_t n);

#endif /* ELASTIC_STORE_SERVER_H */
