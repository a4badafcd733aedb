/*
 * The replica channel's file receive (tcp.c: socket -> pipe -> file by
 * splice, one kernel copy): every byte lands where it belongs whatever the
 * pieces the sender's writes arrive in (a pipe that fills, an offset that is
 * not page-aligned), a peer that dies mid-transfer or stalls fails the call
 * (by its deadline) instead of leaving a file that looks whole, and the
 * receiver drops such a half-received copy and takes the next push; a
 * transport without recv_file gets the same bytes through a buffer.
 */
#include "replica/replica.h"
#include "replica/wire.h"
#include "test.h"

#include "common/clock.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#define TOKEN "recv-file-test-token"

/* A connected pair over loopback: out sends, in receives. */
typedef struct pair {
    replica_conn *out, *in;
} pair;

static pair connect_pair(void)
{
    replica_listener *l;
    ASSERT_OK(replica__tcp_listen("127.0.0.1", 0, &l));
    uint64_t deadline = elastic__deadline_ms(test_scaled_ms(10000));
    pair p;
    ASSERT_OK(replica__tcp_connect("127.0.0.1", replica__tcp_port(l), deadline, &p.out));
    ASSERT_OK(replica__tcp_accept(l, deadline, &p.in, NULL, 0));
    replica__tcp_listener_close(l);
    return p;
}

static uint8_t pattern_byte(size_t i)
{
    uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ull;
    return (uint8_t)(x >> 56);
}

static uint8_t *pattern(size_t len)
{
    uint8_t *p = malloc(len);
    ASSERT(p != NULL);
    for (size_t i = 0; i < len; i++) p[i] = pattern_byte(i);
    return p;
}

/* The sender's side: `len` bytes of the pattern in uneven pieces, then
 * (close_after < len) a close after that many bytes, or (stall) holding the
 * connection open until `release` is written. */
typedef struct sender {
    replica_conn *conn;
    size_t len, close_after;
    int release[2]; /* stall: the sender waits for a byte here */
    bool stall;
    int rc;
} sender;

static void *send_main(void *arg)
{
    sender *s = arg;
    static const size_t pieces[] = { 1, 7, 4095, 65537, 1u << 20, 333333, 3u << 20 };
    uint8_t *data = pattern(s->len);
    size_t limit = s->close_after < s->len ? s->close_after : s->len;
    uint64_t deadline = elastic__deadline_ms(test_scaled_ms(20000));
    s->rc = 0;
    for (size_t done = 0, k = 0; done < limit && s->rc == 0; k++) {
        size_t n = pieces[k % (sizeof pieces / sizeof *pieces)];
        if (n > limit - done) n = limit - done;
        s->rc = s->conn->ops->send(s->conn, data + done, n, deadline);
        done += n;
    }
    free(data);
    if (s->stall) {
        char byte;
        ssize_t ignored = read(s->release[0], &byte, 1); /* the test's end, not a timer */
        (void)ignored;
    }
    if (s->close_after < s->len || s->stall) s->conn->ops->shutdown(s->conn);
    return NULL;
}

static int file_in(const char *dir, const char *name, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", dir, name);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT(fd >= 0);
    return fd;
}

/* The file holds the pattern at `offset` (zeros before it). */
static void expect_pattern(int fd, uint64_t offset, size_t len)
{
    struct stat st;
    ASSERT_OK(fstat(fd, &st));
    ASSERT_EQ((uint64_t)st.st_size, offset + len);
    uint8_t *got = malloc(offset + len);
    ASSERT(got != NULL);
    ASSERT_EQ(pread(fd, got, offset + len, 0), (ssize_t)(offset + len));
    for (uint64_t i = 0; i < offset; i++)
        if (got[i] != 0) FAIL("byte %llu before the offset was written", (unsigned long long)i);
    for (size_t i = 0; i < len; i++)
        if (got[offset + i] != pattern_byte(i))
            FAIL("byte %zu of %zu differs (%u, not %u)", i, len, got[offset + i], pattern_byte(i));
    free(got);
}

static void receive_uneven_pieces_into(const char *dir)
{
    /* Several times the pipe's 1 MiB, so it fills and drains many times;
     * an odd length and an offset off any page boundary. */
    const size_t len = (9u << 20) + 12345;
    const uint64_t offset = 4096 + 17;
    pair p = connect_pair();
    sender s = { .conn = p.out, .len = len, .close_after = SIZE_MAX };
    pthread_t t;
    ASSERT_OK(pthread_create(&t, NULL, send_main, &s));
    char path[4200];
    int fd = file_in(dir, "uneven", path, sizeof path);
    ASSERT_OK(ftruncate(fd, (off_t)offset));
    ASSERT_OK(
        p.in->ops->recv_file(p.in, fd, offset, len, elastic__deadline_ms(test_scaled_ms(20000))));
    pthread_join(t, NULL);
    ASSERT_OK(s.rc);
    expect_pattern(fd, offset, len);
    /* The connection goes on after a file: the next bytes are the next message. */
    uint8_t tail[5] = { 0 };
    ASSERT_OK(p.out->ops->send(p.out, "after", 5, elastic__deadline_ms(test_scaled_ms(5000))));
    ASSERT_OK(p.in->ops->recv(p.in, tail, 5, elastic__deadline_ms(test_scaled_ms(5000))));
    ASSERT(memcmp(tail, "after", 5) == 0);
    close(fd);
    unlink(path);
    replica__close(p.out);
    replica__close(p.in);
}

