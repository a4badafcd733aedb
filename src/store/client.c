/*
 * The store client's machinery: sessions (one connection shared by a handle
 * and its clones), calls with deadlines, the reader role that waiting
 * callers pass among themselves, one reconnect, and the ticker thread that
 * sends lease keep-alives even while every caller is busy or blocked.
 */
#include "store/client.h"

#include "common/endpoint.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_RESPONSE_BODY ((size_t)1 << 31)
#define READ_CHUNK        (64u << 10)

static void poke(int fd)
{
    uint64_t one = 1;
    ssize_t n = write(fd, &one, sizeof one);
    (void)n; /* a full counter already means "wake up" */
}

static void drain(int fd)
{
    uint64_t count;
    ssize_t n = read(fd, &count, sizeof count);
    (void)n;
}

void store__session_wake_ticker(store__session *session)
{
    poke(session->ticker_wake_fd);
}

void store__session_wake_reader(store__session *session)
{
    if (session->reading) poke(session->reader_wake_fd);
}

/* ---- the call list (session lock held) ------------------------------------ */

static void unlink_call(store__session *session, store__call *call)
{
    if (session->calls == call) session->calls = call->next;
    if (call->prev != NULL) call->prev->next = call->next;
    if (call->next != NULL) call->next->prev = call->prev;
    call->prev = call->next = NULL;
}

static void finish_call(store__session *session, store__call *call, int status, uint8_t *body,
                        size_t len)
{
    unlink_call(session, call);
    call->status = status;
    call->body = body;
    call->body_len = len;
    call->done = true;
    pthread_cond_signal(&call->cond);
}

/* Lets one waiting caller take over reading when nobody reads. */
static void hand_off_reading(store__session *session)
{
    if (!session->reading && session->calls != NULL) pthread_cond_signal(&session->calls->cond);
}

/* Marks the connection ended and fails every call still waiting on it. */
static void mark_broken(store__session *session, const char *why)
{
    session->broken = true;
    if (session->broken_reason[0] == '\0')
        snprintf(session->broken_reason, sizeof session->broken_reason, "%s", why);
    while (session->calls != NULL) finish_call(session, session->calls, ELASTIC_ECONNECT, NULL, 0);
    /* Leases die with their connection on the server. */
    while (session->keepalives != NULL) {
        store__keepalive *k = session->keepalives;
        session->keepalives = k->next;
        free(k);
    }
}

/* ---- reading (the reader role) -------------------------------------------- */

/* Hands one response to its caller (or drops it: a late or keep-alive one). */
static void dispatch(store__session *session, const store__header *h, const uint8_t *body)
{
    if (h->id == 0 && h->op_or_status != 0) {
        snprintf(session->broken_reason, sizeof session->broken_reason,
                 "the store closed the connection: %.*s",
                 (int)(h->body_len < 120 ? h->body_len : 120), (const char *)body);
        return;
    }
    for (store__call *call = session->calls; call != NULL; call = call->next) {
        if (call->id != h->id) continue;
        uint8_t *copy = malloc((size_t)h->body_len + 1);
        if (copy == NULL) {
            finish_call(session, call, ELASTIC_ENOMEM, NULL, 0);
            return;
        }
        if (h->body_len) memcpy(copy, body, h->body_len);
        copy[h->body_len] = 0;
        finish_call(session, call, h->op_or_status, copy, h->body_len);
        return;
    }
}

/* With the lock held: dispatches every complete frame in session->in;
 * false on a malformed stream. */
static bool dispatch_frames(store__session *session)
{
    bytes__buf *in = &session->in;
    size_t at = 0;
    bool ok = true;
    while (in->len - at >= STORE__HEADER_BYTES) {
        store__header h;
        store__header_decode(in->data + at, true, &h);
        if (h.body_len > MAX_RESPONSE_BODY || h.op_or_status > 0) {
            snprintf(session->broken_reason, sizeof session->broken_reason,
                     "malformed response from the store");
            ok = false;
            break;
        }
        size_t total = STORE__HEADER_BYTES + (size_t)h.body_len;
        if (in->len - at < total) {
            bytes__buf_reserve(in, total - (in->len - at));
            break;
        }
        dispatch(session, &h, in->data + at + STORE__HEADER_BYTES);
        at += total;
    }
    bytes__buf_consume(in, at);
    return ok && !in->failed;
}

