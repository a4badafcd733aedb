/*
 * The store client's machinery: sessions (one connection shared by a handle
 * and its clones), the reader thread that matches responses to calls and
 * sends lease keep-alives, calls with deadlines, one reconnect, and closing
 * a handle while other threads are still inside calls on it.
 */
#include "store/client.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_RESPONSE_BODY ((size_t)1 << 31)
#define READ_CHUNK (64u << 10)

void store__session_wake(store__session *session)
{
    uint64_t one = 1;
    ssize_t n = write(session->wake_fd, &one, sizeof one);
    (void)n; /* a full counter already means "wake up" */
}

/* ---- the reader thread --------------------------------------------------- */

static void finish_call(store__call *call, int status, uint8_t *body, size_t len)
{
    store__call *c = call;
    if (c->prev != NULL) c->prev->next = c->next;
    if (c->next != NULL) c->next->prev = c->prev;
    c->prev = c->next = NULL;
    c->status = status;
    c->body = body;
    c->body_len = len;
    c->done = true;
    pthread_cond_signal(&c->cond);
}

static void unlink_call(store__session *session, store__call *call)
{
    if (session->calls == call) session->calls = call->next;
}

/* Hands one response to its caller (or drops it: a late or keep-alive one). */
static void dispatch(store__session *session, const store__header *h, const uint8_t *body)
{
    if (h->id == 0 && h->op_or_status != 0) {
        snprintf(session->broken_reason, sizeof session->broken_reason, "the store closed the connection: %.*s",
                 (int)(h->body_len < 120 ? h->body_len : 120), (const char *)body);
        return;
    }
    for (store__call *call = session->calls; call != NULL; call = call->next) {
        if (call->id != h->id) continue;
        uint8_t *copy = malloc(h->body_len + 1);
        if (copy == NULL) {
            unlink_call(session, call);
            finish_call(call, ELASTIC_ENOMEM, NULL, 0);
            return;
        }
        if (h->body_len) memcpy(copy, body, h->body_len);
        copy[h->body_len] = 0;
        unlink_call(session, call);
        finish_call(call, h->op_or_status, copy, h->body_len);
        return;
    }
}

/* Dispatches every complete frame in `in`; false on a malformed stream. */
static bool dispatch_frames(store__session *session, store__buf *in)
{
    size_t at = 0;
    bool ok = true;
    pthread_mutex_lock(&session->lock);
    while (in->len - at >= STORE__HEADER_BYTES) {
        store__header h;
        store__header_decode(in->data + at, true, &h);
        if (h.body_len > MAX_RESPONSE_BODY || h.op_or_status > 0) {
            snprintf(session->broken_reason, sizeof session->broken_reason, "malformed response from the store");
            ok = false;
            break;
        }
        size_t total = STORE__HEADER_BYTES + (size_t)h.body_len;
        if (in->len - at < total) {
            store__buf_reserve(in, total - (in->len - at));
            break;
        }
        dispatch(session, &h, in->data + at + STORE__HEADER_BYTES);
        at += total;
    }
    pthread_mutex_unlock(&session->lock);
    store__buf_consume(in, at);
    return ok && !in->failed;
}

/* Sends the keep-alives that are due; returns ms until the next one (-1: none). */
static int send_keepalives(store__session *session, int fd)
{
    uint8_t frames[16][STORE__HEADER_BYTES + 8];
    int count = 0, wait_ms = -1;
    uint64_t now = elastic__now_ms();
    pthread_mutex_lock(&session->lock);
    for (store__keepalive *k = session->keepalives; k != NULL; k = k->next) {
        if (k->due_ms <= now && count < 16) {
            uint8_t *f = frames[count++];
            store__put_le32(f, 8);
            store__put_le32(f + 4, STORE__KEEPALIVE_ID);
            store__put_le16(f + 8, STORE__OP_LEASE_KEEPALIVE);
            store__put_le16(f + 10, 0);
            store__put_le64(f + 12, k->lease);
            k->due_ms = now + (uint64_t)k->interval_ms;
        }
        int left = k->due_ms <= now ? 0 : (int)(k->due_ms - now);
        if (wait_ms < 0 || left < wait_ms) wait_ms = left;
    }
    pthread_mutex_unlock(&session->lock);
    if (count > 0) {
        pthread_mutex_lock(&session->write_lock);
        store__send_all(fd, frames, sizeof frames[0] * (size_t)count);
        pthread_mutex_unlock(&session->write_lock);
    }
    return wait_ms;
}

