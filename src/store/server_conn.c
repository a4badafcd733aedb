/*
 * One store connection on the server's loop: the handshake (magic, version,
 * mutual HMAC proof, then TLS 1.3 when there is a token), framing of requests, batched writes of
 * responses, the handshake, frame and idle deadlines, and the limits that keep a hostile or broken
 * peer from costing more than its share: every byte buffered for a connection (partial frames
 * included) counts against max_buffered_bytes.
 */
#include "common/tsan_fd.h"
#include "store/server.h"

#include <stdlib.h>

#define READ_CHUNK    4096
#define TLS_RAW_BYTES (16u << 10) /* one TLS record's worth of socket bytes per read */

/* ---- memory accounting -------------------------------------------------- */

/* Brings server->buffered up to date after conn->in changed size. */
static void account_input(store__conn *conn)
{
    elastic_store_server *server = conn->server;
    server->buffered = server->buffered - conn->in_accounted + conn->in.cap;
    conn->in_accounted = conn->in.cap;
}

/* Resizes the input buffer to exactly cap bytes (never below its content). */
static bool resize_input(store__conn *conn, size_t cap)
{
    bytes__buf *in = &conn->in;
    if (cap == 0) {
        bytes__buf_free(in);
    } else {
        uint8_t *data = realloc(in->data, cap);
        if (data == NULL) return false;
        in->data = data;
        in->cap = cap;
    }
    account_input(conn);
    return true;
}

/* Connections paused for memory read again once there is room; those that
 * still do not fit pause again in on_alloc. */
static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);

static void resume_paused(elastic_store_server *server)
{
    if (server->paused_count == 0 || server->buffered >= server->opts.max_buffered_bytes) return;
    for (store__conn *c = server->conns; c != NULL && server->paused_count > 0; c = c->next) {
        if (!c->paused) continue;
        c->paused = false;
        server->paused_count--;
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
        /* Bytes it already holds would wait for the next socket read. */
        if (c->tls != NULL && store__tls_has_input(c->tls))
            uv_timer_start(&server->pump_timer, store__conn_pump_resumed, 0, 0);
    }
}

static void on_handle_closed(uv_handle_t *handle)
{
    store__conn *conn = handle->data;
    if (--conn->open_handles > 0) return;
    elastic_store_server *server = conn->server;
    bytes__buf_free(&conn->in);
    account_input(conn);
    bytes__buf_free(&conn->out);
    store__tls_free(conn->tls);
    free(conn->raw);
    free(conn);
    resume_paused(server);
}

static void unlink_conn(store__conn *conn)
{
    elastic_store_server *server = conn->server;
    if (conn->prev != NULL)
        conn->prev->next = conn->next;
    else
        server->conns = conn->next;
    if (conn->next != NULL) conn->next->prev = conn->prev;
    conn->prev = conn->next = NULL;
    server->conn_count--;
    if (conn->dirty) {
        store__conn **slot = &server->dirty, *before = NULL;
        while (*slot != conn) {
            before = *slot;
            slot = &(*slot)->dirty_next;
        }
        *slot = conn->dirty_next;
        if (server->dirty_tail == conn) server->dirty_tail = before;
        conn->dirty = false;
    }
}

void store__conn_close(store__conn *conn, const char *why)
{
    if (conn->state == CONN_CLOSED) return;
    ELASTIC_LOG_D("store", "closing connection from %s: %s", conn->peer, why);
    conn->state = CONN_CLOSED;
    if (conn->paused) conn->server->paused_count--;
    conn->paused = false;
    unlink_conn(conn);
    store__wait_cancel_all(conn);
    store__conn_end_leases(conn); /* wakes other connections' watchers */
    uv_close((uv_handle_t *)&conn->timer, on_handle_closed);
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&conn->tcp, &fd) == 0) elastic__tsan_fd_closing(fd);
    uv_close((uv_handle_t *)&conn->tcp, on_handle_closed);
}

