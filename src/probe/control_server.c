/*
 * The agent's end of the control socket: workers connect and say hello with
 * their slot; the agent sends abort / reconfigure / stop and hears their
 * acknowledgements. Only processes of the agent's own user are accepted, and
 * every frame is checked and bounded before it is used.
 */
#include "probe/probe.h"

#include "common/parse_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define CONTROL_FRAME_MAX (sizeof(channel__msg_header) + CHANNEL__MSG_MAX_PAYLOAD)

typedef struct control_conn {
    uv_pipe_t pipe;
    probe__control *control;
    struct control_conn *prev, *next;
    int slot; /* -1 until the worker said hello */
    size_t len;
    bool closing;
    char buf[CONTROL_FRAME_MAX + 1];
} control_conn;

struct probe__control {
    uv_loop_t *loop;
    uv_pipe_t listener;
    char *path;
    unsigned slots;
    control_conn **by_slot;
    control_conn *conns;
    probe__control_fn fn;
    void *user;
    probe__control_report_fn report_fn;
    void *report_user;
    bool listener_closed, stopping;
};

static void maybe_free(probe__control *c)
{
    if (!c->listener_closed || c->conns != NULL) return;
    free(c->by_slot);
    free(c->path);
    free(c);
}

static void conn_closed(uv_handle_t *handle)
{
    control_conn *conn = handle->data;
    probe__control *c = conn->control;
    if (conn->prev != NULL)
        conn->prev->next = conn->next;
    else
        c->conns = conn->next;
    if (conn->next != NULL) conn->next->prev = conn->prev;
    free(conn);
    maybe_free(c);
}

static void conn_close(control_conn *conn)
{
    if (conn->closing) return;
    conn->closing = true;
    probe__control *c = conn->control;
    if (conn->slot >= 0 && c->by_slot[conn->slot] == conn) {
        c->by_slot[conn->slot] = NULL;
        if (!c->stopping) c->fn(c->user, conn->slot, 0, 0, 0);
    }
    uv_close((uv_handle_t *)&conn->pipe, conn_closed);
}

static uint64_t payload_number(const channel__kv *kv, const char *key)
{
    uint64_t value;
    if (elastic__parse_u64(NULL, channel__kv_get(kv, key), 0, INT64_MAX, &value) != 0) return 0;
    return value;
}

static int handle_hello(control_conn *conn, const channel__kv *kv)
{
    probe__control *c = conn->control;
    int slot;
    if (conn->slot >= 0 || c->slots == 0 ||
        elastic__parse_int(NULL, channel__kv_get(kv, "SLOT"), 0, (int)c->slots - 1, &slot) != 0)
        return elastic__fail(ELASTIC_EPROTO, "control: bad hello");
    control_conn *previous = c->by_slot[slot];
    if (previous != NULL) conn_close(previous); /* a replaced worker's stale connection */
    conn->slot = (int)slot;
    c->by_slot[slot] = conn;
    return 0;
}

static int handle_frame(control_conn *conn, const channel__msg_header *header, char *payload)
{
    channel__kv kv;
    int rc = channel__kv_parse(payload, header->length, &kv);
    if (rc != 0) return rc;
    if (header->type == CHANNEL__MSG_HELLO)
        rc = handle_hello(conn, &kv);
    else if ((header->type == CHANNEL__MSG_FAULT || header->type == CHANNEL__MSG_EVENT) &&
             conn->slot >= 0) {
        probe__control *c = conn->control;
        if (c->report_fn != NULL) c->report_fn(c->report_user, conn->slot, header->type, &kv);
        return 0;
    } else if (header->type != CHANNEL__MSG_ABORT_ACK && header->type != CHANNEL__MSG_READY &&
               header->type != CHANNEL__MSG_FAULT && header->type != CHANNEL__MSG_EVENT)
        return elastic__fail(ELASTIC_EPROTO, "control: message type %u is not for the agent",
                             header->type);
    else if (conn->slot < 0)
        return elastic__fail(ELASTIC_EPROTO, "control: message before hello");
    if (rc == 0)
        conn->control->fn(conn->control->user, conn->slot, header->type,
                          payload_number(&kv, "GENERATION"), payload_number(&kv, "TIME_NS"));
    return rc;
}

/* Handles every whole frame in the buffer; keeps a partial one. */
static int drain(control_conn *conn)
{
    size_t offset = 0;
    while (conn->len - offset >= sizeof(channel__msg_header)) {
        channel__msg_header header;
        memcpy(&header, conn->buf + offset, sizeof header);
        int rc = channel__msg_check_header(&header);
        if (rc != 0) return rc;
        size_t frame = sizeof header + header.length;
        if (conn->len - offset < frame) break;
        char *payload = conn->buf + offset + sizeof header;
        char saved = payload[header.length];       /* the next frame's first byte */
        rc = handle_frame(conn, &header, payload); /* may write payload[length] */
        payload[header.length] = saved;
        if (rc != 0 || conn->closing) return rc;
        offset += frame;
    }
    memmove(conn->buf, conn->buf + offset, conn->len - offset);
    conn->len -= offset;
    return 0;
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
    control_conn *conn = handle->data;
    (void)suggested;
    *buf = uv_buf_init(conn->buf + conn->len, (unsigned)(CONTROL_FRAME_MAX - conn->len));
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    control_conn *conn = stream->data;
    (void)buf;
    if (nread < 0) {
        conn_close(conn);
        return;
    }
    conn->len += (size_t)nread;
    if (drain(conn) != 0) {
        ELASTIC_LOG_W("probe", "control connection dropped: %s", elastic_last_error());
        conn_close(conn);
    }
}