/* TLS: decrypts what arrived into session->in (tls_lock taken). */
static int decrypt_input(store__session *session, store__tls *tls, const uint8_t *raw, size_t len,
                         const char **why)
{
    bytes__buf *in = &session->in;
    int err = 0;
    pthread_mutex_lock(&session->tls_lock);
    if (len > 0 && !store__tls_feed(tls, raw, len)) {
        *why = "out of memory reading from the store";
        err = ELASTIC_ECONNECT;
    }
    for (size_t got = 1; err == 0 && got > 0;) {
        if (!bytes__buf_reserve(in, READ_CHUNK)) {
            *why = "out of memory reading from the store";
            err = ELASTIC_ECONNECT;
            break;
        }
        if (store__tls_read(tls, in->data + in->len, in->cap - in->len, &got, why) != 0)
            err = ELASTIC_ECONNECT;
        else
            in->len += got;
    }
    pthread_mutex_unlock(&session->tls_lock);
    return err;
}

/* One read of the socket while holding the reader role (lock not held).
 * Returns 0, or ELASTIC_ECONNECT with *why set when the connection ended. */
static int read_once(store__session *session, int fd, int timeout_ms, bool parked, const char **why)
{
    /* A quick answer: a blocking recv (the socket's receive timeout is
     * STORE__RECV_SLICE_MS) saves a poll per call. Near the deadline, or
     * once the call has waited a slice (a parked get/watch), poll the
     * socket and the wake eventfd for all that is left: a reader parked for
     * seconds sleeps once instead of waking every slice (thousands of
     * parked nodes would wake 20 times a second each). Closing the handle
     * pokes the eventfd, the deadline ends the poll. */
    int flags = 0;
    store__tls *tls = session->tls; /* replaced only by a reconnect, when nobody reads */
    bool leftover = tls != NULL && store__tls_has_input(tls);
    if ((parked || timeout_ms < STORE__RECV_SLICE_MS) && !leftover) {
        struct pollfd pfd[2] = { { .fd = fd, .events = POLLIN },
                                 { .fd = session->reader_wake_fd, .events = POLLIN } };
        int ready = poll(pfd, 2, timeout_ms);
        if (ready <= 0) return 0; /* a timeout or EINTR: the caller re-checks */
        if (pfd[1].revents & POLLIN) drain(session->reader_wake_fd);
        if (!(pfd[0].revents & (POLLIN | POLLHUP | POLLERR))) return 0;
        flags = MSG_DONTWAIT;
    }
    bytes__buf *in = &session->in;
    if (!bytes__buf_reserve(in, READ_CHUNK)) {
        *why = "out of memory reading from the store";
        return ELASTIC_ECONNECT;
    }
    /* With TLS the socket's bytes are records: they go through decryption
     * (a record altered on the path fails its check and ends the connection). */
    uint8_t raw[tls != NULL ? 16384 : 1];
    ssize_t n = leftover      ? 0
                : tls != NULL ? recv(fd, raw, sizeof raw, flags)
                              : recv(fd, in->data + in->len, in->cap - in->len, flags);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (n < 0 || (n == 0 && !leftover)) {
        *why = n == 0 ? "the store closed the connection" : "connection to the store lost";
        return ELASTIC_ECONNECT;
    }
    if (tls != NULL) {
        if (decrypt_input(session, tls, raw, (size_t)n, why) != 0) return ELASTIC_ECONNECT;
    } else {
        in->len += (size_t)n;
    }
    pthread_mutex_lock(&session->lock);
    bool ok = dispatch_frames(session);
    pthread_mutex_unlock(&session->lock);
    if (!ok) {
        *why = "malformed response from the store";
        return ELASTIC_ECONNECT;
    }
    return 0;
}

/* With the lock held, as the reader: reads until the call is answered, the
 * deadline passes, the handle closes or the connection ends. */
static void read_for(elastic_store *s, store__call *call, uint64_t deadline_ms)
{
    store__session *session = s->session;
    session->reading = true;
    int fd = session->fd;
    const char *why = NULL;
    int err = 0;
    uint64_t parked_at = elastic__now_ms() + STORE__RECV_SLICE_MS;
    while (!call->done && !s->closing && err == 0 && elastic__ms_left(deadline_ms) > 0) {
        pthread_mutex_unlock(&session->lock);
        bool parked = elastic__now_ms() >= parked_at;
        err = read_once(session, fd, elastic__ms_left(deadline_ms), parked, &why);
        pthread_mutex_lock(&session->lock);
    }
    session->reading = false;
    if (err != 0) mark_broken(session, why);
    if (session->in.len == 0 && session->in.cap > 4 * READ_CHUNK) bytes__buf_free(&session->in);
}

