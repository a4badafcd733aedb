/*
 * The agent's HTTP endpoint on its libuv loop: /metrics (Prometheus text) and
 * /healthz. One request per connection, a bounded head, a read deadline and a
 * cap on concurrent connections, so a scraper (or anyone) cannot hold it up.
 */
#include "probe/probe.h"

#include <stdio.h>
#include <stdlib.h>

#define METRICS_MAX_CONNECTIONS 64
#define METRICS_READ_TIMEOUT_MS 5000
#define METRICS_MAX_BODY        (16u << 20)

typedef struct metrics_conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_write_t write;
    probe__metrics_server *server;
    struct metrics_conn *prev, *next;
    char head[ELASTIC__HTTP_MAX_HEAD];
    size_t len;
    bool responding, closing;
    int open_handles;
    char *response;
} metrics_conn;

struct probe__metrics_server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    int port;
    probe__metrics_render_fn render;
    probe__health_fn health;
    void *user;
    metrics_conn *conns;
    unsigned connections;
    bool listener_closed;
};

static void maybe_free_server(probe__metrics_server *server)
{
    if (server->listener_closed && server->conns == NULL) free(server);
}

static void conn_release(uv_handle_t *handle)
{
    metrics_conn *conn = handle->data;
    if (--conn->open_handles > 0) return;
    probe__metrics_server *server = conn->server;
    if (conn->prev != NULL)
        conn->prev->next = conn->next;
    else
        server->conns = conn->next;
    if (conn->next != NULL) conn->next->prev = conn->prev;
    server->connections--;
    free(conn->response);
    free(conn);
    maybe_free_server(server);
}

static void conn_close(metrics_conn *conn)
{
    if (conn->closing) return;
    conn->closing = true;
    uv_close((uv_handle_t *)&conn->timer, conn_release);
    uv_close((uv_handle_t *)&conn->tcp, conn_release);
}

static void on_written(uv_write_t *req, int status)
{
    (void)status;
    conn_close(req->data);
}

static const char *status_text(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Internal Server Error";
    }
}

static void respond(metrics_conn *conn, int status, const char *type, const char *body,
                    size_t body_len, bool head_only)
{
    conn->responding = true;
    uv_read_stop((uv_stream_t *)&conn->tcp);
    char header[256];
    int n = snprintf(
        header, sizeof header,
        "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
        status, status_text(status), type, body_len);
    size_t total = (size_t)n + (head_only ? 0 : body_len);
    conn->response = malloc(total);
    if (conn->response == NULL) {
        conn_close(conn);
        return;
    }
    memcpy(conn->response, header, (size_t)n);
    if (!head_only && body_len > 0) memcpy(conn->response + n, body, body_len);
    uv_buf_t buf = uv_buf_init(conn->response, (unsigned)total);
    conn->write.data = conn;
    if (uv_write(&conn->write, (uv_stream_t *)&conn->tcp, &buf, 1, on_written) != 0)
        conn_close(conn);
}

static void route(metrics_conn *conn, const elastic__http_request *req)
{
    probe__metrics_server *server = conn->server;
    bool head_only = strcmp(req->method, "HEAD") == 0;
    if (strcmp(req->path, "/metrics") == 0) {
        elastic__text text;
        elastic__text_init(&text, METRICS_MAX_BODY);
        server->render(server->user, &text);
        respond(conn, 200, "text/plain; version=0.0.4; charset=utf-8",
                text.data != NULL ? text.data : "", text.len, head_only);
        elastic__text_free(&text);
    } else if (strcmp(req->path, "/healthz") == 0) {
        char reason[256] = "";
        bool healthy = server->health(server->user, reason, sizeof reason);
        char body[300];
        int n = snprintf(body, sizeof body, healthy ? "ok\n" : "unhealthy: %s\n", reason);
        respond(conn, healthy ? 200 : 503, "text/plain; charset=utf-8", body, (size_t)n, head_only);
    } else {
        respond(conn, 404, "text/plain; charset=utf-8", "not found\n", 10, head_only);
    }
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
    metrics_conn *conn = handle->data;
    (void)suggested;
    *buf = uv_buf_init(conn->head + conn->len, (unsigned)(sizeof conn->head - conn->len));
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    metrics_conn *conn = stream->data;
    (void)buf;
    if (nread < 0) {
        conn_close(conn);
        return;
    }
    conn->len += (size_t)nread;
    elastic__http_request req;
    int rc = elastic__http_parse(conn->head, conn->len, &req);
    if (rc > 0)
        route(conn, &req);
    else if (rc < 0)
        respond(conn, req.status, "text/plain; charset=utf-8", "bad request\n", 12, false);
    else if (conn->len == sizeof conn->head)
        respond(conn, 431, "text/plain; charset=utf-8", "too large\n", 10, false);
}

