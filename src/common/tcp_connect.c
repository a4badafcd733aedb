/* See tcp_connect.h. */
#include "common/tcp_connect.h"

#include "common/common.h"

#include <stdio.h>
#include <sys/socket.h>

int elastic__tcp_connect_any(const char *host, int port, uint64_t deadline_ms,
                             elastic__connect_one_fn connect_one, const char *resolve_what,
                             const char *connect_what, int *fd_out)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC,
                              .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_NUMERICSERV };
    char port_text[16];
    snprintf(port_text, sizeof port_text, "%d", port);
    struct addrinfo *found = NULL;
    int gai = getaddrinfo(host, port_text, &hints, &found);
    if (gai != 0)
        return elastic__fail(ELASTIC_ECONNECT, "%s \"%s\": %s", resolve_what, host,
                             gai_strerror(gai));
    int rc = ELASTIC_ECONNECT, fd = -1;
    for (struct addrinfo *ai = found; ai != NULL && rc != 0; ai = ai->ai_next)
        rc = connect_one(ai, deadline_ms, &fd);
    freeaddrinfo(found);
    if (rc != 0) {
        /* The detail lives in the buffer elastic__fail writes: copy it out
         * first, or the message is formatted into itself. */
        char why[256];
        snprintf(why, sizeof why, "%s", elastic_last_error());
        return elastic__fail(rc, "connect to %s %s:%d: %s", connect_what, host, port, why);
    }
    *fd_out = fd;
    return 0;
}
