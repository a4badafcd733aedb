/*
 * A TCP proxy that adds a fixed latency in each direction: the multi-host tests'
 * stand-in for netem delay, which this kernel lacks. Every chunk read is held
 * until its due time, then written in order. Usage:
 *   delay_proxy LISTEN_ADDR LISTEN_PORT TARGET_ADDR TARGET_PORT DELAY_MS [http1]
 * Prints "listening <port>" once bound (port 0 picks a free one). With
 * "http1" it passes HTTP/1.x only, as a proxy without HTTP/2 does: a
 * connection that opens with HTTP/2's preface is closed (no gRPC gets
 * through, etcd's JSON gateway does).
 */
#include <uv.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_QUEUED_BYTES (64u << 20) /* per direction: beyond it, reading pauses */

typedef struct chunk {
    struct chunk *next;
    uint64_t due_ms;
    size_t len;
    char data[];
} chunk;

typedef struct pipe_end pipe_end;
typedef struct link_pair link_pair;

/* One direction: read from `from`, write to `to` after the delay. Every handle's
 * data points at its pipe_end (the timer's and the reading socket's). */
struct pipe_end {
    uv_tcp_t *from, *to;
    chunk *head, *tail;
    size_t queued;
    int paused; /* reading stopped while over MAX_QUEUED_BYTES */
    int ended;  /* the EOF went through (after its delay) as a write shutdown */
    uv_timer_t timer;
    link_pair *pair;
};

struct link_pair {
    uv_tcp_t client, server;
    pipe_end up, down; /* up: client -> server; down: server -> client */
    int closing, handles_open;
    int client_spoke; /* the client's first bytes were seen (the http1 check) */
    uv_connect_t connect;
    uv_shutdown_t shutdowns[2];
};

static uint64_t delay_ms;
static int http1_only;
static struct sockaddr_storage target;

static void pair_close(link_pair *pair);

static void on_handle_closed(uv_handle_t *handle)
{
    pipe_end *closed_end = handle->data;
    link_pair *pair = closed_end->pair;
    if (--pair->handles_open > 0) return;
    for (pipe_end *end = &pair->up; end != NULL; end = end == &pair->up ? &pair->down : NULL)
        while (end->head != NULL) {
            chunk *next = end->head->next;
            free(end->head);
            end->head = next;
        }
    free(pair);
}

static void pair_close(link_pair *pair)
{
    if (pair->closing) return;
    pair->closing = 1;
    uv_handle_t *handles[] = { (uv_handle_t *)&pair->client, (uv_handle_t *)&pair->server,
                               (uv_handle_t *)&pair->up.timer, (uv_handle_t *)&pair->down.timer };
    for (size_t i = 0; i < sizeof handles / sizeof handles[0]; i++)
        uv_close(handles[i], on_handle_closed);
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
    (void)handle;
    buf->base = malloc(suggested);
    buf->len = buf->base != NULL ? suggested : 0;
}

static void on_written(uv_write_t *req, int status)
{
    link_pair *pair = req->data;
    free(req);
    if (status < 0) pair_close(pair);
}

static void arm_timer(pipe_end *end);
static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);
static void on_shutdown(uv_shutdown_t *req, int status);

static void flush_due(uv_timer_t *timer)
{
    pipe_end *end = timer->data;
    uint64_t now = uv_now(timer->loop);
    while (end->head != NULL && end->head->due_ms <= now && !end->pair->closing) {
        chunk *c = end->head;
        end->head = c->next;
        if (end->head == NULL) end->tail = NULL;
        end->queued -= c->len;
        if (c->len == 0) { /* EOF marker: half-close the other side once writes drain */
            free(c);
            uv_shutdown_t *req = &end->pair->shutdowns[end == &end->pair->up ? 0 : 1];
            req->data = end;
            if (uv_shutdown(req, (uv_stream_t *)end->to, on_shutdown) != 0) pair_close(end->pair);
            return;
        }
        uv_write_t *req = malloc(sizeof *req + c->len);
        if (req == NULL) {
            free(c);
            pair_close(end->pair);
            return;
        }
        memcpy(req + 1, c->data, c->len);
        uv_buf_t buf = uv_buf_init((char *)(req + 1), (unsigned)c->len);
        req->data = end->pair;
        free(c);
        if (uv_write(req, (uv_stream_t *)end->to, &buf, 1, on_written) != 0) {
            free(req);
            pair_close(end->pair);
            return;
        }
    }
    if (end->paused && end->queued <= MAX_QUEUED_BYTES / 2 && !end->pair->closing) {
        end->paused = 0; /* the backlog drained: read again */
        uv_read_start((uv_stream_t *)end->from, on_alloc, on_read);
    }
    arm_timer(end);
}

static void arm_timer(pipe_end *end)
{
    if (end->pair->closing || end->head == NULL) return;
    uint64_t now = uv_now(end->timer.loop);
    uv_timer_start(&end->timer, flush_due, end->head->due_ms > now ? end->head->due_ms - now : 0,
                   0);
}

