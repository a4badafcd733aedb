/*
 * The store server's life: options, binding the listener (IPv4 or IPv6),
 * the loop thread, and a stop that closes every connection so clients'
 * pending calls fail at once instead of waiting for their deadlines.
 */
#include "store/server.h"

#include <netdb.h>
#include <stdlib.h>

static void opts_defaults(elastic_store_server_opts *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
    opts->host = "127.0.0.1";
    opts->port = 0;
    opts->max_key_bytes = 4096;
    opts->max_value_bytes = 16u << 20;
    opts->max_connections = 4096;
    opts->max_connection_buffer = 64u << 20;
    opts->max_total_bytes = (size_t)1 << 30;
    opts->handshake_timeout_ms = 5000;
    opts->idle_timeout_ms = -1;
    opts->max_pending_waits = 1024;
    opts->max_buffered_bytes = 64u << 20;
    opts->frame_timeout_ms = 30000;
}

ELASTIC_EXTERN int elastic_store_server_opts_init(elastic_store_server_opts *opts,
                                                  size_t struct_size)
{
    elastic_store_server_opts defaults;
    opts_defaults(&defaults);
    return ELASTIC__STRUCT_INIT(opts, struct_size, &defaults, "elastic_store_server_opts");
}

static int check_opts(const elastic_store_server_opts *o)
{
    if (o->port < 0 || o->port > 65535)
        return elastic__fail(ELASTIC_EINVAL, "port %d is not 0..65535", o->port);
    if (o->max_key_bytes == 0 || o->max_key_bytes > (1u << 20))
        return elastic__fail(ELASTIC_EINVAL, "max_key_bytes must be 1 .. 1 MiB");
    if (o->max_value_bytes > (1u << 30))
        return elastic__fail(ELASTIC_EINVAL, "max_value_bytes must be <= 1 GiB");
    if (o->max_connections == 0)
        return elastic__fail(ELASTIC_EINVAL, "max_connections must be > 0");
    if (o->max_connection_buffer < o->max_key_bytes + o->max_value_bytes + 64 ||
        o->max_connection_buffer > UINT32_MAX)
        return elastic__fail(ELASTIC_EINVAL,
                             "max_connection_buffer must hold one key and value and be < 4 GiB");
    if (o->handshake_timeout_ms <= 0)
        return elastic__fail(ELASTIC_EINVAL, "handshake_timeout_ms must be > 0");
    if (o->idle_timeout_ms == 0)
        return elastic__fail(ELASTIC_EINVAL, "idle_timeout_ms must be > 0 (or < 0: never)");
    if (o->max_pending_waits == 0)
        return elastic__fail(ELASTIC_EINVAL, "max_pending_waits must be > 0");
    if (o->max_buffered_bytes < o->max_key_bytes + o->max_value_bytes + 64)
        return elastic__fail(ELASTIC_EINVAL, "max_buffered_bytes must hold one key and value");
    if (o->frame_timeout_ms <= 0)
        return elastic__fail(ELASTIC_EINVAL, "frame_timeout_ms must be > 0");
    return 0;
}

static void on_connection(uv_stream_t *listener, int status)
{
    elastic_store_server *server = listener->data;
    if (status < 0) {
        ELASTIC_LOG_W("store", "accept: %s", uv_strerror(status));
        return;
    }
    store__conn_accept(server);
    store__server_flush(server);
}

static void close_and_forget(uv_handle_t *handle)
{
    if (!uv_is_closing(handle)) uv_close(handle, NULL);
}

/* Runs on the loop thread: closing every handle lets uv_run return. */
static void on_stop(uv_async_t *async)
{
    elastic_store_server *server = async->data;
    close_and_forget((uv_handle_t *)&server->listener);
    close_and_forget((uv_handle_t *)&server->pump_timer);
    while (server->conns != NULL) store__conn_close(server->conns, "server stopping");
    store__server_flush(server);
    close_and_forget((uv_handle_t *)&server->stop_async);
}

static void *loop_thread(void *arg)
{
    elastic_store_server *server = arg;
    uv_run(&server->loop, UV_RUN_DEFAULT);
    return NULL;
}