/* Marks the connection ended and fails every call still waiting on it. */
static void mark_broken(store__session *session, const char *why)
{
    pthread_mutex_lock(&session->lock);
    session->broken = true;
    if (session->broken_reason[0] == '\0') snprintf(session->broken_reason, sizeof session->broken_reason, "%s", why);
    while (session->calls != NULL) {
        store__call *call = session->calls;
        session->calls = call->next;
        finish_call(call, ELASTIC_ECONNECT, NULL, 0);
    }
    /* Leases die with their connection on the server. */
    while (session->keepalives != NULL) {
        store__keepalive *k = session->keepalives;
        session->keepalives = k->next;
        free(k);
    }
    pthread_mutex_unlock(&session->lock);
}

static void *reader_main(void *arg)
{
    store__session *session = arg;
    pthread_mutex_lock(&session->lock);
    int fd = session->fd;
    pthread_mutex_unlock(&session->lock);
    store__buf in = {0};
    const char *why = "the store closed the connection";
    for (;;) {
        int wait_ms = send_keepalives(session, fd);
        struct pollfd pfd[2] = {{.fd = fd, .events = POLLIN}, {.fd = session->wake_fd, .events = POLLIN}};
        if (poll(pfd, 2, wait_ms) < 0 && errno != EINTR) break;
        if (pfd[1].revents & POLLIN) {
            uint64_t count;
            ssize_t n = read(session->wake_fd, &count, sizeof count);
            (void)n;
            pthread_mutex_lock(&session->lock);
            bool stopping = session->stopping;
            pthread_mutex_unlock(&session->lock);
            if (stopping) {
                why = "the handle was closed";
                break;
            }
        }
        if (!(pfd[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        if (!store__buf_reserve(&in, READ_CHUNK)) break;
        ssize_t n = recv(fd, in.data + in.len, in.cap - in.len, MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) {
            if (n < 0) why = "connection to the store lost";
            break;
        }
        in.len += (size_t)n;
        if (!dispatch_frames(session, &in)) break;
        if (in.len == 0 && in.cap > 4 * READ_CHUNK) store__buf_free(&in);
    }
    store__buf_free(&in);
    mark_broken(session, why);
    return NULL;
}

/* ---- sessions ------------------------------------------------------------ */

static int start_reader(store__session *session)
{
    session->broken = false;
    session->broken_reason[0] = '\0';
    if (pthread_create(&session->reader, NULL, reader_main, session) != 0) {
        session->broken = true;
        return elastic__fail(ELASTIC_ESYS, "cannot start the store client thread");
    }
    session->reader_started = true;
    return 0;
}

/* With the session lock held: retires the ended connection and opens a
 * new one, trying once (the caller's deadline bounds it). */
static int reconnect_locked(store__session *session, uint64_t deadline_ms)
{
    if (session->reader_started) {
        pthread_join(session->reader, NULL); /* it has marked the connection broken and left */
        session->reader_started = false;
    }
    pthread_mutex_lock(&session->write_lock);
    if (session->fd >= 0) close(session->fd);
    session->fd = -1;
    pthread_mutex_unlock(&session->write_lock);
    uint64_t limit = elastic__deadline_ms(session->connect_timeout_ms);
    int fd = -1;
    int err = store__connect_socket(session->host, session->port, session->token,
                                    deadline_ms < limit ? deadline_ms : limit, &fd);
    if (err != 0) return err;
    pthread_mutex_lock(&session->write_lock);
    session->fd = fd;
    session->epoch++;
    pthread_mutex_unlock(&session->write_lock);
    ELASTIC_LOG_D("store", "connected to %s:%d", session->host, session->port);
    return start_reader(session);
}

static void session_free(store__session *session)
{
    if (session->wake_fd >= 0) close(session->wake_fd);
    store__token_free(session->token);
    pthread_mutex_destroy(&session->lock);
    pthread_mutex_destroy(&session->write_lock);
    free(session);
}

/* Connects, retrying refused or unreachable attempts until connect_timeout_ms. */
static int first_connect(store__session *session)
{
    uint64_t deadline = elastic__deadline_ms(session->connect_timeout_ms);
    int delay_ms = 20, err;
    for (;;) {
        pthread_mutex_lock(&session->lock);
        err = reconnect_locked(session, deadline);
        pthread_mutex_unlock(&session->lock);
        if (err == 0 || (err != ELASTIC_ECONNECT && err != ELASTIC_ETIMEDOUT)) return err;
        int left = elastic__ms_left(deadline);
        if (left == 0) return err;
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
    session->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    int err = session->wake_fd < 0 ? elastic__fail(ELASTIC_ESYS, "eventfd: %s", strerror(errno)) : 0;
    if (err == 0) err = store__parse_endpoint(endpoint, session->host, sizeof session->host, &session->port);
    if (err == 0) err = store__token_resolve(opts->token, &session->token);
    if (err == 0) err = first_connect(session);
    if (err != 0) {
        session_free(session);
        return err;
    }
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
    store__session_wake(session);
    if (session->reader_started) pthread_join(session->reader, NULL);
    if (session->fd >= 0) close(session->fd);
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

static void register_call(store__session *session, store__call *call, elastic_store *owner)
{
    memset(call, 0, sizeof *call);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&call->cond, &attr);
    pthread_condattr_destroy(&attr);
    call->owner = owner;
    call->id = next_id(session);
    call->next = session->calls;
    if (session->calls != NULL) session->calls->prev = call;
    session->calls = call;
}

/* Sends the frame unless the connection it was registered on is gone. */
static bool send_frame(store__session *session, uint64_t epoch, const store__buf *request)
{
    pthread_mutex_lock(&session->write_lock);
    bool current = session->epoch == epoch && session->fd >= 0;
    int err = current ? store__send_all(session->fd, request->data, request->len) : ELASTIC_ECONNECT;
    if (err != 0 && current) shutdown(session->fd, SHUT_RDWR); /* the reader fails the calls */
    pthread_mutex_unlock(&session->write_lock);
    return current;
}

/* With the session lock held: waits for the call's answer or the deadline. */
static int await_call(store__session *session, store__call *call, uint64_t deadline_ms)
{
    while (!call->done) {
        struct timespec at = elastic__timespec_at(deadline_ms);
        if (pthread_cond_timedwait(&call->cond, &session->lock, &at) == ETIMEDOUT &&
            elastic__ms_left(deadline_ms) == 0 && !call->done) {
            unlink_call(session, call);
            if (call->prev != NULL) call->prev->next = call->next;
            if (call->next != NULL) call->next->prev = call->prev;
            return ELASTIC_ETIMEDOUT;
        }
    }
    return call->status;
}

/* One attempt; *sent says whether the frame may have reached the server. */
static int attempt(elastic_store *s, store__buf *request, uint64_t deadline_ms, store__call *call, bool *sent)
{
    store__session *session = s->session;
    *sent = false;
    memset(call, 0, sizeof *call);
    if (session->fd < 0 || session->broken) {
        int err = reconnect_locked(session, deadline_ms);
        if (err != 0) {
            snprintf(session->broken_reason, sizeof session->broken_reason, "%s", elastic_last_error());
            return err;
        }
    }
    register_call(session, call, s);
    store__put_le32(request->data + 4, call->id);
    uint64_t epoch = session->epoch;
    pthread_mutex_unlock(&session->lock);
    *sent = send_frame(session, epoch, request);
    pthread_mutex_lock(&session->lock);
    int status = await_call(session, call, deadline_ms);
    pthread_cond_destroy(&call->cond);
    if (s->closing && status == ELASTIC_ECONNECT) status = ELASTIC_ECLOSED;
    return status;
}

static int fail_from_call(int status, uint16_t op, const store__call *call, const store__session *session)
{
    if (status == ELASTIC_ETIMEDOUT) return elastic__fail(status, "store %s: timed out", store__op_name(op));
    if (status == ELASTIC_ECLOSED) return elastic__fail(status, "store %s: the handle was closed", store__op_name(op));
    if (status == ELASTIC_ECONNECT)
        return elastic__fail(status, "store %s: %s", store__op_name(op),
                             session->broken_reason[0] ? session->broken_reason : elastic_last_error());
    if (call->body != NULL)
        return elastic__fail(status, "store %s: %.*s", store__op_name(op), (int)call->body_len, (const char *)call->body);
    return status;
}

int store__call_run(elastic_store *s, uint16_t op, store__buf *request, const store__call_opts *co, uint8_t **body,
                    size_t *len)
{
    store__session *session = s->session;
    *body = NULL;
    *len = 0;
    if (request->failed) return elastic__fail(ELASTIC_ENOMEM, "store %s: out of memory", store__op_name(op));
    pthread_mutex_lock(&session->lock);
    if (s->closing) {
        pthread_mutex_unlock(&session->lock);
        return elastic__fail(ELASTIC_ECLOSED, "store %s: the handle is closing", store__op_name(op));
    }
    s->active_calls++;
    store__call call;
    bool sent = false;
    int status = attempt(s, request, co->deadline_ms, &call, &sent);
    /* Once more over a new connection: always when the frame never left,
     * after a lost connection only when repeating the call is harmless. */
    if (status == ELASTIC_ECONNECT && !s->closing && (!sent || co->idempotent)) {
        free(call.body);
        status = attempt(s, request, co->deadline_ms, &call, &sent);
    }
    if (status != 0) status = fail_from_call(status, op, &call, session);
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