/* Queues len bytes (0: the EOF marker) to leave after the delay. */
static int enqueue(pipe_end *end, const char *data, size_t len)
{
    chunk *c = malloc(sizeof *c + len);
    if (c == NULL) return -1;
    c->next = NULL;
    c->due_ms = uv_now(end->timer.loop) + delay_ms;
    c->len = len;
    memcpy(c->data, data, len);
    if (end->tail != NULL)
        end->tail->next = c;
    else
        end->head = c;
    end->tail = c;
    end->queued += len;
    if (!uv_is_active((uv_handle_t *)&end->timer)) arm_timer(end);
    return 0;
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    pipe_end *end = stream->data;
    int rc = 0;
    if (nread == UV_EOF) {
        uv_read_stop(stream);
        rc = enqueue(end, "", 0); /* the peer's FIN travels with the same delay */
    } else if (nread < 0) {
        rc = -1; /* a reset or error: both sides go, as with a cut cable */
    } else if (nread > 0 && http1_only && end == &end->pair->up && !end->pair->client_spoke &&
               nread >= 3 && memcmp(buf->base, "PRI", 3) == 0) {
        rc = -1; /* HTTP/2's preface ("PRI * HTTP/2.0"): not passed */
    } else if (nread > 0) {
        if (end == &end->pair->up) end->pair->client_spoke = 1;
        rc = enqueue(end, buf->base, (size_t)nread);
        if (end->queued > MAX_QUEUED_BYTES) {
            end->paused = 1;
            uv_read_stop(stream);
        }
    }
    free(buf->base);
    if (rc != 0) pair_close(end->pair);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    pipe_end *end = req->data;
    end->ended = 1;
    if (status < 0 || (end->pair->up.ended && end->pair->down.ended)) pair_close(end->pair);
}

static void end_init(link_pair *pair, pipe_end *end, uv_tcp_t *from, uv_tcp_t *to)
{
    end->from = from;
    end->to = to;
    end->pair = pair;
    uv_timer_init(from->loop, &end->timer);
    end->timer.data = end;
    from->data = end;
}

static void on_target_connected(uv_connect_t *req, int status)
{
    link_pair *pair = req->data;
    if (status < 0 || pair->closing) {
        pair_close(pair);
        return;
    }
    uv_tcp_nodelay(&pair->client, 1);
    uv_tcp_nodelay(&pair->server, 1);
    uv_read_start((uv_stream_t *)&pair->client, on_alloc, on_read);
    uv_read_start((uv_stream_t *)&pair->server, on_alloc, on_read);
}

static void on_connection(uv_stream_t *listener, int status)
{
    if (status < 0) return;
    link_pair *pair = calloc(1, sizeof *pair);
    if (pair == NULL) return;
    uv_tcp_init(listener->loop, &pair->client);
    uv_tcp_init(listener->loop, &pair->server);
    pair->handles_open = 4;
    end_init(pair, &pair->up, &pair->client, &pair->server);
    end_init(pair, &pair->down, &pair->server, &pair->client);
    if (uv_accept(listener, (uv_stream_t *)&pair->client) != 0) {
        pair_close(pair);
        return;
    }
    pair->connect.data = pair;
    if (uv_tcp_connect(&pair->connect, &pair->server, (struct sockaddr *)&target,
                       on_target_connected) != 0)
        pair_close(pair);
}

static int parse_addr(const char *host, const char *port, struct sockaddr_storage *out)
{
    char *end;
    long value = strtol(port, &end, 10);
    if (*end != '\0' || value < 0 || value > 65535) return -1;
    if (uv_ip4_addr(host, (int)value, (struct sockaddr_in *)out) == 0) return 0;
    return uv_ip6_addr(host, (int)value, (struct sockaddr_in6 *)out);
}

int main(int argc, char **argv)
{
    struct sockaddr_storage listen_addr;
    char *end;
    if ((argc != 6 && !(argc == 7 && strcmp(argv[6], "http1") == 0)) ||
        parse_addr(argv[1], argv[2], &listen_addr) != 0 ||
        parse_addr(argv[3], argv[4], &target) != 0) {
        fprintf(stderr, "usage: delay_proxy LISTEN_ADDR LISTEN_PORT TARGET_ADDR TARGET_PORT "
                        "DELAY_MS [http1]\n");
        return 2;
    }
    http1_only = argc == 7;
    long delay = strtol(argv[5], &end, 10);
    if (*end != '\0' || delay < 0 || delay > 60000) {
        fprintf(stderr, "delay_proxy: DELAY_MS must be 0..60000\n");
        return 2;
    }
    delay_ms = (uint64_t)delay;
    uv_loop_t *loop = uv_default_loop();
    uv_tcp_t listener;
    uv_tcp_init(loop, &listener);
    int rc = uv_tcp_bind(&listener, (struct sockaddr *)&listen_addr, 0);
    if (rc == 0) rc = uv_listen((uv_stream_t *)&listener, 128, on_connection);
    if (rc != 0) {
        fprintf(stderr, "delay_proxy: cannot listen on %s:%s: %s\n", argv[1], argv[2],
                uv_strerror(rc));
        return 1;
    }
    struct sockaddr_storage bound;
    int len = sizeof bound;
    uv_tcp_getsockname(&listener, (struct sockaddr *)&bound, &len);
    printf("listening %d\n", ntohs(((struct sockaddr_in *)&bound)->sin_port));
    fflush(stdout);
    return uv_run(loop, UV_RUN_DEFAULT);
}