void store__conn_mark_dirty(store__conn *conn)
{
    if (conn->dirty || conn->state == CONN_CLOSED) return;
    /* First come, first flushed: a waiter woken by a set hears before the setter. */
    elastic_store_server *server = conn->server;
    conn->dirty = true;
    conn->dirty_next = NULL;
    if (server->dirty_tail != NULL)
        server->dirty_tail->dirty_next = conn;
    else
        server->dirty = conn;
    server->dirty_tail = conn;
}

void store__reply_status(store__conn *conn, uint32_t id, int status, const char *message)
{
    size_t start = store__frame_begin(&conn->out, id, status, 0);
    if (message != NULL) {
        size_t len = strlen(message);
        bytes__put(&conn->out, message, len < STORE__MAX_ERROR_TEXT ? len : STORE__MAX_ERROR_TEXT);
    }
    store__frame_end(&conn->out, start);
    store__conn_mark_dirty(conn);
}

static void on_timer(uv_timer_t *timer);

/* Answers a protocol violation and drops the connection once it is sent. */
static void fail_connection(store__conn *conn, int status, const char *why)
{
    ELASTIC_LOG_I("store", "connection from %s: %s", conn->peer, why);
    if (conn->state == CONN_READY) store__reply_status(conn, 0, status, why);
    conn->state = CONN_CLOSING;
    uv_read_stop((uv_stream_t *)&conn->tcp);
    /* A peer that does not read the last words is cut off anyway. */
    uv_timer_start(&conn->timer, on_timer, 1000, 0);
    store__conn_mark_dirty(conn);
}

/* ---- writing ------------------------------------------------------------- */

typedef struct write_req {
    uv_write_t req;
    store__conn *conn;
    size_t len;
    uint8_t *data;
} write_req;

static void on_shut(uv_shutdown_t *req, int status)
{
    (void)status;
    free(req);
}

/* The last words are out: close, or for a refused connection half-close
 * and let the peer close first (its unread hello would turn a close into a
 * reset that can destroy the refusal before the peer reads it). */
static void finish_closing(store__conn *conn)
{
    if (!conn->over_limit) {
        store__conn_close(conn, "closing");
        return;
    }
    if (conn->shut) return;
    uv_shutdown_t *req = malloc(sizeof *req);
    if (req == NULL || uv_shutdown(req, (uv_stream_t *)&conn->tcp, on_shut) != 0) {
        free(req);
        store__conn_close(conn, "refused");
        return;
    }
    conn->shut = true;
}

static void on_written(uv_write_t *req, int status)
{
    write_req *w = (write_req *)req;
    store__conn *conn = w->conn;
    conn->bytes_in_flight -= w->len;
    conn->server->buffered -= w->len;
    free(w->data);
    free(w);
    resume_paused(conn->server);
    if (conn->state == CONN_CLOSED) return;
    if (status < 0)
        store__conn_close(conn, uv_strerror(status));
    else if (conn->state == CONN_CLOSING && conn->bytes_in_flight == 0)
        finish_closing(conn);
}

