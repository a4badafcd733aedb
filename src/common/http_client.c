/*
 * A minimal HTTP/1.1 GET client (plain TCP, one request per connection):
 * what `elasticctl status` and the tests use to read an agent's /metrics and
 * /healthz. The whole exchange has one deadline (dial and send are
 * common/conn.h's: every address the host resolves to is tried) and the
 * answer is bounded.
 */
#include "common/clock.h"
#include "common/conn.h"
#include "common/endpoint.h"
#include "common/http.h"
#include "common/parse_int.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define HTTP_GET_MAX_ANSWER (16u << 20)

static int connect_endpoint(const char *endpoint, uint64_t deadline, int *fd_out)
{
    char host[ELASTIC__HOST_MAX + 1];
    int port;
    int rc = elastic__endpoint_parse("endpoint", endpoint, ELASTIC__PORT_REQUIRED, host,
                                     sizeof host, &port);
    return rc != 0 ? rc : elastic__dial(host, port, deadline, "endpoint", fd_out);
}

/* The request out, then the answer until the server closes (it answers
 * once per connection), bounded. */
static int exchange(int fd, const char *request, uint64_t deadline, elastic__text *response)
{
    int rc = elastic__send_all(fd, request, strlen(request), deadline, "send");
    char buf[16384];
    while (rc == 0) {
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n == 0) return 0;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (elastic__conn_wait(fd, POLLIN, deadline) != 0)
                return elastic__fail(ELASTIC_ETIMEDOUT, "no complete answer in time");
        } else if (n < 0 && errno != EINTR) {
            return elastic__fail(ELASTIC_ECONNECT, "recv: %s", strerror(errno));
        } else if (n > 0) {
            elastic__text_append(response, buf, (size_t)n);
            if (response->overflow)
                return elastic__fail(ELASTIC_ELIMIT, "answer larger than %u bytes",
                                     HTTP_GET_MAX_ANSWER);
        }
    }
    return rc;
}

/* The status code of "HTTP/1.x NNN ...", or -1. */
static int status_code(const char *head)
{
    int64_t code;
    if (strncmp(head, "HTTP/1.", 7) != 0 || head[7] < '0' || head[7] > '9' || head[8] != ' ' ||
        strnlen(head + 9, 4) < 4 || (head[12] != ' ' && head[12] != '\r') ||
        elastic__parse_i64_n(NULL, head + 9, 3, 100, 599, &code) != 0)
        return -1;
    return (int)code;
}

int elastic__http_get(const char *endpoint, const char *path, int timeout_ms, elastic__text *body,
                      int *status)
{
    uint64_t deadline = elastic__deadline_ms(timeout_ms);
    int fd = -1;
    int rc = connect_endpoint(endpoint, deadline, &fd);
    if (rc != 0) return rc;
    char request[512];
    snprintf(request, sizeof request, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
             path, endpoint);
    elastic__text response;
    elastic__text_init(&response, HTTP_GET_MAX_ANSWER);
    rc = exchange(fd, request, deadline, &response);
    close(fd);
    const char *head_end = response.data != NULL ? strstr(response.data, "\r\n\r\n") : NULL;
    if (rc == 0 && (head_end == NULL || (*status = status_code(response.data)) < 0))
        rc = elastic__fail(ELASTIC_EPROTO, "%s%s: not an HTTP answer", endpoint, path);
    if (rc == 0) elastic__text_printf(body, "%s", head_end + 4);
    elastic__text_free(&response);
    return rc;
}
