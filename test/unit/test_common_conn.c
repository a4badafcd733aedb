/* The connection layer (common/conn.h): dialing over every address within
 * one deadline, and deadline sends and receives. Loopback only: a refusing
 * address is a port bound but not listening (reserved for the test, so
 * nothing else can answer on it), a silent peer a listener nobody accepts
 * on or an accepted socket nobody writes to. */
#include "test.h"
#include "common/clock.h"
#include "common/conn.h"
#include "common/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* A TCP socket on 127.0.0.1, any port; listening (backlog 16) or only bound. */
static int loopback_socket(bool listening, int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof addr;
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        (listening && listen(fd, 16) != 0) ||
        getsockname(fd, (struct sockaddr *)&addr, &len) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    *port = ntohs(addr.sin_port);
    return fd;
}

static struct sockaddr_in loopback_addr(int port)
{
    struct sockaddr_in addr = { .sin_family = AF_INET,
                                .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    return addr;
}

/* A connected pair over loopback TCP: *client dialed, *server accepted. */
static void tcp_pair(int *client, int *server)
{
    int port = 0;
    int listener = loopback_socket(true, &port);
    ASSERT(listener >= 0);
    ASSERT_OK(elastic__dial("127.0.0.1", port, elastic__deadline_ms(5000), "test", client));
    *server = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
    ASSERT(*server >= 0);
    close(listener);
}

TEST(common_conn_dial_falls_through_a_refusing_address_to_a_listening_one)
{
    int refusing_port = 0, listening_port = 0;
    int refusing = loopback_socket(false, &refusing_port);
    int listening = loopback_socket(true, &listening_port);
    ASSERT(refusing >= 0 && listening >= 0);
    /* Two resolved addresses, the first refusing: what "localhost" gives a
     * host whose ::1 nobody listens on (this one resolves it to 127.0.0.1
     * alone, so the list is made here). */
    struct sockaddr_in first = loopback_addr(refusing_port), second = loopback_addr(listening_port);
    struct addrinfo second_ai = { .ai_family = AF_INET,
                                  .ai_socktype = SOCK_STREAM,
                                  .ai_addr = (struct sockaddr *)&second,
                                  .ai_addrlen = sizeof second };
    struct addrinfo first_ai = second_ai;
    first_ai.ai_addr = (struct sockaddr *)&first;
    first_ai.ai_next = &second_ai;
    int fd = -1;
    ASSERT_OK(elastic__dial_addrs(&first_ai, "twofold", 1, elastic__deadline_ms(5000), "test",
                                  &fd));
    int accepted = accept4(listening, NULL, NULL, SOCK_CLOEXEC);
    ASSERT(accepted >= 0);
    ASSERT_OK(elastic__send_all(fd, "hi", 2, elastic__deadline_ms(5000), "test send"));
    char got[2];
    ASSERT_OK(elastic__recv_exact(accepted, got, 2, elastic__deadline_ms(5000), "test recv"));
    ASSERT_MEM_EQ(got, "hi", 2);
    /* The refusing address, then one in a family no socket can be made in:
     * the error names host:port and the refusal, the real cause, once. */
    struct addrinfo no_family = second_ai;
    no_family.ai_family = AF_MAX + 1;
    first_ai.ai_next = &no_family;
    ASSERT_ERR(elastic__dial_addrs(&first_ai, "twofold", 1, elastic__deadline_ms(5000), "test",
                                   &fd),
               ELASTIC_ECONNECT);
    ASSERT_STR_EQ(elastic_last_error(),
                  "connect to test twofold:1: Connection refused (ECONNREFUSED)");
    close(accepted);
    close(fd);
    close(listening);
    close(refusing);
}

TEST(common_conn_dial_names_the_host_and_the_cause)
{
    int port = 0;
    int refusing = loopback_socket(false, &port);
    ASSERT(refusing >= 0);
    int fd = -1;
    ASSERT_ERR(elastic__dial("127.0.0.1", port, elastic__deadline_ms(5000), "store", &fd),
               ELASTIC_ECONNECT);
    char want[128];
    snprintf(want, sizeof want, "connect to store 127.0.0.1:%d: Connection refused (ECONNREFUSED)",
             port);
    ASSERT_STR_EQ(elastic_last_error(), want);
    ASSERT_ERR(elastic__dial("no-such-host.invalid", port, elastic__deadline_ms(5000), "store",
                             &fd),
               ELASTIC_ECONNECT);
    ASSERT(strncmp(elastic_last_error(), "store host \"no-such-host.invalid\": ", 35) == 0);
    close(refusing);
}

/* A listener nobody accepts on: the kernel completes the TCP handshake, and
 * then nothing answers. The one deadline of a dial and its exchange (the
 * HTTP GET's) ends it on time. */
TEST(common_conn_dial_deadline_holds_against_a_listener_that_never_accepts)
{
    int port = 0;
    int listener = loopback_socket(true, &port);
    ASSERT(listener >= 0);
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", port);
    elastic__text body;
    elastic__text_init(&body, 4096);
    int status = 0;
    uint64_t start = elastic__now_ms();
    ASSERT_ERR(elastic__http_get(endpoint, "/metrics", 300, &body, &status), ELASTIC_ETIMEDOUT);
    uint64_t took = elastic__now_ms() - start;
    ASSERT(took >= 290);
    ASSERT_LT(took, 3000);
    elastic__text_free(&body);
    close(listener);
}

TEST(common_conn_recv_deadline_holds_with_part_of_the_bytes_in)
{
    int client = -1, server = -1;
    tcp_pair(&client, &server);
    ASSERT_OK(elastic__send_all(server, "abc", 3, elastic__deadline_ms(5000), "test send"));
    char got[8];
    uint64_t start = elastic__now_ms();
    ASSERT_ERR(elastic__recv_exact(client, got, sizeof got, elastic__deadline_ms(200), "test recv"),
               ELASTIC_ETIMEDOUT);
    uint64_t took = elastic__now_ms() - start;
    ASSERT(took >= 190);
    ASSERT_LT(took, 3000);
    ASSERT_STR_EQ(elastic_last_error(), "test recv: timed out");
    /* The peer closing first is ELASTIC_ECONNECT, said so. */
    close(server);
    ASSERT_ERR(elastic__recv_exact(client, got, sizeof got, elastic__deadline_ms(5000), "test recv"),
               ELASTIC_ECONNECT);
    ASSERT_STR_EQ(elastic_last_error(), "test recv: the peer closed the connection");
    close(client);
}

typedef struct drain {
    int fd;
    size_t want;
    size_t got;
    uint64_t sum;
} drain;

/* Reads `want` bytes in whatever pieces come, summing them. */
static void *drain_main(void *arg)
{
    drain *d = arg;
    uint8_t buf[4096];
    while (d->got < d->want) {
        size_t n = d->want - d->got < sizeof buf ? d->want - d->got : sizeof buf;
        if (elastic__recv_exact(d->fd, buf, n, elastic__deadline_ms(20000), "drain") != 0) break;
        for (size_t i = 0; i < n; i++) d->sum += buf[i];
        d->got += n;
    }
    return NULL;
}

/* More than the socket buffers hold: send_all goes through partial sends
 * and waits, sendfile_all through a file, and every byte arrives. */
TEST(common_conn_send_all_and_sendfile_carry_more_than_the_buffers_hold)
{
    int client = -1, server = -1;
    tcp_pair(&client, &server);
    size_t len = 8u << 20;
    uint8_t *data = malloc(len);
    ASSERT(data != NULL);
    uint64_t sum = 0;
    for (size_t i = 0; i < len; i++) sum += data[i] = (uint8_t)(i * 7 + 3);
    char path[512];
    snprintf(path, sizeof path, "%s/data", test_tmpdir());
    int file = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    ASSERT(file >= 0);
    ASSERT_EQ(write(file, data, len), (ssize_t)len);
    drain d = { .fd = server, .want = 2 * len - 4096 };
    pthread_t reader;
    ASSERT_EQ(pthread_create(&reader, NULL, drain_main, &d), 0);
    ASSERT_OK(elastic__send_all(client, data, len, elastic__deadline_ms(20000), "test send"));
    ASSERT_OK(elastic__sendfile_all(client, file, 4096, len - 4096, elastic__deadline_ms(20000),
                                    "test send"));
    pthread_join(reader, NULL);
    uint64_t head = 0;
    for (size_t i = 0; i < 4096; i++) head += data[i];
    ASSERT_EQ(d.got, 2 * len - 4096);
    ASSERT_EQ(d.sum, 2 * sum - head);
    /* A file shorter than asked for is said so. */
    ASSERT_ERR(elastic__sendfile_all(client, file, len - 10, 20, elastic__deadline_ms(5000),
                                     "test send"),
               ELASTIC_EIO);
    ASSERT_STR_EQ(elastic_last_error(), "test send: the file ended early");
    close(file);
    free(data);
    close(client);
    close(server);
}

/* A peer that stops reading: the send gives up at its deadline. */
TEST(common_conn_send_deadline_holds_against_a_peer_that_does_not_read)
{
    int client = -1, server = -1;
    tcp_pair(&client, &server);
    size_t len = 64u << 20; /* far more than both socket buffers */
    uint8_t *data = calloc(1, len);
    ASSERT(data != NULL);
    uint64_t start = elastic__now_ms();
    ASSERT_ERR(elastic__send_all(client, data, len, elastic__deadline_ms(300), "test send"),
               ELASTIC_ETIMEDOUT);
    uint64_t took = elastic__now_ms() - start;
    ASSERT(took >= 290);
    ASSERT_LT(took, 5000);
    free(data);
    close(client);
    close(server);
}

/* The control channel's dial: a Unix socket path, listening or not. */
TEST(common_conn_dial_unix_connects_or_names_the_path_and_cause)
{
    char path[256];
    snprintf(path, sizeof path, "%s/agent.sock", test_tmpdir());
    int fd = -1;
    ASSERT_ERR(elastic__dial_unix(path, elastic__deadline_ms(5000), "worker", &fd),
               ELASTIC_ECONNECT);
    char want[400];
    snprintf(want, sizeof want, "worker: connect to %s: No such file or directory (ENOENT)", path);
    ASSERT_STR_EQ(elastic_last_error(), want);
    int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    memcpy(addr.sun_path, path, strlen(path) + 1);
    ASSERT_EQ(bind(listener, (struct sockaddr *)&addr, sizeof addr), 0);
    ASSERT_EQ(listen(listener, 4), 0);
    ASSERT_OK(elastic__dial_unix(path, elastic__deadline_ms(5000), "worker", &fd));
    int accepted = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
    ASSERT(accepted >= 0);
    ASSERT_OK(elastic__send_all(fd, "ok", 2, elastic__deadline_ms(5000), "test send"));
    char got[2];
    ASSERT_OK(elastic__recv_exact(accepted, got, 2, elastic__deadline_ms(5000), "test recv"));
    ASSERT_MEM_EQ(got, "ok", 2);
    close(accepted);
    close(fd);
    close(listener);
}