/* Writes conn->out: directly when the socket takes it all, else queued. */
static void flush_conn(store__conn *conn)
{
    bytes__buf *out = &conn->out;
    if (out->failed) {
        store__conn_close(conn, "out of memory for responses");
        return;
    }
    if (conn->tls != NULL) {
        /* out holds plaintext frames: encrypt them, then send the records
         * (and any handshake bytes) through the same buffer. */
        if (out->len > 0 && store__tls_write(conn->tls, out->data, out->len) != 0) {
            store__conn_close(conn, "cannot encrypt responses");
            return;
        }
        out->len = 0;
        size_t pending = store__tls_output_bytes(conn->tls);
        if (pending > 0 && !bytes__buf_reserve(out, pending)) {
            store__conn_close(conn, "out of memory for responses");
            return;
        }
        out->len = store__tls_take_output(conn->tls, out->data, pending);
    }
    size_t done = 0;
    if (out->len > 0 && conn->bytes_in_flight == 0) {
        uv_buf_t buf = uv_buf_init((char *)out->data, (unsigned)out->len);
        int n = uv_try_write((uv_stream_t *)&conn->tcp, &buf, 1);
        if (n > 0)
            done = (size_t)n;
        else if (n < 0 && n != UV_EAGAIN) {
            store__conn_close(conn, uv_strerror(n));
            return;
        }
    }
    if (done < out->len) {
        write_req *w = malloc(sizeof *w);
        uint8_t *data = malloc(out->len - done);
        if (w == NULL || data == NULL) {
            free(w);
            free(data);
            store__conn_close(conn, "out of memory for responses");
            return;
        }
        w->conn = conn;
        w->len = out->len - done;
        w->data = data;
        memcpy(data, out->data + done, w->len);
        uv_buf_t buf = uv_buf_init((char *)data, (unsigned)w->len);
        conn->bytes_in_flight += w->len;
        conn->server->buffered += w->len;
        uv_write(&w->req, (uv_stream_t *)&conn->tcp, &buf, 1, on_written);
    }
    out->len = 0;
    if (out->cap > (64u << 10)) bytes__buf_free(out); /* do not keep a large burst's buffer */
    if (conn->state == CONN_CLOSING && conn->bytes_in_flight == 0)
        finish_closing(conn);
    else if (conn->bytes_in_flight + conn->in.len > conn->server->opts.max_connection_buffer)
        store__conn_close(conn, "peer does not read its responses (max_connection_buffer)");
}

void store__server_flush(elastic_store_server *server)
{
    while (server->dirty != NULL) {
        store__conn *conn = server->dirty;
        server->dirty = conn->dirty_next;
        if (server->dirty == NULL) server->dirty_tail = NULL;
        conn->dirty = false;
        flush_conn(conn);
    }
    resume_paused(server);
}

/* ---- timers -------------------------------------------------------------- */

static void on_timer(uv_timer_t *timer)
{
    store__conn *conn = timer->data;
    if (conn->state == CONN_CLOSING) {
        store__conn_close(conn, "peer did not take the final response");
    } else if (conn->state == CONN_TLS) {
        store__conn_close(conn, "TLS handshake not finished in handshake_timeout_ms");
    } else if (conn->state != CONN_READY) {
        store__conn_close(conn, "handshake not finished in handshake_timeout_ms");
    } else if (conn->frame_pending) {
        ELASTIC_LOG_W("store", "connection from %s: a frame was not completed in frame_timeout_ms",
                      conn->peer);
        store__conn_close(conn, "frame not completed in frame_timeout_ms");
    } else if (conn->waiter_count > 0) {
        uv_timer_again(timer); /* a parked call is activity */
        return;
    } else {
        store__conn_close(conn, "idle for idle_timeout_ms");
    }
    store__server_flush(conn->server);
}

static void restart_idle_timer(store__conn *conn)
{
    int idle = conn->server->opts.idle_timeout_ms;
    if (idle > 0)
        uv_timer_start(&conn->timer, on_timer, (uint64_t)idle, (uint64_t)idle);
    else
        uv_timer_stop(&conn->timer);
}

/* ---- handshake ----------------------------------------------------------- */

static void send_welcome(store__conn *conn, uint16_t version)
{
    uint8_t welcome[STORE__WELCOME_BYTES] = { 0 };
    memcpy(welcome, STORE__MAGIC, 4);
    bytes__set_le16(welcome + 4, STORE__VERSION);
    uint16_t flags = conn->server->token ? STORE__WELCOME_AUTH : 0;
    if (!__atomic_load_n(&conn->server->without_batch, __ATOMIC_RELAXED))
        flags |= STORE__WELCOME_BATCH;
    bytes__set_le16(welcome + 6, flags);
    memcpy(welcome + 8, conn->server_nonce, STORE__NONCE_BYTES);
    if (conn->server->token != NULL)
        elastic__proof_make(conn->server->token, STORE__PROOF_LABEL, true, conn->client_nonce,
                            conn->server_nonce, welcome + 8 + STORE__NONCE_BYTES);
    bytes__put(&conn->out, welcome, sizeof welcome);
    store__conn_mark_dirty(conn);
    (void)version;
}