/* ---- sending (write_lock held) ------------------------------------------- */

/* Writes bytes to the connection: as they are, or as TLS records. */
static int session_send(store__session *session, const void *data, size_t len)
{
    if (session->tls == NULL) return store__send_all(session->fd, data, len);
    pthread_mutex_lock(&session->tls_lock);
    int err = store__tls_write(session->tls, data, len);
    size_t pending = err == 0 ? store__tls_output_bytes(session->tls) : 0;
    uint8_t *records = pending > 0 ? malloc(pending) : NULL;
    if (pending > 0 && records == NULL) err = elastic__fail(ELASTIC_ENOMEM, "out of memory");
    if (records != NULL) pending = store__tls_take_output(session->tls, records, pending);
    pthread_mutex_unlock(&session->tls_lock);
    if (err == 0 && records != NULL) err = store__send_all(session->fd, records, pending);
    free(records);
    return err;
}

/* ---- the keep-alive ticker ------------------------------------------------- */

/* Sends the keep-alives that are due; returns ms until the next one (-1: none). */
static int send_keepalives(store__session *session)
{
    uint8_t frames[16][STORE__HEADER_BYTES + 8];
    int count = 0, wait_ms = -1;
    uint64_t now = elastic__now_ms();
    pthread_mutex_lock(&session->lock);
    for (store__keepalive *k = session->keepalives; k != NULL; k = k->next) {
        if (k->due_ms <= now && count < 16) {
            uint8_t *f = frames[count++];
            bytes__set_le32(f, 8);
            bytes__set_le32(f + 4, STORE__KEEPALIVE_ID);
            bytes__set_le16(f + 8, STORE__OP_LEASE_KEEPALIVE);
            bytes__set_le16(f + 10, 0);
            bytes__set_le64(f + 12, k->lease);
            k->due_ms = now + (uint64_t)k->interval_ms;
        }
        int left = k->due_ms <= now ? 0 : (int)(k->due_ms - now);
        if (wait_ms < 0 || left < wait_ms) wait_ms = left;
    }
    bool stopping = session->stopping;
    pthread_mutex_unlock(&session->lock);
    if (count > 0) {
        pthread_mutex_lock(&session->write_lock);
        if (session->fd >= 0) session_send(session, frames, sizeof frames[0] * (size_t)count);
        pthread_mutex_unlock(&session->write_lock);
    }
    return stopping ? -2 : wait_ms;
}

static void *ticker_main(void *arg)
{
    store__session *session = arg;
    for (;;) {
        int wait_ms = send_keepalives(session);
        if (wait_ms == -2) break;
        struct pollfd pfd = { .fd = session->ticker_wake_fd, .events = POLLIN };
        if (poll(&pfd, 1, wait_ms) > 0) drain(session->ticker_wake_fd);
    }
    return NULL;
}

/* ---- sessions ------------------------------------------------------------ */

/* With the session lock held and nobody reading: retires the ended
 * connection and opens a new one, trying once (bounded by the deadline). */
static int reconnect_locked(store__session *session, uint64_t deadline_ms)
{
    pthread_mutex_lock(&session->write_lock);
    if (session->fd >= 0) close(session->fd);
    session->fd = -1;
    store__tls_free(session->tls);
    session->tls = NULL;
    pthread_mutex_unlock(&session->write_lock);
    session->in.len = 0;
    uint64_t limit = elastic__deadline_ms(session->connect_timeout_ms);
    int fd = -1;
    store__tls *tls = NULL;
    uint16_t flags = 0;
    int err = store__connect_socket(session->host, session->port, session->token,
                                    deadline_ms < limit ? deadline_ms : limit, &fd, &tls, &flags);
    if (err != 0) {
        snprintf(session->broken_reason, sizeof session->broken_reason, "%s", elastic_last_error());
        return err;
    }
    pthread_mutex_lock(&session->write_lock);
    session->fd = fd;
    session->tls = tls;
    session->server_flags = flags;
    session->epoch++;
    pthread_mutex_unlock(&session->write_lock);
    session->broken = false;
    session->broken_reason[0] = '\0';
    ELASTIC_LOG_D("store", "connected to %s:%d", session->host, session->port);
    return 0;
}

static void session_free(store__session *session)
{
    if (session->reader_wake_fd >= 0) close(session->reader_wake_fd);
    if (session->ticker_wake_fd >= 0) close(session->ticker_wake_fd);
    if (session->fd >= 0) close(session->fd);
    store__tls_free(session->tls);
    bytes__buf_free(&session->in);
    store__token_free(session->token);
    pthread_mutex_destroy(&session->lock);
    pthread_mutex_destroy(&session->write_lock);
    pthread_mutex_destroy(&session->tls_lock);
    free(session);
}

