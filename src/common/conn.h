/*
 * The one connection layer under every TCP client of ours (the store client,
 * the replica channel, the HTTP GET of elasticctl): dialing host:port over
 * every address it resolves to within one deadline, and whole sends and
 * receives with a deadline on a socket (EINTR, partial I/O and EAGAIN
 * handled once, here). The HMAC proof that may run over such a connection is
 * conn_proof.h. Error codes: ELASTIC_ETIMEDOUT for a deadline, ELASTIC_ECONNECT
 * for the peer (refused, reset, closed), ELASTIC_ESYS for this host's calls;
 * each failure is reported once, through elastic__fail, with its `what`.
 */
#ifndef ELASTIC_COMMON_CONN_H
#define ELASTIC_COMMON_CONN_H

#include <stddef.h>
#include <stdint.h>

/* Waits until fd is ready for `events` (POLLIN/POLLOUT) or the deadline
 * passes: 0, ELASTIC_ETIMEDOUT, or ELASTIC_ESYS; reports nothing. */
int elastic__conn_wait(int fd, short events, uint64_t deadline_ms);

/* Resolves host (any family) and port, then connects to each address in
 * turn until one accepts, all before deadline_ms (UINT64_MAX: none). An
 * address that refuses or times out passes to the next; each of the n
 * addresses left gets an equal share of the time left, the last all of it,
 * so one silent address cannot use the whole deadline. On success *fd_out is
 * a connected, non-blocking, close-on-exec socket with TCP_NODELAY set.
 * Failures read `<what> host "<host>": <resolver's reason>` or
 * `connect to <what> <host>:<port>: <cause>`, the cause of the last address
 * tried (one in a family this host opens no socket in does not hide it),
 * e.g. "Connection refused (ECONNREFUSED)" or "timed out". */
int elastic__dial(const char *host, int port, uint64_t deadline_ms, const char *what,
                  int *fd_out);

/* Connects a stream socket to the Unix socket at path before the deadline
 * (a listener whose backlog is full makes it wait): a blocking socket, as
 * the control channel (channel/) uses it. Failures read
 * `<what>: connect to <path>: <cause>`. */
int elastic__dial_unix(const char *path, uint64_t deadline_ms, const char *what, int *fd_out);

/* elastic__dial's loop over addresses already resolved (the tests give it
 * a list of their own); host and port only name the peer in the error. */
struct addrinfo;
int elastic__dial_addrs(const struct addrinfo *list, const char *host, int port,
                        uint64_t deadline_ms, const char *what, int *fd_out);

/* Sends all len bytes before the deadline (the socket may be blocking or
 * not: each call is MSG_DONTWAIT, waiting is poll's). Never raises SIGPIPE.
 * Failures read `<what>: timed out` or `<what>: <errno text>`. */
int elastic__send_all(int fd, const void *data, size_t len, uint64_t deadline_ms,
                      const char *what);

/* Receives exactly len bytes before the deadline. The peer closing first is
 * ELASTIC_ECONNECT `<what>: the peer closed the connection`. */
int elastic__recv_exact(int fd, void *data, size_t len, uint64_t deadline_ms, const char *what);

/* Sends len bytes of file_fd from offset with sendfile(2) (page cache or
 * tmpfs straight to the socket) before the deadline; a file shorter than
 * offset + len is ELASTIC_EIO `<what>: the file ended early`. */
int elastic__sendfile_all(int fd, int file_fd, uint64_t offset, uint64_t len,
                          uint64_t deadline_ms, const char *what);

#endif /* ELASTIC_COMMON_CONN_H */