/* Consumes the hello; false when the connection is being dropped. */
static bool handle_hello(store__conn *conn)
{
    const uint8_t *p = conn->in.data;

    if (memcmp(p, STORE__MAGIC, 4) != 0) {
        fail_connection(conn, ELASTIC_EPROTO, "wrong magic (not a libelastic store client)");
        return false;
    }
    uint16_t version = bytes__le16(p + 4);
    memcpy(conn->client_nonce, p + 8, STORE__NONCE_BYTES);
    bytes__buf_consume(&conn->in, STORE__HELLO_BYTES);
    if (elastic__random_bytes(conn->server_nonce, STORE__NONCE_BYTES) != 0) {
        fail_connection(conn, ELASTIC_ESYS, "no random bytes for the challenge");
        return false;
    }
    send_welcome(conn, version);
    if (version != STORE__VERSION) {
        /* The client sees our version in the welcome and reports the mismatch. */
        fail_connection(conn, ELASTIC_EPROTO, "unsupported protocol version");
        return false;
    }
    conn->state = CONN_PROOF;
    return true;
}

static void tls_pump(store__conn *conn);

/* With a token, READY is the last plaintext: from here on TLS 1.3 (PSK from
 * the token) carries every byte, so frames cannot be read, altered or
 * injected on the path. The handshake deadline keeps running. Returns false:
 * process_input stops (tls_pump handles the rest). */
static bool start_tls(store__conn *conn)
{
    flush_conn(conn); /* READY goes out in the clear */
    if (conn->state == CONN_CLOSED) return false;
    conn->raw = malloc(TLS_RAW_BYTES);
    if (conn->raw == NULL || store__tls_new(true, conn->server->token, &conn->tls) != 0) {
        store__conn_close(conn, "cannot set up TLS");
        return false;
    }
    conn->state = CONN_TLS;
    /* Bytes after the proof were already TLS. */
    bool fed = conn->in.len == 0 || store__tls_feed(conn->tls, conn->in.data, conn->in.len);
    conn->in.len = 0;
    if (!fed)
        store__conn_close(conn, "out of memory");
    else
        tls_pump(conn);
    return false;
}

static bool handle_proof(store__conn *conn)
{
    const char *token = conn->server->token;
    bool accepted = true;
    if (token != NULL)
        accepted = elastic__proof_check(token, STORE__PROOF_LABEL, false, conn->client_nonce,
                                        conn->server_nonce, conn->in.data);
    bytes__buf_consume(&conn->in, STORE__PROOF_BYTES);
    uint8_t ready[STORE__READY_BYTES];
    bytes__set_le32(ready, (uint32_t)(accepted ? 0 : ELASTIC_EAUTH));
    bytes__put(&conn->out, ready, sizeof ready);
    store__conn_mark_dirty(conn);
    if (!accepted) {
        ELASTIC_LOG_W("store", "connection from %s: wrong or missing token", conn->peer);
        fail_connection(conn, ELASTIC_EAUTH, "authentication failed");
        return false;
    }
    if (token != NULL) return start_tls(conn);
    conn->state = CONN_READY;
    restart_idle_timer(conn);
    return true;
}

/* ---- frames -------------------------------------------------------------- */

/* Executes one complete frame; false to stop reading this connection. */
static bool handle_frame(store__conn *conn, const store__header *h, const uint8_t *body)
{
    store__request req;
    const char *why = NULL;
    int err = store__parse_request(h, body, &conn->server->limits, &req, &why);
    bool unknown = h->op_or_status <= 0 || h->op_or_status >= STORE__OP_END_ ||
                   (h->op_or_status == STORE__OP_BATCH &&
                    __atomic_load_n(&conn->server->without_batch, __ATOMIC_RELAXED));
    if (unknown) {
        err = ELASTIC_EPROTO;
        why = "unknown operation";
    }
    if (err == ELASTIC_EPROTO && unknown) {
        fail_connection(conn, ELASTIC_EPROTO, why);
        return false;
    }
    if (err != 0)
        store__reply_status(conn, h->id, err, why);
    else
        store__execute(conn, &req);
    return conn->state == CONN_READY;
}

