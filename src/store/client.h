/*
 * The store client's internal structures. A session is one connection
 * shared by a handle and its clones: callers write whole frames under a
 * write lock; whichever waiting caller holds the reader role reads the
 * socket and hands every response to its call by id (so a lone caller reads
 * its own answer with no thread hand-off, and a slow call never blocks a
 * fast one); a ticker thread sends lease keep-alives.
 */
#ifndef ELASTIC_STORE_CLIENT_H
#define ELASTIC_STORE_CLIENT_H

#include "common/clock.h"
#include "store/store.h"
#include "store/tls.h"

#include <pthread.h>

#define STORE__RECV_SLICE_MS 50 /* a blocked reader re-checks closing this often */

typedef struct store__call {
    struct store__call *prev, *next;
    uint32_t id;
    elastic_store *owner;
    pthread_cond_t cond;
    bool done;
    int status;
    uint8_t *body; /* the response body (or error text), malloc'd */
    size_t body_len;
} store__call;

typedef struct store__keepalive {
    struct store__keepalive *next;
    uint64_t lease;
    int interval_ms;
    uint64_t due_ms;
    elastic_store *owner;
} store__keepalive;

typedef struct store__session {
    pthread_mutex_t lock;       /* everything below except the socket writes */
    pthread_mutex_t write_lock; /* one frame at a time on the socket */
    int refs;
    char host[256];
    int port;
    char *token;
    int connect_timeout_ms;
    int fd;                   /* -1 when not connected */
    store__tls *tls;          /* with a token: TLS over fd (changed with fd, under write_lock) */
    pthread_mutex_t tls_lock; /* the reader's decryption and the writers' encryption take turns */
    int reader_wake_fd;       /* eventfd: interrupts the caller reading the socket */
    int ticker_wake_fd;       /* eventfd: the ticker re-plans its keep-alives or stops */
    bool broken;              /* the reader saw the connection end */
    bool reading;             /* a caller holds the reader role */
    bool stopping;
    bool ticker_started;
    pthread_t ticker;
    bytes__buf in;         /* bytes read, owned by the reader role */
    uint64_t epoch;        /* bumped by every new connection */
    uint16_t server_flags; /* the connection's welcome flags (STORE__WELCOME_BATCH) */
    uint32_t next_id;
    store__call *calls;
    store__keepalive *keepalives;
    char broken_reason[160];
    uint64_t ended_generation; /* the newest generation announced ended (0: none) */
} store__session;

struct elastic_store {
    store__session *session;
    char *prefix;
    size_t prefix_len;
    int timeout_ms;
    int active_calls;
    bool closing;
    pthread_cond_t idle;
    /* Set by store__clone_for_generation (0: none): the handle's calls fail
     * with ELASTIC_ECANCELED once this generation is announced ended. */
    uint64_t generation;
};

/* With the session lock held: the handle's generation has ended. */
static inline bool store__generation_over(const elastic_store *s)
{
    return s->generation != 0 && s->generation <= s->session->ended_generation;
}

/* What a call needs beyond its frame. */
typedef struct store__call_opts {
    bool idempotent;      /* may be sent again over a new connection */
    uint64_t deadline_ms; /* when the caller gives up */
} store__call_opts;

/* client.c */
int store__session_open(const char *endpoint, const elastic_store_opts *opts, store__session **out);
void store__session_release(store__session *session);
/* Sends the frame in `request` (its id is filled in) and waits for the
 * response. On success *body and *len hold the response body (free it). */
int store__call_run(elastic_store *s, uint16_t op, bytes__buf *request, const store__call_opts *co,
                    uint8_t **body, size_t *len);
/* Tells the ticker to re-plan (a keep-alive was added) or to stop. */
void store__session_wake_ticker(store__session *session);
/* With the lock held: interrupts the reader so waiting callers re-check. */
void store__session_wake_reader(store__session *session);

/* client_ops.c: decoding shared with batches (client_batch.c). */
/* A NUL-terminated malloc'd copy of bytes; ELASTIC_ENOMEM (not recorded). */
int store__copy_value(const uint8_t *data, uint32_t len, void **value, size_t *value_len);
/* The n values of a multi_get answer (u32 n, then each value) into
 * values[]/lens[]: 0, ELASTIC_EPROTO (malformed) or ELASTIC_ENOMEM, and on
 * an error nothing is left allocated. */
int store__read_values(const uint8_t *body, size_t len, size_t n, void **values, size_t *lens);
/* n keys from r, less the handle's prefix, in one allocation (NULL-terminated);
 * ELASTIC_EPROTO (a key shorter than the prefix, the list cut short) or ELASTIC_ENOMEM. */
int store__build_key_list(const elastic_store *s, bytes__reader *r, uint32_t n, char ***keys);

/* A condition variable timed against CLOCK_MONOTONIC, like every wait here. */
void store__cond_init(pthread_cond_t *cond);

/* client_conn.c: connecting, the handshake, raw socket writes. */
/* With a token, *tls_out gets the TLS session the connection continues in. */
/* *welcome_flags: the server's (STORE__WELCOME_BATCH: it runs batches). */
int store__connect_socket(const char *host, int port, const char *token, uint64_t deadline_ms,
                          int *fd_out, store__tls **tls_out, uint16_t *welcome_flags);
int store__send_all(int fd, const void *data, size_t len);

#endif /* ELASTIC_STORE_CLIENT_H */
