/*
 * What an etcd endpoint says is bounded before json-c sees it: a hostile or
 * broken endpoint (here a fake one on loopback) streaming one endless watch
 * message, or answering a unary call with an 8 MiB array of zeros, costs the
 * client a bounded amount of memory and fails the call with an error that
 * names the bound (it grew the agent byte for byte before: 1.1 GiB in 2.6 s,
 * and 306 MB of json-c objects for the array).
 */
#include "etcd/etcd.h"
#include "support/etcd_fixture.h" /* only built where etcd's client is */
#include "test.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct fake_etcd {
    int listen_fd, port;
    bool endless; /* a watch message that never ends; else one huge unary reply */
    pthread_t thread;
} fake_etcd;

static void send_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n <= 0) return;
        data += n;
        len -= (size_t)n;
    }
}

/* Reads the request's headers (the body is never looked at), then answers. */
static void *fake_main(void *arg)
{
    fake_etcd *f = arg;
    int fd = accept(f->listen_fd, NULL, NULL);
    if (fd < 0) return NULL;
    char buf[4096];
    size_t used = 0;
    while (used < sizeof buf - 1) {
        ssize_t n = recv(fd, buf + used, sizeof buf - 1 - used, 0);
        if (n <= 0) break;
        used += (size_t)n;
        buf[used] = '\0';
        if (strstr(buf, "\r\n\r\n") != NULL) break;
    }
    static char chunk[1 << 16];
    if (f->endless) {
        const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                            "Connection: close\r\n\r\n{\"result\":{\"events\":[";
        send_all(fd, head, sizeof head - 1);
        for (size_t i = 0; i + 10 <= sizeof chunk; i += 10) memcpy(chunk + i, "{\"kv\":{}},", 10);
        for (int i = 0; i < 100000; i++) { /* 6.5 GB unless the client hangs up */
            ssize_t n = send(fd, chunk, sizeof chunk - sizeof chunk % 10, MSG_NOSIGNAL);
            if (n <= 0) break;
        }
    } else {
        size_t body = ETCD__MAX_RESPONSE - 64;
        char head[256];
        int len = snprintf(head, sizeof head,
                           "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                           "Content-Length: %zu\r\nConnection: close\r\n\r\n{\"a\":[0",
                           body);
        send_all(fd, head, (size_t)len);
        size_t sent = 6;
        for (size_t i = 0; i < sizeof chunk; i += 2) memcpy(chunk + i, ",0", 2);
        while (sent + sizeof chunk < body - 2) {
            send_all(fd, chunk, sizeof chunk);
            sent += sizeof chunk;
        }
        size_t rest = body - 2 - sent;
        send_all(fd, chunk, rest - rest % 2);
        send_all(fd, rest % 2 ? "0]}" : "]}", rest % 2 ? 3 : 2);
    }
    close(fd);
    return NULL;
}

static void fake_start(fake_etcd *f, bool endless)
{
    f->endless = endless;
    f->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in addr = { .sin_family = AF_INET };
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    ASSERT_OK(bind(f->listen_fd, (struct sockaddr *)&addr, sizeof addr));
    ASSERT_OK(listen(f->listen_fd, 4));
    socklen_t len = sizeof addr;
    getsockname(f->listen_fd, (struct sockaddr *)&addr, &len);
    f->port = ntohs(addr.sin_port);
    ASSERT_OK(pthread_create(&f->thread, NULL, fake_main, f));
}

static void fake_stop(fake_etcd *f)
{
    shutdown(f->listen_fd, SHUT_RDWR);
    pthread_join(f->thread, NULL);
    close(f->listen_fd);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LIVE_HEAP_ONLY 1
size_t __sanitizer_get_current_allocated_bytes(void); /* the sanitizers' allocator interface */
#endif

/* This process's memory in KiB: resident, or under a sanitizer (whose
 * quarantine and shadow are not the client's) the live heap. */
static long memory_kib(void)
{
#ifdef LIVE_HEAP_ONLY
    return (long)(__sanitizer_get_current_allocated_bytes() / 1024);
#endif
    FILE *file = fopen("/proc/self/status", "re");
    char line[256];
    long kib = -1;
    while (file != NULL && fgets(line, sizeof line, file) != NULL)
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
    if (file) fclose(file);
    return kib;
}

/* Samples memory_kib() every 2 ms while a call runs: its peak. */
typedef struct sampler {
    pthread_t thread;
    volatile int stop;
    long peak;
} sampler;

static void *sample_main(void *arg)
{
    sampler *m = arg;
    while (!__atomic_load_n(&m->stop, __ATOMIC_ACQUIRE)) {
        long now = memory_kib();
        if (now > m->peak) m->peak = now;
        struct timespec pause = { 0, 2 * 1000 * 1000 };
        nanosleep(&pause, NULL);
    }
    return NULL;
}

static void sampler_start(sampler *m)
{
    m->stop = 0;
    m->peak = memory_kib();
    ASSERT_OK(pthread_create(&m->thread, NULL, sample_main, m));
}

static long sampler_stop(sampler *m)
{
    __atomic_store_n(&m->stop, 1, __ATOMIC_RELEASE);
    pthread_join(m->thread, NULL);
    return m->peak;
}

static etcd__client *client_for(int port)
{
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", port);
    etcd__opts o = { .endpoints = endpoint, .timeout_ms = 20000 };
    etcd__client *c = NULL;
    ASSERT_OK(etcd__client_open(&o, &c));
    return c;
}

static json_object *watch_body(void *user)
{
    (void)user;
    return json_object_new_object();
}

static int never_stop(void *user, json_object *message)
{
    (void)user;
    (void)message;
    return 0;
}

/* The bound this test holds the client's peak to: the budget's worst case
 * (~100 MB of json-c objects, etcd.h) with room for the allocator. */
#define RSS_BOUND_KIB (160L * 1024)

TEST_TIMEOUT(etcd_endless_watch_message_fails_within_bounded_memory, 60)
{
    fake_etcd f;
    fake_start(&f, true);
    etcd__client *c = client_for(f.port);
    long before = memory_kib();
    sampler m;
    sampler_start(&m);
    int rc = etcd__stream(c, "/v3/watch", watch_body, 20000, never_stop, NULL);
    long grown = sampler_stop(&m) - before;
    ASSERT_EQ(rc, ELASTIC_ELIMIT);
    ASSERT(strstr(elastic_last_error(), "watch stream: a message of more than") != NULL);
    if (grown > RSS_BOUND_KIB) FAIL("the client grew by %ld KiB", grown);
    etcd__client_close(c);
    fake_stop(&f);
}

TEST_TIMEOUT(etcd_huge_unary_array_fails_within_bounded_memory, 60)
{
    fake_etcd f;
    fake_start(&f, false);
    etcd__client *c = client_for(f.port);
    long before = memory_kib();
    sampler m;
    sampler_start(&m);
    json_object *reply = NULL;
    int rc = etcd__call(c, "/v3/kv/range", json_object_new_object(), 20000, true, &reply);
    long grown = sampler_stop(&m) - before;
    ASSERT_EQ(rc, ELASTIC_ELIMIT);
    ASSERT(strstr(elastic_last_error(), "reply of a message of more than") != NULL);
    ASSERT(reply == NULL);
    if (grown > RSS_BOUND_KIB) FAIL("the client grew by %ld KiB", grown);
    etcd__client_close(c);
    fake_stop(&f);
}