/* Executes every complete frame in conn->in, then drops them all at once
 * (a burst of small frames costs one move, not one per frame). */
static void process_frames(store__conn *conn)
{
    size_t at = 0;
    bool handled = false;
    while (conn->in.len - at >= STORE__HEADER_BYTES) {
        store__header h;
        store__header_decode(conn->in.data + at, false, &h);
        if (h.body_len > conn->server->max_frame_body) {
            fail_connection(conn, ELASTIC_ELIMIT, "frame longer than the connection's limit");
            return;
        }
        size_t total = STORE__HEADER_BYTES + (size_t)h.body_len;
        if (conn->in.len - at < total) break; /* on_alloc grows the buffer as the rest arrives */
        bool go_on = handle_frame(conn, &h, conn->in.data + at + STORE__HEADER_BYTES);
        at += total;
        handled = true;
        if (!go_on) break;
    }
    bytes__buf_consume(&conn->in, at);
    if (conn->state != CONN_READY) return;
    /* Each started frame has frame_timeout_ms to complete, counted from the
     * first byte after the previous frame: a trickle cannot hold memory. */
    if (handled) conn->frame_pending = false;
    if (conn->in.len > 0 && !conn->frame_pending) {
        conn->frame_pending = true;
        uv_timer_start(&conn->timer, on_timer, (uint64_t)conn->server->opts.frame_timeout_ms, 0);
    } else if (handled && conn->in.len == 0) {
        restart_idle_timer(conn);
    }
}

/* Handles every complete message in conn->in. */
static void process_input(store__conn *conn)
{
    for (;;) {
        size_t have = conn->in.len;
        if (conn->state == CONN_HELLO) {
            if (have >= 4 && memcmp(conn->in.data, STORE__MAGIC, 4) != 0) {
                fail_connection(conn, ELASTIC_EPROTO,
                                "wrong magic (not a libelastic store client)");
                return;
            }
            if (have < STORE__HELLO_BYTES || !handle_hello(conn)) return;
        } else if (conn->state == CONN_PROOF) {
            if (have < STORE__PROOF_BYTES || !handle_proof(conn)) return;
        } else {
            if (conn->state == CONN_READY) process_frames(conn);
            return;
        }
    }
}

/* The capacity the input buffer should have to go on reading: up to the end
 * of the frame being received, growing by at most doubling, so memory is
 * spent as bytes arrive, never on a length a header merely announces. */
static size_t input_target(const store__conn *conn)
{
    size_t len = conn->in.len;
    if (conn->state == CONN_READY && len >= STORE__HEADER_BYTES) {
        size_t total = STORE__HEADER_BYTES + (size_t)bytes__le32(conn->in.data);
        if (total > len) {
            size_t step = len < READ_CHUNK ? READ_CHUNK : len;
            return total - len < step ? total : len + step;
        }
    }
    return len + READ_CHUNK;
}

/* Hands libuv the free part of the input buffer, grown when needed and
 * affordable. A zero-length buffer (UV_ENOBUFS in on_read) pauses the
 * connection: it holds more than its floor while the server's
 * max_buffered_bytes is spent, or does not read its responses. */
/* Makes room in the input buffer when needed and affordable; false when
 * there is none: the connection holds more than its floor while the
 * server's max_buffered_bytes is spent (or memory ran out). */
static bool input_room(store__conn *conn)
{
    elastic_store_server *server = conn->server;
    size_t target = input_target(conn), free_bytes = conn->in.cap - conn->in.len;
    if (free_bytes >= READ_CHUNK || target <= conn->in.cap) return true;
    size_t growth = target - conn->in.cap;
    bool fits = target <= STORE__CONN_FLOOR_BYTES ||
                server->buffered + growth <= server->opts.max_buffered_bytes;
    if (fits && resize_input(conn, target)) return true;
    return free_bytes > 0;
}