static bool same_user(uv_pipe_t *pipe)
{
    uv_os_fd_t fd;
    struct ucred cred;
    socklen_t len = sizeof cred;
    return uv_fileno((uv_handle_t *)pipe, &fd) == 0 &&
           getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == geteuid();
}

static void on_connection(uv_stream_t *listener, int status)
{
    probe__control *c = listener->data;
    if (status != 0) return;
    control_conn *conn = calloc(1, sizeof *conn);
    if (conn == NULL) return;
    conn->control = c;
    conn->slot = -1;
    uv_pipe_init(c->loop, &conn->pipe, 0);
    conn->pipe.data = conn;
    conn->next = c->conns;
    if (c->conns != NULL) c->conns->prev = conn;
    c->conns = conn;
    if (uv_accept(listener, (uv_stream_t *)&conn->pipe) != 0 || !same_user(&conn->pipe)) {
        conn_close(conn);
        return;
    }
    uv_read_start((uv_stream_t *)&conn->pipe, on_alloc, on_read);
}

static void on_listener_closed(uv_handle_t *handle)
{
    probe__control *c = handle->data;
    c->listener_closed = true;
    maybe_free(c);
}

int probe__control_start(uv_loop_t *loop, const char *path, unsigned slots, probe__control_fn fn,
                         void *user, probe__control **out)
{
    if (path == NULL || strlen(path) >= 108 || slots == 0 || slots > CHANNEL__HB_MAX_SLOTS ||
        fn == NULL)
        return elastic__fail(ELASTIC_EINVAL, "control socket: bad path or slots");
    probe__control *c = calloc(1, sizeof *c);
    if (c == NULL) return elastic__fail(ELASTIC_ENOMEM, "control socket");
    *c = (probe__control){ .loop = loop, .slots = slots, .fn = fn, .user = user };
    c->path = elastic__strdup(path);
    c->by_slot = calloc(slots, sizeof *c->by_slot);
    uv_pipe_init(loop, &c->listener, 0);
    c->listener.data = c;
    unlink(path); /* a stale socket from a previous agent in the same run directory */
    int err = c->path == NULL || c->by_slot == NULL ? UV_ENOMEM : uv_pipe_bind(&c->listener, path);
    if (err == 0) err = uv_listen((uv_stream_t *)&c->listener, 128, on_connection);
    if (err != 0) {
        uv_close((uv_handle_t *)&c->listener, on_listener_closed);
        return elastic__fail(ELASTIC_ESYS, "control socket %s: %s", path, uv_strerror(err));
    }
    *out = c;
    return 0;
}

static void on_sent(uv_write_t *req, int status)
{
    (void)status; /* a dead worker's write fails; its exit is handled elsewhere */
    free(req);
}

int probe__control_send(probe__control *c, unsigned slot, int type, const char *payload)
{
    size_t length = strlen(payload);
    if (slot >= c->slots || length > CHANNEL__MSG_MAX_PAYLOAD)
        return elastic__fail(ELASTIC_EINVAL, "control send");
    control_conn *conn = c->by_slot[slot];
    if (conn == NULL)
        return elastic__fail(ELASTIC_ENOTFOUND, "worker in slot %u is not connected", slot);
    uv_write_t *req = malloc(sizeof *req + sizeof(channel__msg_header) + length);
    if (req == NULL) return elastic__fail(ELASTIC_ENOMEM, "control send");
    char *frame = (char *)(req + 1);
    channel__msg_header header = { .magic = CHANNEL__MSG_MAGIC,
                                   .type = (uint16_t)type,
                                   .length = (uint32_t)length };
    memcpy(frame, &header, sizeof header);
    memcpy(frame + sizeof header, payload, length);
    uv_buf_t buf = uv_buf_init(frame, (unsigned)(sizeof header + length));
    int err = uv_write(req, (uv_stream_t *)&conn->pipe, &buf, 1, on_sent);
    if (err != 0) {
        free(req);
        return elastic__fail(ELASTIC_ECONNECT, "control send to slot %u: %s", slot,
                             uv_strerror(err));
    }
    return 0;
}

void probe__control_on_report(probe__control *c, probe__control_report_fn fn, void *user)
{
    c->report_fn = fn;
    c->report_user = user;
}

bool probe__control_connected(const probe__control *c, unsigned slot)
{
    return slot < c->slots && c->by_slot[slot] != NULL;
}

void probe__control_stop(probe__control *c)
{
    if (c == NULL) return;
    c->stopping = true;
    for (control_conn *conn = c->conns; conn != NULL; conn = conn->next) conn_close(conn);
    unlink(c->path);
    uv_close((uv_handle_t *)&c->listener, on_listener_closed);
}