/* Resolves host (numeric or a name) and binds the listener to it. */
static int bind_listener(elastic_store_server *server)
{
    const elastic_store_server_opts *o = &server->opts;
    struct addrinfo hints = { .ai_family = AF_UNSPEC,
                              .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_PASSIVE };
    char port_text[16];
    snprintf(port_text, sizeof port_text, "%d", o->port);
    struct addrinfo *found = NULL;
    int rc = getaddrinfo(o->host, port_text, &hints, &found);
    if (rc != 0)
        return elastic__fail(ELASTIC_EINVAL, "store host \"%s\": %s", o->host, gai_strerror(rc));
    rc = uv_tcp_bind(&server->listener, found->ai_addr, 0);
    freeaddrinfo(found);
    /* A job's nodes connect at once: the accept queue holds them all (the
     * kernel caps it at net.core.somaxconn). */
    int backlog = o->max_connections < 65535 ? (int)o->max_connections : 65535;
    if (backlog < 1024) backlog = 1024;
    if (rc == 0) rc = uv_listen((uv_stream_t *)&server->listener, backlog, on_connection);
    if (rc != 0)
        return elastic__fail(ELASTIC_ECONNECT, "listen on %s:%d: %s", o->host, o->port,
                             uv_strerror(rc));
    struct sockaddr_storage bound;
    int bound_len = sizeof bound;
    uv_tcp_getsockname(&server->listener, (struct sockaddr *)&bound, &bound_len);
    server->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                     : ((struct sockaddr_in *)&bound)->sin_port);
    return 0;
}

static void server_free(elastic_store_server *server)
{
    store__wait_free_index(server);
    store__kv_free(&server->kv);
    store__token_free(server->token);
    free((char *)server->opts.host);
    free(server);
}

/* Sets up the loop and listener; on failure the loop is run dry and closed. */
static int server_init(elastic_store_server *server)
{
    int rc = uv_loop_init(&server->loop);
    if (rc != 0) return elastic__fail(ELASTIC_ESYS, "uv_loop_init: %s", uv_strerror(rc));
    uv_tcp_init(&server->loop, &server->listener);
    server->listener.data = server;
    uv_async_init(&server->loop, &server->stop_async, on_stop);
    server->stop_async.data = server;
    uv_timer_init(&server->loop, &server->pump_timer);
    server->pump_timer.data = server;
    int err = bind_listener(server);
    if (err == 0 && pthread_create(&server->thread, NULL, loop_thread, server) != 0)
        err = elastic__fail(ELASTIC_ESYS, "cannot start the store thread");
    if (err != 0) {
        uv_close((uv_handle_t *)&server->listener, NULL);
        uv_close((uv_handle_t *)&server->stop_async, NULL);
        uv_close((uv_handle_t *)&server->pump_timer, NULL);
        uv_run(&server->loop, UV_RUN_DEFAULT);
        uv_loop_close(&server->loop);
    }
    return err;
}

ELASTIC_EXTERN int elastic_store_server_start(const elastic_store_server_opts *opts,
                                              elastic_store_server **out)
{
    elastic__clear_error();
    if (out == NULL) return elastic__fail(ELASTIC_EINVAL, "server pointer is NULL");
    *out = NULL;
    elastic_store_server *server = calloc(1, sizeof *server);
    if (server == NULL) return ELASTIC_ENOMEM;
    opts_defaults(&server->opts);
    int err = ELASTIC__STRUCT_READ(&server->opts, opts, "elastic_store_server_opts");
    if (err == 0 && server->opts.host == NULL) server->opts.host = "127.0.0.1";
    if (err == 0) err = check_opts(&server->opts);
    server->opts.host = elastic__strdup(err == 0 ? server->opts.host : "");
    if (err == 0) err = store__token_resolve(server->opts.token, &server->token);
    server->opts.token = NULL; /* the resolved copy is server->token */
    if (err == 0)
        err = store__kv_init(&server->kv, server->opts.max_total_bytes, store__wait_on_change,
                             server);
    if (err == 0) {
        server->limits.max_key_bytes = server->opts.max_key_bytes;
        server->limits.max_value_bytes = server->opts.max_value_bytes;
        /* One largest key and value always fit; batches may use half the buffer. */
        size_t single = server->opts.max_key_bytes + server->opts.max_value_bytes + 64;
        size_t half = server->opts.max_connection_buffer / 2;
        server->max_frame_body = single > half ? single : half;
        err = server_init(server);
    }
    if (err != 0) {
        server_free(server);
        return err;
    }
    ELASTIC_LOG_I("store", "listening on %s:%d%s", server->opts.host, server->port,
                  server->token ? " (token required)" : "");
    *out = server;
    return 0;
}

ELASTIC_EXTERN int elastic_store_server_get_port(const elastic_store_server *server, int *port)
{
    if (server == NULL || port == NULL)
        return elastic__fail(ELASTIC_EINVAL, "store_server_get_port: NULL argument");
    *port = server->port;
    return 0;
}

ELASTIC_EXTERN void elastic_store_server_close(elastic_store_server *server)
{
    if (server == NULL) return;
    uv_async_send(&server->stop_async);
    pthread_join(server->thread, NULL);
    uv_loop_close(&server->loop);
    server_free(server);
}
