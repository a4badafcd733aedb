/* Hostile and broken peers on the store port: each gets a protocol error
 * or a disconnect, and a well-behaved client is still served afterwards. */
#include "support/store_raw.h"

TEST(store_random_bytes_get_disconnected)
{
    store_fixture f;
    fixture_start(&f);
    srand(7);
    for (int round = 0; round < 20; round++) {
        int fd = raw_connect(&f);
        uint8_t junk[512];
        for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)rand();
        send(fd, junk, sizeof junk, MSG_NOSIGNAL);
        ASSERT(closed_by_server(fd, test_scaled_ms(5000)));
        close(fd);
    }
    good_client_is_served(&f);
    elastic_store_server_close(f.server);
}

TEST(store_wrong_magic_and_version_are_refused)
{
    store_fixture f;
    fixture_start(&f);
    int fd = raw_connect(&f);
    send_bytes(fd, "GET / HTTP/1.1\r\n\r\n", 18);
    ASSERT(closed_by_server(fd, test_scaled_ms(5000)));
    close(fd);
    fd = raw_connect(&f);
    uint8_t hello[40] = { 'E', 'L', 'S', 'T', 99, 0, 0, 0 };
    send_bytes(fd, hello, sizeof hello);
    uint8_t welcome[72];
    ASSERT_EQ(recv_some(fd, welcome, sizeof welcome, 5000), sizeof welcome);
    ASSERT_EQ(welcome[4], 1); /* the server says which version it speaks */
    ASSERT(closed_by_server(fd, test_scaled_ms(5000)));
    close(fd);
    good_client_is_served(&f);
    elastic_store_server_close(f.server);
}

TEST(store_absurd_frame_length_gets_error_and_disconnect)
{
    store_fixture f;
    fixture_start(&f);
    int fd = raw_connect(&f);
    raw_handshake(fd);
    uint8_t frame[12] = { 0 };
    put32(frame, 0xFFFFFFF0u);
    put32(frame + 4, 5);
    frame[8] = 1; /* set */
    send_bytes(fd, frame, sizeof frame);
    uint32_t id = 99;
    ASSERT_EQ(read_status(fd, &id), ELASTIC_ELIMIT);
    ASSERT_EQ(id, 0); /* a connection-level error */
    ASSERT(closed_by_server(fd, test_scaled_ms(5000)));
    close(fd);
    good_client_is_served(&f);
    elastic_store_server_close(f.server);
}

TEST(store_malformed_bodies_get_errors_and_the_connection_goes_on)
{
    store_fixture f;
    fixture_start(&f);
    int fd = raw_connect(&f);
    raw_handshake(fd);
    /* A set whose key length runs past the body. */
    uint8_t frame[12 + 8] = { 0 };
    put32(frame, 8);
    put32(frame + 4, 1);
    frame[8] = 1;
    put32(frame + 12, 1000);
    send_bytes(fd, frame, sizeof frame);
    uint32_t id = 0;
    ASSERT_EQ(read_status(fd, &id), ELASTIC_EPROTO);
    ASSERT_EQ(id, 1);
    /* A key with a NUL byte. */
    uint8_t nul_key[12 + 4 + 3 + 4] = { 0 };
    put32(nul_key, 11);
    put32(nul_key + 4, 2);
    nul_key[8] = 1;
    put32(nul_key + 12, 3);
    memcpy(nul_key + 16, "a\0b", 3);
    send_bytes(fd, nul_key, sizeof nul_key);
    ASSERT_EQ(read_status(fd, &id), ELASTIC_EINVAL);
    ASSERT_EQ(id, 2);
    /* A ping still works on the same connection. */
    uint8_t ping[12] = { 0 };
    put32(ping + 4, 3);
    ping[8] = 17;
    send_bytes(fd, ping, sizeof ping);
    ASSERT_EQ(read_status(fd, &id), 0);
    ASSERT_EQ(id, 3);
    /* An unknown operation ends the connection: framing can't be trusted. */
    uint8_t unknown[12] = { 0 };
    put32(unknown + 4, 4);
    unknown[8] = 200;
    send_bytes(fd, unknown, sizeof unknown);
    ASSERT_EQ(read_status(fd, &id), ELASTIC_EPROTO);
    ASSERT(closed_by_server(fd, test_scaled_ms(5000)));
    close(fd);
    good_client_is_served(&f);
    elastic_store_server_close(f.server);
}

TEST(store_truncated_frames_then_hangup_are_harmless)
{
    store_fixture f;
    fixture_start(&f);
    for (int cut = 1; cut < 30; cut += 4) {
        int fd = raw_connect(&f);
        raw_handshake(fd);
        uint8_t frame[12 + 4 + 1 + 4 + 10] = { 0 };
        put32(frame, sizeof frame - 12);
        put32(frame + 4, 1);
        frame[8] = 1;
        put32(frame + 12, 1);
        frame[16] = 'k';
        put32(frame + 17, 10);
        send_bytes(fd, frame, (size_t)cut);
        close(fd);
    }
    good_client_is_served(&f);
    elastic_store_server_close(f.server);
}