TEST(ckpt_replica_recv_file_lands_every_byte_of_uneven_pieces_at_its_offset)
{
    receive_uneven_pieces_into(test_tmpdir());
    /* The memory tier's own file system. */
    char shm[128];
    snprintf(shm, sizeof shm, "/dev/shm/elastic-recv-file-%ld", (long)getpid());
    if (mkdir(shm, 0700) == 0) {
        receive_uneven_pieces_into(shm);
        rmdir(shm);
    }
}

TEST(ckpt_replica_recv_file_fails_when_the_peer_dies_mid_transfer)
{
    const size_t len = 4u << 20;
    pair p = connect_pair();
    sender s = { .conn = p.out, .len = len, .close_after = (3u << 20) + 5 };
    pthread_t t;
    ASSERT_OK(pthread_create(&t, NULL, send_main, &s));
    char path[4200];
    int fd = file_in(test_tmpdir(), "half", path, sizeof path);
    int rc = p.in->ops->recv_file(p.in, fd, 0, len, elastic__deadline_ms(test_scaled_ms(20000)));
    pthread_join(t, NULL);
    ASSERT_EQ(rc, ELASTIC_ECONNECT);
    ASSERT(strstr(elastic_last_error(), "closed") != NULL);
    close(fd);
    unlink(path);
    replica__close(p.out);
    replica__close(p.in);
}

TEST(ckpt_replica_recv_file_gives_up_at_its_deadline_when_the_peer_stalls)
{
    const size_t len = 4u << 20;
    pair p = connect_pair();
    sender s = { .conn = p.out, .len = len, .close_after = SIZE_MAX, .stall = true };
    ASSERT_OK(pipe(s.release));
    s.len = (1u << 20) + 1; /* what it sends before it stalls: less than asked for */
    pthread_t t;
    ASSERT_OK(pthread_create(&t, NULL, send_main, &s));
    char path[4200];
    int fd = file_in(test_tmpdir(), "stalled", path, sizeof path);
    int wait_ms = test_scaled_ms(300);
    uint64_t start = elastic__now_ms();
    int rc = p.in->ops->recv_file(p.in, fd, 0, len, elastic__deadline_ms(wait_ms));
    uint64_t took = elastic__now_ms() - start;
    ASSERT_EQ(write(s.release[1], "x", 1), 1);
    pthread_join(t, NULL);
    ASSERT_EQ(rc, ELASTIC_ETIMEDOUT);
    ASSERT(took + 5 >= (uint64_t)wait_ms);
    ASSERT(took < (uint64_t)wait_ms + (uint64_t)test_scaled_ms(5000));
    close(s.release[0]);
    close(s.release[1]);
    close(fd);
    unlink(path);
    replica__close(p.out);
    replica__close(p.in);
}

/* ---- the receiver: a push whose peer dies mid-transfer ------------------------ */

static const char *own_of(const char *root, char *out, size_t cap)
{
    snprintf(out, cap, "%s/" CKPT_MEM_OWN_DIR, root);
    return out;
}

/* Step `step` of one rank with one blob of `len` pattern bytes. */
static void save_big_step(const char *root, uint64_t step, size_t len)
{
    char own[4200];
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.compression = ELASTIC_CKPT_NONE;
    o.generation = 1;
    elastic_ckpt *c;
    ASSERT_OK(elastic_ckpt_open(own_of(root, own, sizeof own), &o, &c));
    uint8_t *data = pattern(len);
    elastic_ckpt_blob blob = { .name = "state", .data = data, .len = len };
    ASSERT_OK(elastic_ckpt_save(c, step, &blob, 1));
    free(data);
    elastic_ckpt_close(c);
}

/* Files under dir whose name contains `part`. */
static int count_named(const char *dir, const char *part)
{
    DIR *d = opendir(dir);
    if (d == NULL) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) n += strstr(e->d_name, part) != NULL;
    closedir(d);
    return n;
}

static replica_conn *dial(int port)
{
    replica_conn *c;
    uint64_t deadline = elastic__deadline_ms(test_scaled_ms(10000));
    ASSERT_OK(replica__tcp_connect("127.0.0.1", port, deadline, &c));
    ASSERT_OK(replica__auth_client(c, TOKEN, deadline));
    return c;
}

