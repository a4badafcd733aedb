/*
 * Resolving host:port and connecting to the first address that answers: the
 * part the store client and the replica transport share. How one address is
 * tried (its deadline, its error text) stays with the caller.
 */
#ifndef ELASTIC_COMMON_TCP_CONNECT_H
#define ELASTIC_COMMON_TCP_CONNECT_H

#include <netdb.h>
#include <stdint.h>

/* Tries one resolved address before deadline_ms: 0 with *fd_out a connected
 * socket, or an ELASTIC_E* code already reported through elastic__fail. */
typedef int (*elastic__connect_one_fn)(const struct addrinfo *ai, uint64_t deadline_ms,
                                       int *fd_out);

/* Resolves host (any family) and port (numeric), then calls connect_one on
 * each address in turn until one connects. Failures read
 * `<resolve_what> "<host>": <resolver's reason>` (ELASTIC_ECONNECT) or
 * `connect to <connect_what> <host>:<port>: <last address's reason>` with
 * connect_one's code. 0 and *fd_out on success; *fd_out untouched otherwise. */
int elastic__tcp_connect_any(const char *host, int port, uint64_t deadline_ms,
                             elastic__connect_one_fn connect_one, const char *resolve_what,
                             const char *connect_what, int *fd_out);

#endif /* ELASTIC_COMMON_TCP_CONNECT_H */