TEST(store_slowloris_is_cut_by_the_handshake_deadline)
{
    elastic_store_server_opts o;
    elastic_store_server_opts_init(&o, sizeof o);
    o.handshake_timeout_ms = 500;
    store_fixture f;
    fixture_start_with(&f, &o);
    int fd = raw_connect(&f);
    uint64_t start = fixture_now_ms();
    bool closed = false;
    static const uint8_t hello[40] = { 'E', 'L', 'S', 'T', 1 };
    for (size_t i = 0; i < sizeof hello && !closed; i++) {
        if (send(fd, &hello[i], 1, MSG_NOSIGNAL) != 1) break; /* reset: it was cut */
        closed = closed_by_server(fd, 100);
    }
    if (!closed) closed = closed_by_server(fd, test_scaled_ms(3000));
    ASSERT(closed);
    ASSERT_LT(fixture_now_ms() - start, (uint64_t)test_scaled_ms(3500));
    close(fd);
    good_client_is_served(&f);
    elastic_store_server_close(f.server);
}

TEST_TIMEOUT(store_thousands_of_idle_connections_do_not_stall_others, 90)
{
    struct rlimit lim;
    getrlimit(RLIMIT_NOFILE, &lim);
    enum { IDLE = 2000 };
    if (lim.rlim_cur < 2 * IDLE + 100) {
        lim.rlim_cur = lim.rlim_max;
        setrlimit(RLIMIT_NOFILE, &lim);
        if (lim.rlim_cur < 2 * IDLE + 100) SKIP("not enough file descriptors");
    }
    elastic_store_server_opts o;
    elastic_store_server_opts_init(&o, sizeof o);
    o.max_connections = 1000;
    store_fixture f;
    fixture_start_with(&f, &o);
    static int fds[IDLE];
    for (int i = 0; i < IDLE; i++) fds[i] = raw_connect(&f);
    /* The connections beyond max_connections are closed at once (later
     * ones, possibly while earlier ones are still in the backlog). */
    int closed = 0;
    for (int i = IDLE - 1; i >= 0 && closed < IDLE - 1000; i--)
        closed += closed_by_server(fds[i], 2000);
    ASSERT_EQ(closed, IDLE - 1000);
    for (int i = 0; i < IDLE; i++) close(fds[i]);
    /* The idle ones are gone: a good client is served at once. */
    uint64_t start = fixture_now_ms();
    good_client_is_served(&f);
    ASSERT_LT(fixture_now_ms() - start, (uint64_t)test_scaled_ms(5000));
    elastic_store_server_close(f.server);
}

TEST(store_idle_timeout_closes_quiet_connections_but_not_parked_ones)
{
    elastic_store_server_opts o;
    elastic_store_server_opts_init(&o, sizeof o);
    o.idle_timeout_ms = 200;
    store_fixture f;
    fixture_start_with(&f, &o);
    elastic_store *s = fixture_connect(&f);
    void *value = NULL;
    size_t len;
    /* Parked for longer than the idle timeout: still answered. */
    ASSERT_ERR(elastic_store_get(s, "never", 600, &value, &len), ELASTIC_ETIMEDOUT);
    int fd = raw_connect(&f);
    raw_handshake(fd);
    ASSERT(closed_by_server(fd, test_scaled_ms(3000)));
    close(fd);
    elastic_store_close(s);
    elastic_store_server_close(f.server);
}

TEST(store_client_past_max_connections_is_told_which_limit_refused_it)
{
    elastic_store_server_opts o;
    elastic_store_server_opts_init(&o, sizeof o);
    o.max_connections = 2;
    store_fixture f;
    fixture_start_with(&f, &o);
    elastic_store *first = fixture_connect(&f), *second = fixture_connect(&f), *third = NULL;
    /* Refused with the limit named, at once: not a handshake that times out
     * after retries. */
    uint64_t start = fixture_now_ms();
    ASSERT_ERR(elastic_store_connect(f.endpoint, NULL, &third), ELASTIC_ELIMIT);
    ASSERT(strstr(elastic_last_error(), "max_connections (2) reached") != NULL);
    ASSERT_LT(fixture_now_ms() - start, (uint64_t)test_scaled_ms(3000));
    ASSERT(third == NULL);
    /* The admitted ones are untouched; a slot that frees up is usable. */
    ASSERT_OK(elastic_store_set(second, "still", "served", 6));
    elastic_store_close(first);
    elastic_store *again = NULL;
    uint64_t deadline = fixture_now_ms() + (uint64_t)test_scaled_ms(5000);
    int rc;
    /* The server counts the closed one out when it sees the close. */
    while ((rc = elastic_store_connect(f.endpoint, NULL, &again)) == ELASTIC_ELIMIT &&
           fixture_now_ms() < deadline)
        usleep(20 * 1000);
    ASSERT_OK(rc);
    elastic_store_close(again);
    elastic_store_close(second);
    elastic_store_server_close(f.server);
}