/* Hands libuv the free part of the input buffer (with TLS, the raw buffer
 * the ciphertext lands in). A zero-length buffer (UV_ENOBUFS in on_read)
 * pauses the connection: no room (input_room), undecrypted bytes piling up,
 * or a peer that does not read its responses while memory is short. */
static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
    store__conn *conn = handle->data;
    elastic_store_server *server = conn->server;
    (void)suggested;
    *buf = uv_buf_init(NULL, 0);
    bool over = server->buffered > server->opts.max_buffered_bytes;
    if (over && conn->bytes_in_flight >= STORE__CONN_FLOOR_BYTES) return;
    if (conn->tls != NULL) {
        if (store__tls_input_bytes(conn->tls) < STORE__CONN_FLOOR_BYTES)
            *buf = uv_buf_init((char *)conn->raw, TLS_RAW_BYTES);
        return;
    }
    if (!input_room(conn)) return;
    *buf =
        uv_buf_init((char *)conn->in.data + conn->in.len, (unsigned)(conn->in.cap - conn->in.len));
}

static void pause_reading(store__conn *conn)
{
    if (conn->paused) return;
    uv_read_stop((uv_stream_t *)&conn->tcp);
    conn->paused = true;
    conn->server->paused_count++;
    ELASTIC_LOG_D("store", "pausing %s: max_buffered_bytes spent (%zu buffered)", conn->peer,
                  conn->server->buffered);
}

/* After consuming input: an empty buffer is freed, one far larger than what
 * it holds shrinks. */
static void trim_input(store__conn *conn)
{
    size_t cap = conn->in.cap, len = conn->in.len;
    /* All consumed: the buffer goes until the next read. Parked connections
     * hold none, or 16k of them would hold 64 MiB (all of the default
     * max_buffered_bytes) in idle read buffers and stall every large frame. */
    if (len == 0) {
        if (cap > 0) resize_input(conn, 0);
        return;
    }
    if (cap <= STORE__CONN_FLOOR_BYTES || len > cap / 4) return;
    resize_input(conn, len == 0 ? 0 : (len > READ_CHUNK ? len : READ_CHUNK));
}

/* TLS: finishes the handshake, then decrypts into conn->in as room allows
 * and handles the frames. A record that fails its integrity check (bytes
 * injected or altered on the path) ends the connection: nothing in it runs. */
static void tls_pump(store__conn *conn)
{
    const char *why = NULL;
    if (conn->state == CONN_TLS) {
        int rc = store__tls_handshake(conn->tls, &why);
        store__conn_mark_dirty(conn); /* its handshake messages */
        if (rc < 0) {
            ELASTIC_LOG_W("store", "connection from %s: %s", conn->peer, why);
            store__conn_close(conn, why);
        }
        if (rc != 1) return;
        conn->state = CONN_READY;
        restart_idle_timer(conn);
    }
    while (conn->state == CONN_READY && !conn->paused) {
        if (!input_room(conn)) {
            pause_reading(conn);
            return;
        }
        size_t got = 0;
        int rc = store__tls_read(conn->tls, conn->in.data + conn->in.len,
                                 conn->in.cap - conn->in.len, &got, &why);
        if (rc != 0) {
            if (rc == ELASTIC_EAUTH)
                ELASTIC_LOG_W("store", "connection from %s: %s", conn->peer, why);
            store__conn_close(conn, why);
            return;
        }
        if (got == 0) return;
        conn->in.len += got;
        process_input(conn);
        if (conn->state != CONN_CLOSED) trim_input(conn);
    }
}