/* Connects, retrying refused or unreachable attempts until connect_timeout_ms. */
static int first_connect(store__session *session)
{
    uint64_t deadline = elastic__deadline_ms(session->connect_timeout_ms);
    int delay_ms = 20, err, attempts = 0;
    for (;;) {
        pthread_mutex_lock(&session->lock);
        err = reconnect_locked(session, deadline);
        pthread_mutex_unlock(&session->lock);
        attempts++;
        if (err == 0 || (err != ELASTIC_ECONNECT && err != ELASTIC_ETIMEDOUT)) return err;
        ELASTIC_LOG_D("store", "connect attempt %d: %s", attempts, elastic_last_error());
        int left = elastic__ms_left(deadline);
        if (left == 0) {
            char why[256]; /* copied out: elastic__fail writes the buffer it would read */
            snprintf(why, sizeof why, "%s", elastic_last_error());
            return elastic__fail(err, "%s; gave up after %d attempts in %.1f s", why, attempts,
                                 (double)session->connect_timeout_ms / 1000.0);
        }
        usleep((useconds_t)(delay_ms < left ? delay_ms : left) * 1000u);
        if (delay_ms < 500) delay_ms *= 2;
    }
}

int store__session_open(const char *endpoint, const elastic_store_opts *opts, store__session **out)
{
    store__session *session = calloc(1, sizeof *session);
    if (session == NULL) return ELASTIC_ENOMEM;
    session->fd = -1;
    session->refs = 1;
    session->connect_timeout_ms = opts->connect_timeout_ms;
    session->next_id = 1;
    pthread_mutex_init(&session->lock, NULL);
    pthread_mutex_init(&session->write_lock, NULL);
    pthread_mutex_init(&session->tls_lock, NULL);
    session->reader_wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    session->ticker_wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    int err = 0;
    if (session->reader_wake_fd < 0 || session->ticker_wake_fd < 0)
        err = elastic__fail(ELASTIC_ESYS, "eventfd: %s", strerror(errno));
    if (err == 0)
        err = elastic__endpoint_parse("store endpoint", endpoint, ELASTIC__PORT_REQUIRED,
                                      session->host, sizeof session->host, &session->port);
    if (err == 0) err = store__token_resolve(opts->token, &session->token);
    if (err == 0) err = first_connect(session);
    if (err == 0 && pthread_create(&session->ticker, NULL, ticker_main, session) != 0)
        err = elastic__fail(ELASTIC_ESYS, "cannot start the store keep-alive thread");
    if (err != 0) {
        session_free(session);
        return err;
    }
    session->ticker_started = true;
    *out = session;
    return 0;
}

void store__session_release(store__session *session)
{
    pthread_mutex_lock(&session->lock);
    bool last = --session->refs == 0;
    if (last) session->stopping = true;
    pthread_mutex_unlock(&session->lock);
    if (!last) return;
    store__session_wake_ticker(session);
    if (session->ticker_started) pthread_join(session->ticker, NULL);
    session_free(session);
}

/* ---- calls --------------------------------------------------------------- */

static uint32_t next_id(store__session *session)
{
    uint32_t id = session->next_id++;
    if (id == 0 || id == STORE__KEEPALIVE_ID) {
        session->next_id = 2;
        id = 1;
    }
    return id;
}

void store__cond_init(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
}

static void register_call(store__session *session, store__call *call, elastic_store *owner)
{
    store__cond_init(&call->cond);
    call->owner = owner;
    call->id = next_id(session);
    call->next = session->calls;
    if (session->calls != NULL) session->calls->prev = call;
    session->calls = call;
}

/* Sends the frame unless the connection it was registered on is gone. */
static bool send_frame(store__session *session, uint64_t epoch, const bytes__buf *request)
{
    pthread_mutex_lock(&session->write_lock);
    bool current = session->epoch == epoch && session->fd >= 0;
    int err = current ? session_send(session, request->data, request->len) : ELASTIC_ECONNECT;
    if (err != 0 && current) shutdown(session->fd, SHUT_RDWR); /* the reader fails the calls */
    pthread_mutex_unlock(&session->write_lock);
    return current;
}

/* With the session lock held: waits for the answer, reading the socket
 * itself whenever nobody else does. */