static void on_read_timeout(uv_timer_t *timer)
{
    metrics_conn *conn = timer->data;
    if (!conn->responding) conn_close(conn);
}

static void on_connection(uv_stream_t *listener, int status)
{
    probe__metrics_server *server = listener->data;
    if (status != 0) return;
    metrics_conn *conn = calloc(1, sizeof *conn);
    if (conn == NULL) return;
    conn->server = server;
    uv_tcp_init(server->loop, &conn->tcp);
    uv_timer_init(server->loop, &conn->timer);
    conn->tcp.data = conn->timer.data = conn;
    conn->open_handles = 2;
    conn->next = server->conns;
    if (server->conns != NULL) server->conns->prev = conn;
    server->conns = conn;
    server->connections++;
    if (uv_accept(listener, (uv_stream_t *)&conn->tcp) != 0 ||
        server->connections > METRICS_MAX_CONNECTIONS) {
        conn_close(conn);
        return;
    }
    uv_timer_start(&conn->timer, on_read_timeout, METRICS_READ_TIMEOUT_MS, 0);
    uv_read_start((uv_stream_t *)&conn->tcp, on_alloc, on_read);
}

static int bind_listener(probe__metrics_server *server, const char *host, int port)
{
    struct sockaddr_storage addr;
    int err = strchr(host, ':') != NULL ? uv_ip6_addr(host, port, (struct sockaddr_in6 *)&addr)
                                        : uv_ip4_addr(host, port, (struct sockaddr_in *)&addr);
    if (err == 0) err = uv_tcp_bind(&server->listener, (const struct sockaddr *)&addr, 0);
    if (err == 0) err = uv_listen((uv_stream_t *)&server->listener, 64, on_connection);
    if (err != 0)
        return elastic__fail(ELASTIC_ECONNECT, "metrics endpoint %s:%d: %s", host, port,
                             uv_strerror(err));
    int len = sizeof addr;
    uv_tcp_getsockname(&server->listener, (struct sockaddr *)&addr, &len);
    server->port = ntohs(addr.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&addr)->sin6_port
                                                    : ((struct sockaddr_in *)&addr)->sin_port);
    return 0;
}

static void on_listener_closed(uv_handle_t *handle)
{
    probe__metrics_server *server = handle->data;
    server->listener_closed = true;
    maybe_free_server(server);
}

int probe__metrics_start(uv_loop_t *loop, const char *host, int port,
                         probe__metrics_render_fn render, probe__health_fn health, void *user,
                         probe__metrics_server **out)
{
    if (port < 0 || port > 65535 || render == NULL || health == NULL)
        return elastic__fail(ELASTIC_EINVAL, "metrics endpoint: port %d", port);
    probe__metrics_server *server = calloc(1, sizeof *server);
    if (server == NULL) return elastic__fail(ELASTIC_ENOMEM, "metrics endpoint");
    *server =
        (probe__metrics_server){ .loop = loop, .render = render, .health = health, .user = user };
    uv_tcp_init(loop, &server->listener);
    server->listener.data = server;
    int rc = bind_listener(server, host != NULL ? host : "127.0.0.1", port);
    if (rc != 0) {
        uv_close((uv_handle_t *)&server->listener, on_listener_closed);
        return rc;
    }
    *out = server;
    return 0;
}

int probe__metrics_port(const probe__metrics_server *server)
{
    return server->port;
}

void probe__metrics_stop(probe__metrics_server *server)
{
    if (server == NULL) return;
    for (metrics_conn *conn = server->conns; conn != NULL; conn = conn->next) conn_close(conn);
    uv_close((uv_handle_t *)&server->listener, on_listener_closed);
}

void probe__prom_escape(const char *in, char *out, size_t size)
{
    size_t o = 0;
    for (; *in != '\0' && o + 2 < size; in++) {
        char c = *in;
        if (c == '\\' || c == '"' || c == '\n') {
            out[o++] = '\\';
            c = c == '\n' ? 'n' : c;
        }
        out[o++] = c;
    }
    out[o] = '\0';
}
