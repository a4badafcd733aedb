/* The store's memory under hostile input: partial frames count against
 * max_buffered_bytes, a started frame must finish within frame_timeout_ms,
 * and a good client is served while both are enforced. */
#include "support/store_raw.h"

#include <fcntl.h>
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LIVE_HEAP_ONLY 1
size_t __sanitizer_get_current_allocated_bytes(void); /* the sanitizers' allocator interface */
#endif

/* Resident memory of this process (the server runs in it), in bytes. Under
 * AddressSanitizer freed blocks stay resident in its quarantine (up to
 * 256 MiB), under ThreadSanitizer every heap byte has 4 bytes of shadow that
 * stay resident after free: neither is the server's, so there the live heap
 * is what counts. */
static size_t rss_bytes(void)
{
#ifdef LIVE_HEAP_ONLY
    return __sanitizer_get_current_allocated_bytes();
#endif
    FILE *f = fopen("/proc/self/status", "r");
    ASSERT(f != NULL);
    char line[256];
    size_t kib = 0;
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "VmRSS: %zu kB", &kib) == 1) break;
    fclose(f);
    ASSERT(kib > 0);
    return kib * 1024;
}

/* A SET frame header announcing a 16 MiB body (key length and key first). */
static void send_big_frame_start(int fd)
{
    uint8_t start[12 + 4 + 1 + 4] = { 0 };
    uint32_t body = 16u << 20;
    put32(start, body);
    put32(start + 4, 1);
    start[8] = 1;         /* set */
    put32(start + 12, 1); /* key length */
    start[16] = 'k';
    put32(start + 17, body - 9); /* value length: to the end of the body */
    send_bytes(fd, start, sizeof start);
}

enum { ATTACKERS = 50 };

TEST_TIMEOUT(store_partial_frame_flood_stays_bounded_and_good_clients_are_served, 180)
{
    store_fixture f;
    fixture_start(&f); /* default limits: what a job's store runs with */
    elastic_store *good = fixture_connect(&f);
    size_t rss_before = rss_bytes();
    int fds[ATTACKERS];
    for (int i = 0; i < ATTACKERS; i++) {
        fds[i] = raw_connect(&f);
        raw_handshake(fds[i]);
        int sndbuf = 256 << 10; /* less kernel buffering to fill; the server side is unchanged */
        setsockopt(fds[i], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
        send_big_frame_start(fds[i]);
        fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK);
    }
    /* Every attacker pushes all but the last byte of its body, round robin,
     * until the server stops taking bytes from all of them (paused). */
    static uint8_t chunk[256 << 10];
    memset(chunk, 'x', sizeof chunk);
    size_t sent[ATTACKERS] = { 0 }, body_part = (16u << 20) - 9 - 1;
    uint64_t deadline = fixture_now_ms() + (uint64_t)test_scaled_ms(60000);
    int quiet_rounds = 0, served = 0;
    while (quiet_rounds < 3 && fixture_now_ms() < deadline) {
        size_t round = 0;
        for (int i = 0; i < ATTACKERS; i++) {
            size_t left = body_part - sent[i];
            if (left == 0) continue;
            ssize_t n =
                send(fds[i], chunk, left < sizeof chunk ? left : sizeof chunk, MSG_NOSIGNAL);
            if (n > 0)
                sent[i] += (size_t)n, round += (size_t)n;
            else
                ASSERT(errno == EAGAIN || errno == EWOULDBLOCK);
        }
        /* The good client is served throughout. */
        char value[32];
        int len = snprintf(value, sizeof value, "%d", served);
        ASSERT_OK(elastic_store_set(good, "good", value, (size_t)len));
        expect_value(good, "good", value);
        served++;
        if (round == 0) {
            quiet_rounds++;
            struct timespec pause = { 0, 100 * 1000 * 1000 };
            nanosleep(&pause, NULL); /* let the server drain what the kernel holds */
        } else {
            quiet_rounds = 0;
        }
    }
    size_t total = 0;
    for (int i = 0; i < ATTACKERS; i++) total += sent[i];
    size_t rss = rss_bytes();
    fprintf(
        stderr,
        "# attackers sent %zu MiB; memory %zu MiB (%zu MiB before); good client served %d times\n",
        total >> 20, rss >> 20, rss_before >> 20, served);
    ASSERT(total > (size_t)100 << 20); /* the flood was real: far beyond the budget */
    ASSERT_LT(rss, (size_t)128 << 20);
    ASSERT_OK(elastic_store_set(good, "after", "flood", 5));
    expect_value(good, "after", "flood");
    for (int i = 0; i < ATTACKERS; i++) close(fds[i]);
    elastic_store_close(good);
    elastic_store_server_close(f.server);
}

TEST(store_started_frame_must_finish_within_frame_timeout)
{
    elastic_store_server_opts o;
    elastic_store_server_opts_init(&o, sizeof o);
    o.frame_timeout_ms = 300;
    store_fixture f;
    fixture_start_with(&f, &o);
    int fd = raw_connect(&f);
    raw_handshake(fd);
    /* A complete ping is answered; then a frame that never completes. */
    uint8_t ping[12] = { 0 };
    put32(ping + 4, 1);
    ping[8] = 17;
    send_bytes(fd, ping, sizeof ping);
    uint32_t id = 0;
    ASSERT_EQ(read_status(fd, &id), 0);
    uint64_t start = fixture_now_ms();
    send_big_frame_start(fd);
    ASSERT(closed_by_server(fd, test_scaled_ms(5000)));
    ASSERT(fixture_now_ms() - start >= 250);
    close(fd);
    good_client_is_served(&f);
    elastic_store_server_close(f.server);
}