static int await_call(elastic_store *s, store__call *call, uint64_t deadline_ms)
{
    store__session *session = s->session;
    while (!call->done && !s->closing && !session->broken) {
        if (elastic__ms_left(deadline_ms) == 0) break;
        if (!session->reading) {
            read_for(s, call, deadline_ms);
            continue;
        }
        struct timespec at = elastic__timespec_at(deadline_ms);
        pthread_cond_timedwait(&call->cond, &session->lock, &at);
    }
    int status = call->done        ? call->status
                 : s->closing      ? ELASTIC_ECLOSED
                 : session->broken ? ELASTIC_ECONNECT
                                   : ELASTIC_ETIMEDOUT;
    if (!call->done) unlink_call(session, call);
    hand_off_reading(session);
    return status;
}

/* A connection that ended while nobody was reading is noticed before a
 * call that must not be repeated goes out on it. */
static void notice_idle_hangup(store__session *session)
{
    if (session->fd < 0 || session->reading) return;
    struct pollfd pfd = { .fd = session->fd, .events = POLLIN };
    char byte;
    if (poll(&pfd, 1, 0) == 1 && recv(session->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0)
        mark_broken(session, "the store closed the connection");
}

/* One attempt; *sent says whether the frame may have reached the server. */
static int attempt(elastic_store *s, bytes__buf *request, const store__call_opts *co,
                   store__call *call, bool *sent)
{
    store__session *session = s->session;
    *sent = false;
    memset(call, 0, sizeof *call);
    if (!co->idempotent) notice_idle_hangup(session);
    if (session->fd < 0 || session->broken) {
        int err = reconnect_locked(session, co->deadline_ms);
        if (err != 0) return err;
    }
    /* Checked under the lock that store__generation_ended takes: a call
     * either sees the end here or is registered before it and cancelled. */
    if (store__generation_over(s)) return ELASTIC_ECANCELED;
    register_call(session, call, s);
    bytes__set_le32(request->data + 4, call->id);
    uint64_t epoch = session->epoch;
    pthread_mutex_unlock(&session->lock);
    *sent = send_frame(session, epoch, request);
    pthread_mutex_lock(&session->lock);
    int status = await_call(s, call, co->deadline_ms);
    pthread_cond_destroy(&call->cond);
    if (s->closing && status == ELASTIC_ECONNECT) status = ELASTIC_ECLOSED;
    return status;
}

static int fail_from_call(int status, uint16_t op, const store__call *call,
                          const store__session *session)
{
    if (status == ELASTIC_ETIMEDOUT)
        return elastic__fail(status, "store %s: timed out", store__op_name(op));
    if (status == ELASTIC_ECLOSED)
        return elastic__fail(status, "store %s: the handle was closed", store__op_name(op));
    if (status == ELASTIC_ECONNECT)
        return elastic__fail(status, "store %s: %s", store__op_name(op),
                             session->broken_reason[0] ? session->broken_reason
                                                       : "connection lost");
    if (call->body != NULL)
        return elastic__fail(status, "store %s: %.*s", store__op_name(op), (int)call->body_len,
                             (const char *)call->body);
    return elastic__fail(status, "store %s: %s", store__op_name(op), elastic_strerror(status));
}

int store__call_run(elastic_store *s, uint16_t op, bytes__buf *request, const store__call_opts *co,
                    uint8_t **body, size_t *len)
{
    store__session *session = s->session;
    *body = NULL;
    *len = 0;
    if (request->failed)
        return elastic__fail(ELASTIC_ENOMEM, "store %s: out of memory", store__op_name(op));
    pthread_mutex_lock(&session->lock);
    if (s->closing) {
        pthread_mutex_unlock(&session->lock);
        return elastic__fail(ELASTIC_ECLOSED, "store %s: the handle is closing",
                             store__op_name(op));
    }
    s->active_calls++;
    store__call call;
    bool sent = false;
    int status = attempt(s, request, co, &call, &sent);
    /* Once more over a new connection: always when the frame never left,
     * after a lost connection only when repeating the call is harmless. */
    if (status == ELASTIC_ECONNECT && !s->closing && (!sent || co->idempotent)) {
        free(call.body);
        status = attempt(s, request, co, &call, &sent);
    }
    if (status == ELASTIC_ECANCELED)
        status = elastic__fail(status, "store %s: generation %llu ended", store__op_name(op),
                               (unsigned long long)s->generation);
    else if (status != 0)
        status = fail_from_call(status, op, &call, session);
    if (status == 0) {
        *body = call.body;
        *len = call.body_len;
    } else {
        free(call.body);
    }
    if (--s->active_calls == 0 && s->closing) pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&session->lock);
    return status;
}