void store__conn_pump_resumed(uv_timer_t *timer)
{
    elastic_store_server *server = timer->data;
    for (store__conn *c = server->conns, *next; c != NULL; c = next) {
        next = c->next; /* c may close */
        if (c->tls != NULL && c->state == CONN_READY && !c->paused && store__tls_has_input(c->tls))
            tls_pump(c);
    }
    store__server_flush(server);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    store__conn *conn = stream->data;
    (void)buf;
    if (nread == UV_ENOBUFS) {
        pause_reading(conn);
    } else if (nread < 0) {
        store__conn_close(conn, nread == UV_EOF ? "peer closed" : uv_strerror((int)nread));
    } else if (conn->over_limit) {
        /* Refused: what it sends is dropped unread. */
    } else if (nread > 0 && conn->state != CONN_CLOSED && conn->tls != NULL) {
        if (store__tls_feed(conn->tls, conn->raw, (size_t)nread))
            tls_pump(conn);
        else
            store__conn_close(conn, "out of memory");
    } else if (nread > 0 && conn->state != CONN_CLOSED) {
        conn->in.len += (size_t)nread;
        process_input(conn);
        if (conn->state != CONN_CLOSED) trim_input(conn);
    }
    store__server_flush(conn->server);
}

/* ---- accepting ----------------------------------------------------------- */

static void describe_peer(store__conn *conn)
{
    struct sockaddr_storage addr;
    int len = sizeof addr;
    char host[48] = "?";
    int port = 0;
    if (uv_tcp_getpeername(&conn->tcp, (struct sockaddr *)&addr, &len) == 0) {
        if (addr.ss_family == AF_INET6) {
            uv_ip6_name((struct sockaddr_in6 *)&addr, host, sizeof host);
            port = ntohs(((struct sockaddr_in6 *)&addr)->sin6_port);
        } else {
            uv_ip4_name((struct sockaddr_in *)&addr, host, sizeof host);
            port = ntohs(((struct sockaddr_in *)&addr)->sin_port);
        }
    }
    snprintf(conn->peer, sizeof conn->peer, "%s:%d", host, port);
}

/* Past max_connections: a welcome with the REFUSED flag and the limit, so
 * the client fails at once saying which limit instead of timing out on a
 * silent close; then a half-close (reading on, the hello discarded) so the
 * refusal is not lost to a reset; the peer's close or 1 s ends it. */
static void refuse(store__conn *conn)
{
    uint8_t welcome[STORE__WELCOME_BYTES] = { 0 };
    memcpy(welcome, STORE__MAGIC, 4);
    bytes__set_le16(welcome + 4, STORE__VERSION);
    bytes__set_le16(welcome + 6, STORE__WELCOME_REFUSED);
    snprintf((char *)welcome + 8, STORE__WELCOME_BYTES - 8, "max_connections (%zu) reached",
             conn->server->opts.max_connections);
    bytes__put(&conn->out, welcome, sizeof welcome);
    conn->over_limit = true;
    conn->state = CONN_CLOSING;
    uv_timer_start(&conn->timer, on_timer, 1000, 0);
    uv_read_start((uv_stream_t *)&conn->tcp, on_alloc, on_read);
    store__conn_mark_dirty(conn);
}

void store__conn_accept(elastic_store_server *server)
{
    store__conn *conn = calloc(1, sizeof *conn);
    if (conn == NULL) return; /* the pending connection waits in the backlog */
    conn->server = server;
    uv_tcp_init(&server->loop, &conn->tcp);
    uv_timer_init(&server->loop, &conn->timer);
    conn->tcp.data = conn->timer.data = conn;
    conn->open_handles = 2;
    conn->next = server->conns;
    if (server->conns != NULL) server->conns->prev = conn;
    server->conns = conn;
    server->conn_count++;
    if (uv_accept((uv_stream_t *)&server->listener, (uv_stream_t *)&conn->tcp) != 0) {
        store__conn_close(conn, "accept failed");
        return;
    }
    describe_peer(conn);
    if (server->conn_count > server->opts.max_connections) {
        ELASTIC_LOG_W("store", "refusing %s: max_connections (%zu) reached", conn->peer,
                      server->opts.max_connections);
        refuse(conn);
        return;
    }
    uv_tcp_nodelay(&conn->tcp, 1);
    uv_timer_start(&conn->timer, on_timer, (uint64_t)server->opts.handshake_timeout_ms, 0);
    uv_read_start((uv_stream_t *)&conn->tcp, on_alloc, on_read);
}