TEST(ckpt_replica_receiver_drops_a_copy_whose_peer_died_mid_transfer_and_takes_the_next)
{
    char from[4096], to[4096], own[4200], shard[4500], step_dir[4400];
    snprintf(from, sizeof from, "%s/from", test_tmpdir());
    snprintf(to, sizeof to, "%s/to", test_tmpdir());
    ASSERT_OK(ckpt__mem_tier_create(from, 1ull << 30, 2));
    ASSERT_OK(ckpt__mem_tier_create(to, 1ull << 30, 2));
    const size_t len = 6u << 20;
    save_big_step(from, 1, len);
    replica_server_opts so = { .tier_root = to, .token = TOKEN, .host = "127.0.0.1" };
    replica_server *server;
    ASSERT_OK(replica__server_start(&so, &server));

    /* A push by hand: the request, the go, then half the shard, then gone. */
    ckpt__step_dir(own_of(from, own, sizeof own), 1, step_dir, sizeof step_dir);
    snprintf(shard, sizeof shard, "%s/shard-00000-g1.elck", step_dir);
    int fd = open(shard, O_RDONLY | O_CLOEXEC);
    ASSERT(fd >= 0);
    struct stat st;
    ASSERT_OK(fstat(fd, &st));
    replica_request req = { .op = REPLICA_OP_PUT,
                            .id = { .origin = "node-a", .step = 1, .generation = 1, .world = 1 },
                            .length = (uint64_t)st.st_size };
    uint64_t deadline = elastic__deadline_ms(test_scaled_ms(10000)), ignored;
    int status = -1;
    replica_conn *c = dial(replica__server_port(server));
    ASSERT_OK(replica__send_request(c, &req, deadline));
    ASSERT_OK(replica__recv_answer(c, &status, &ignored, deadline));
    ASSERT_EQ(status, 0);
    ASSERT_OK(c->ops->send_file(c, fd, 0, req.length / 2, deadline));
    char origin[4200], peer_step[4400];
    snprintf(origin, sizeof origin, "%s/" CKPT_MEM_PEER_DIR "/node-a", to);
    ckpt__step_dir(origin, 1, peer_step, sizeof peer_step);
    /* Created before the go: the half-received copy, under its temporary name. */
    ASSERT_EQ(count_named(peer_step, ".tmp-recv."), 1);
    replica__close(c); /* the peer dies */
    for (uint64_t until = elastic__deadline_ms(test_scaled_ms(10000));
         count_named(peer_step, ".tmp-recv.") > 0;) {
        if (elastic__ms_left(until) == 0) FAIL("the half-received copy was not dropped");
        usleep(2000); /* polling a directory: no event to wait on */
    }
    ASSERT_EQ(count_named(peer_step, "shard-"), 0); /* never under its name */

    /* The next push of the step is taken whole, and reads back verified. */
    c = dial(replica__server_port(server));
    uint64_t bytes = 0;
    ASSERT_OK(replica__push_step(c, "node-a", own, 1, &bytes, deadline));
    replica__close(c);
    ASSERT_EQ(count_named(peer_step, "shard-00000-g1.elck"), 1);
    /* Every chunk's checksum checked as it is read. */
    const char *copies = origin;
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    elastic_ckpt *copy;
    ASSERT_OK(elastic_ckpt_open(copies, &o, &copy));
    uint8_t *got = malloc(len), *want = pattern(len);
    size_t got_len = 0;
    ASSERT_OK(elastic_ckpt_read_into(copy, 1, "state", got, len, &got_len));
    ASSERT_EQ(got_len, len);
    ASSERT_MEM_EQ(got, want, len);
    free(got);
    free(want);
    elastic_ckpt_close(copy);
    close(fd);
    replica__server_stop(server);
}

/* A transport without recv_file (UCX may be one): the receive goes through
 * a buffer and lands the same bytes. */
TEST(ckpt_replica_incoming_receive_without_recv_file_lands_the_same_bytes)
{
    const size_t len = (3u << 20) + 777;
    pair p = connect_pair();
    replica_transport_ops bare = *p.in->ops;
    bare.recv_file = NULL;
    const replica_transport_ops *tcp_ops = p.in->ops;
    p.in->ops = &bare;
    sender s = { .conn = p.out, .len = len, .close_after = SIZE_MAX };
    pthread_t t;
    ASSERT_OK(pthread_create(&t, NULL, send_main, &s));
    char path[4200];
    snprintf(path, sizeof path, "%s/bare", test_tmpdir());
    replica_incoming in;
    ASSERT_OK(replica__incoming_open(path, len, NULL, NULL, &in));
    ASSERT_OK(replica__incoming_receive(p.in, &in, elastic__deadline_ms(test_scaled_ms(20000))));
    pthread_join(t, NULL);
    ASSERT_OK(s.rc);
    expect_pattern(in.fd, 0, len);
    ASSERT_OK(replica__incoming_keep(&in));
    p.in->ops = tcp_ops; /* its close frees a tcp connection */
    replica__close(p.out);
    replica__close(p.in);
}
