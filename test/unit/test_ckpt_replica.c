/*
 * Peer replicas of memory-tier shards: a node's committed step pushed to a
 * peer's receiver (authenticated with the job's token, within the peer's
 * limit, K steps per origin), listed as the peer's holdings, staged back on
 * a third node from the cheapest copy that verifies — a copy with a flipped
 * byte is refused and the next one used — and placement that never puts a
 * copy on its own node or, while others remain, in its failure domain.
 */
#include "support/ckpt_content.h"
#include "replica/replica.h"
#include "replica/wire.h"
#include "test.h"
#include "common/dir.h"

#include "common/clock.h"

#include <dirent.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#define TOKEN "replica-test-token"

static const char *root_of(const char *name)
{
    static char roots[8][4096];
    static int next;
    char *out = roots[next++ % 8];
    snprintf(out, 4096, "%s/%s", test_tmpdir(), name);
    return out;
}

static const char *own_of(const char *root)
{
    static char dirs[8][4200];
    static int next;
    char *out = dirs[next++ % 8];
    snprintf(out, 4200, "%s/" CKPT_MEM_OWN_DIR, root);
    return out;
}

/* `world` ranks of one node save `step` into the tier's own directory. */
static void save_step(const char *root, uint64_t step, uint32_t world)
{
    for (uint32_t rank = 0; rank < world; rank++) {
        elastic_ckpt_opts o;
        elastic_ckpt_opts_init(&o, sizeof o);
        o.compression = ELASTIC_CKPT_NONE;
        o.rank = rank;
        o.world = world;
        o.generation = 1;
        elastic_ckpt *c;
        ASSERT_OK(elastic_ckpt_open(own_of(root), &o, &c));
        ASSERT_OK(ckpt_test_save(c, step, rank));
        elastic_ckpt_close(c);
    }
}

static replica_server *serve(const char *root, uint64_t limit, unsigned steps)
{
    ASSERT_OK(ckpt__mem_tier_create(root, limit, steps));
    replica_server_opts o = { .tier_root = root, .token = TOKEN, .host = "127.0.0.1" };
    replica_server *s;
    ASSERT_OK(replica__server_start(&o, &s));
    return s;
}

static replica_conn *dial(int port, const char *token)
{
    replica_conn *c;
    uint64_t deadline = elastic__deadline_ms(test_scaled_ms(10000));
    ASSERT_OK(replica__tcp_connect("127.0.0.1", port, deadline, &c));
    int rc = replica__auth_client(c, token, deadline);
    if (rc != 0) {
        replica__close(c);
        return NULL;
    }
    return c;
}

static void push(replica_server *to, const char *from_root, uint64_t step)
{
    replica_conn *c = dial(replica__server_port(to), TOKEN);
    ASSERT(c != NULL);
    uint64_t bytes = 0;
    ASSERT_OK(replica__push_step(c, "node-a", own_of(from_root), step, &bytes,
                                 elastic__deadline_ms(test_scaled_ms(10000))));
    ASSERT(bytes > 0);
    replica__close(c);
}

typedef struct ports {
    int by_node[8];
} ports;

static int dial_node(void *ctx, uint32_t node, replica_conn **out)
{
    ports *p = ctx;
    if (node >= 8 || p->by_node[node] == 0)
        return elastic__fail(ELASTIC_ECONNECT, "no node %u", node);
    uint64_t deadline = elastic__deadline_ms(test_scaled_ms(10000));
    int rc = replica__tcp_connect("127.0.0.1", p->by_node[node], deadline, out);
    if (rc == 0 && (rc = replica__auth_client(*out, TOKEN, deadline)) != 0) replica__close(*out);
    return rc;
}

static ckpt_plan plan_from(const char *const *roots, const uint32_t *nodes, size_t n)
{
    ckpt_copy all[64];
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        ckpt_copy *copies;
        size_t k;
        ASSERT_OK(replica__holdings(roots[i], nodes[i], &copies, &k));
        ASSERT(total + k <= 64);
        memcpy(all + total, copies, k * sizeof *copies);
        total += k;
        free(copies);
    }
    ckpt_plan_input in = { .copies = all, .n_copies = total, .generation = 1 };
    ckpt_plan plan;
    ASSERT_OK(ckpt__plan_restore(&in, &plan));
    return plan;
}

static void expect_content(const char *root, uint64_t step, uint32_t world)
{
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    elastic_ckpt *c;
    ASSERT_OK(elastic_ckpt_open(own_of(root), &o, &c));
    char why[512];
    for (uint32_t rank = 0; rank < world; rank++)
        if (ckpt_test_check(c, step, rank, why, sizeof why) != 0) FAIL("rank %u: %s", rank, why);
    elastic_ckpt_close(c);
}

TEST(ckpt_replica_pushed_step_is_held_by_the_peer_and_restored_on_a_spare)
{
    const char *a = root_of("a"), *b = root_of("b"), *spare = root_of("spare");
    ASSERT_OK(ckpt__mem_tier_create(a, 64ull << 20, 2));
    save_step(a, 5, 2);
    replica_server *sb = serve(b, 64ull << 20, 2);
    push(sb, a, 5);
    uint64_t files = 0, bytes = 0, refused = 9;
    replica__server_counts(sb, &files, &bytes, &refused);
    ASSERT_EQ(files, 3); /* two shards and the record */
    ASSERT_EQ(refused, 0);
    /* Node a is lost; the spare stages both ranks from b's copies. */
    const char *roots[] = { b };
    const uint32_t nodes[] = { 1 };
    ckpt_plan plan = plan_from(roots, nodes, 1);
    ASSERT(plan.found);
    ASSERT_EQ(plan.step, 5);
    ASSERT_OK(ckpt__mem_tier_create(spare, 64ull << 20, 2));
    ports p = { .by_node = { [1] = replica__server_port(sb) } };
    replica_dialer dialer = { dial_node, &p };
    for (uint32_t rank = 0; rank < 2; rank++) {
        replica_restored got;
        ASSERT_OK(replica__stage_shard(spare, &plan, rank, 2, &dialer,
                                       elastic__deadline_ms(test_scaled_ms(10000)), &got));
        ASSERT_EQ(got.source, CKPT_SOURCE_PEER);
        ASSERT_EQ(got.node, 1);
        ASSERT_EQ(got.refused, 0);
        ASSERT(got.bytes > CKPT_HEADER_BYTES);
    }
    expect_content(spare, 5, 2);
    /* b stages from its own replicas: local memory, no byte over the wire. */
    replica_restored local;
    ASSERT_OK(replica__stage_shard(b, &plan, 1, 1, NULL, elastic__deadline_ms(1000), &local));
    ASSERT_EQ(local.source, CKPT_SOURCE_LOCAL);
    ckpt__plan_free(&plan);
    replica__server_stop(sb);
}

TEST(ckpt_replica_flipped_byte_in_a_peer_copy_is_detected_and_the_next_copy_used)
{
    const char *a = root_of("a"), *b = root_of("b"), *d = root_of("d"), *spare = root_of("spare");
    ASSERT_OK(ckpt__mem_tier_create(a, 64ull << 20, 2));
    save_step(a, 8, 1);
    replica_server *sb = serve(b, 64ull << 20, 2), *sd = serve(d, 64ull << 20, 2);
    push(sb, a, 8);
    push(sd, a, 8);
    /* One byte of chunk data in b's copy (node 1: tried first). */
    char path[4400];
    snprintf(path, sizeof path, "%s/peer/node-a/step-00000000000000000008/shard-00000-g1.elck", b);
    int fd = open(path, O_RDWR);
    ASSERT(fd >= 0);
    uint8_t byte;
    ASSERT_EQ(pread(fd, &byte, 1, CKPT_HEADER_BYTES + 3), 1);
    byte ^= 0x10;
    ASSERT_EQ(pwrite(fd, &byte, 1, CKPT_HEADER_BYTES + 3), 1);
    close(fd);
    const char *roots[] = { b, d };
    const uint32_t nodes[] = { 1, 3 };
    ckpt_plan plan = plan_from(roots, nodes, 2);
    ASSERT(plan.found);
    ASSERT_OK(ckpt__mem_tier_create(spare, 64ull << 20, 2));
    ports p = { .by_node = { [1] = replica__server_port(sb), [3] = replica__server_port(sd) } };
    replica_dialer dialer = { dial_node, &p };
    replica_restored got;
    ASSERT_OK(replica__stage_shard(spare, &plan, 0, 2, &dialer,
                                   elastic__deadline_ms(test_scaled_ms(10000)), &got));
    ASSERT_EQ(got.source, CKPT_SOURCE_PEER);
    ASSERT_EQ(got.node, 3);
    ASSERT_EQ(got.refused, 1);
    ASSERT(strstr(got.why, "checksum mismatch") != NULL);
    expect_content(spare, 8, 1);
    /* The refused copy was checked before it took a name: nothing of it is left. */
    char step_dir[4400];
    snprintf(step_dir, sizeof step_dir, "%s/own/step-00000000000000000008", spare);
    DIR *dir = elastic__opendir(step_dir);
    ASSERT(dir != NULL);
    size_t entries = 0;
    for (struct dirent *e; (e = readdir(dir)) != NULL;) {
        if (e->d_name[0] == '.' && (e->d_name[1] == '\0' || strcmp(e->d_name, "..") == 0)) continue;
        ASSERT(strstr(e->d_name, ".tmp-") == NULL);
        entries++;
    }
    closedir(dir);
    ASSERT_EQ(entries, 2); /* the shard from node 3 and the commit record */
    /* With no good copy left the stager says so, listing why. */
    replica__server_stop(sd);
    snprintf(path, sizeof path, "%s/own/step-00000000000000000008/shard-00000-g1.elck", spare);
    ASSERT_EQ(unlink(path), 0);
    ASSERT_EQ(replica__stage_shard(spare, &plan, 0, 2, &dialer,
                                   elastic__deadline_ms(test_scaled_ms(10000)), &got),
              ELASTIC_ENOTFOUND);
    ASSERT(strstr(elastic_last_error(), "no usable copy") != NULL);
    ASSERT_EQ(got.refused, 2);
    ckpt__plan_free(&plan);
    replica__server_stop(sb);
}

TEST(ckpt_replica_refuses_a_peer_without_the_jobs_token)
{
    const char *b = root_of("b");
    replica_server *sb = serve(b, 64ull << 20, 2);
    int port = replica__server_port(sb);
    ASSERT(dial(port, "not-the-token") == NULL);
    ASSERT(strstr(elastic_last_error(), "token") != NULL);
    ASSERT(dial(port, NULL) == NULL); /* no token at all */
    replica_conn *ok = dial(port, TOKEN);
    ASSERT(ok != NULL);
    replica__close(ok);
    uint64_t files = 9, refused = 0;
    /* The refusals are counted once each server thread saw them: wait for that. */
    uint64_t deadline = elastic__deadline_ms(test_scaled_ms(5000));
    do replica__server_counts(sb, &files, NULL, &refused);
    while (refused < 2 && elastic__now_ms() < deadline);
    ASSERT_EQ(refused, 2);
    ASSERT_EQ(files, 0);
    replica__server_stop(sb);
}

TEST(ckpt_replica_receiver_stays_within_its_limit_and_keeps_k_steps_per_origin)
{
    const char *a = root_of("a"), *b = root_of("b");
    ASSERT_OK(ckpt__mem_tier_create(a, 64ull << 20, 2));
    replica_server *sb = serve(b, 64ull << 20, 2);
    for (uint64_t step = 1; step <= 3; step++) {
        save_step(a, step, 1);
        push(sb, a, step);
    }
    uint64_t *steps;
    size_t n;
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/peer/node-a", b);
    ASSERT_OK(ckpt__scan_steps(dir, &steps, &n));
    ASSERT_EQ(n, 2);
    ASSERT_EQ(steps[0], 2);
    ASSERT_EQ(steps[1], 3);
    free(steps);
    replica__server_stop(sb);
    /* A peer whose tier is too small refuses the copy before any byte is
     * sent, saying why; the connection stays usable. */
    const char *tiny = root_of("tiny");
    replica_server *st = serve(tiny, CKPT_HEADER_BYTES, 2); /* smaller than any shard */
    replica_conn *c = dial(replica__server_port(st), TOKEN);
    ASSERT(c != NULL);
    save_step(a, 4, 1);
    uint64_t bytes;
    uint64_t deadline = elastic__deadline_ms(test_scaled_ms(10000));
    ASSERT_EQ(replica__push_step(c, "node-a", own_of(a), 4, &bytes, deadline), ELASTIC_ENOSPC);
    ASSERT(strstr(elastic_last_error(), "--memory-ckpt-limit") != NULL);
    ASSERT(ckpt__mem_usage(tiny) <= CKPT_HEADER_BYTES);
    /* Still answering: a fetch of something it does not hold. */
    replica_file_id id = { .step = 99, .generation = 1, .world = 1, .kind = REPLICA_KIND_SHARD };
    char dest[4300];
    snprintf(dest, sizeof dest, "%s/fetched", test_tmpdir());
    ASSERT_EQ(replica__fetch_file(c, &id, dest, NULL, &bytes, deadline), ELASTIC_ENOTFOUND);
    replica__close(c);
    replica__server_stop(st);
}

TEST(ckpt_replica_receiver_closes_a_connection_that_breaks_the_protocol)
{
    const char *b = root_of("b");
    replica_server *sb = serve(b, 64ull << 20, 2);
    replica_conn *c = dial(replica__server_port(sb), TOKEN);
    ASSERT(c != NULL);
    uint64_t deadline = elastic__deadline_ms(test_scaled_ms(10000));
    /* rank >= world */
    replica_request bad = { .op = REPLICA_OP_PUT, .length = 5000 };
    bad.id = (replica_file_id){ .origin = "x", .step = 1, .rank = 3, .world = 2 };
    ASSERT_OK(replica__send_request(c, &bad, deadline));
    int status;
    uint64_t len;
    ASSERT_EQ(replica__recv_answer(c, &status, &len, deadline), ELASTIC_ECONNECT);
    replica__close(c);
    /* An origin name that would leave the tree. */
    c = dial(replica__server_port(sb), TOKEN);
    ASSERT(c != NULL);
    bad.id = (replica_file_id){ .origin = "..", .step = 1, .rank = 0, .world = 1 };
    ASSERT_OK(replica__send_request(c, &bad, deadline));
    ASSERT_EQ(replica__recv_answer(c, &status, &len, deadline), ELASTIC_ECONNECT);
    replica__close(c);
    struct stat st;
    char escaped[4300];
    snprintf(escaped, sizeof escaped, "%s/step-00000000000000000001", b);
    ASSERT(stat(escaped, &st) != 0);
    /* The server still serves the next peer. */
    c = dial(replica__server_port(sb), TOKEN);
    ASSERT(c != NULL);
    replica__close(c);
    replica__server_stop(sb);
}

TEST(ckpt_replica_placement_never_uses_the_own_node_and_spreads_over_failure_domains)
{
    const replica_node nodes[] = {
        { "n0", "rack1" }, { "n1", "rack1" }, { "n2", "rack2" }, { "n3", "rack2" }, { "n4", NULL },
    };
    size_t out[4];
    /* R = 1: the next node by name outside the own rack. */
    ASSERT_EQ(replica__place(nodes, 5, 0, 1, out), 1);
    ASSERT_EQ(out[0], 2);
    /* R = 2: two other domains before a second copy in one. */
    ASSERT_EQ(replica__place(nodes, 5, 0, 2, out), 2);
    ASSERT_EQ(out[0], 2);
    ASSERT_EQ(out[1], 4);
    /* R = 4 on 5 nodes: every other node, the own rack's last. */
    ASSERT_EQ(replica__place(nodes, 5, 0, 4, out), 4);
    for (size_t i = 0; i < 4; i++) ASSERT_NE(out[i], 0);
    ASSERT_EQ(out[3], 1);
    /* Never more copies than other nodes. */
    ASSERT_EQ(replica__place(nodes, 2, 1, 3, out), 1);
    ASSERT_EQ(out[0], 0);
    ASSERT_EQ(replica__place(nodes, 1, 0, 1, out), 0);
    /* Without domains: a ring, so each node holds as many copies as it sends. */
    const replica_node plain[] = { { "c", NULL }, { "a", NULL }, { "b", NULL } };
    unsigned held[3] = { 0 };
    for (size_t self = 0; self < 3; self++) {
        ASSERT_EQ(replica__place(plain, 3, self, 1, out), 1);
        ASSERT_NE(out[0], self);
        held[out[0]]++;
    }
    for (size_t i = 0; i < 3; i++) ASSERT_EQ(held[i], 1);
}

/* The service an agent hosts: a committed own step reaches its target's
 * tier in the background, every Nth step reaches the disk tier, and stop
 * frees the memory. */
TEST(ckpt_replica_service_replicates_new_steps_and_writes_every_nth_to_disk)
{
    const char *a = root_of("a"), *b = root_of("b");
    char disk[4200];
    snprintf(disk, sizeof disk, "%s/disk", test_tmpdir());
    replica_service_opts oa = { .root = a,
                                .limit = 64ull << 20,
                                .token = TOKEN,
                                .listen_host = "127.0.0.1",
                                .replicas = 1,
                                .disk_dir = disk,
                                .disk_every = 2 };
    replica_service_opts ob = oa;
    ob.root = b;
    ob.disk_every = 0;
    ob.disk_dir = NULL;
    replica_service *sa, *sb;
    ASSERT_OK(replica__service_start(&oa, &sa));
    ASSERT_OK(replica__service_start(&ob, &sb));
    replica_peer nodes[2] = { { .name = "node-a", .host = "127.0.0.1" },
                              { .name = "node-b", .host = "127.0.0.1" } };
    nodes[0].port = replica__service_port(sa);
    nodes[1].port = replica__service_port(sb);
    ASSERT_OK(replica__service_set_peers(sa, nodes, 2, 0));
    ASSERT_OK(replica__service_set_peers(sb, nodes, 2, 1));
    for (uint64_t step = 1; step <= 2; step++) {
        save_step(a, step, 2);
        replica__service_kick(sa);
        ASSERT_OK(replica__service_wait_replicated(sa, step,
                                                   elastic__deadline_ms(test_scaled_ms(10000))));
    }
    ckpt_copy *copies;
    size_t n;
    ASSERT_OK(replica__holdings(b, 1, &copies, &n));
    size_t of_step2 = 0;
    for (size_t i = 0; i < n; i++) of_step2 += copies[i].step == 2;
    ASSERT_EQ(of_step2, 2);
    free(copies);
    /* Step 2 on disk, from the memory copy, in the background. */
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    uint64_t deadline = elastic__deadline_ms(test_scaled_ms(10000));
    replica_service_stats st;
    do replica__service_stats(sa, &st);
    while (st.disk_step < 2 && elastic__now_ms() < deadline);
    ASSERT_EQ(st.disk_step, 2);
    ASSERT_EQ(st.replicated_step, 2);
    ASSERT(st.held_bytes > 0);
    elastic_ckpt *d;
    ASSERT_OK(elastic_ckpt_open(disk, &o, &d));
    char why[512];
    for (uint32_t rank = 0; rank < 2; rank++)
        if (ckpt_test_check(d, 2, rank, why, sizeof why) != 0) FAIL("disk rank %u: %s", rank, why);
    elastic_ckpt_close(d);
    replica__service_stats(sb, &st);
    ASSERT(st.replicas_in >= 3);
    replica__service_stop(sa);
    replica__service_stop(sb);
    struct stat gone;
    ASSERT(stat(a, &gone) != 0);
    ASSERT(stat(b, &gone) != 0);
}

/* A spare file offered for reuse that another name still shares (a copy
 * staged for a restore is a hard link to it) is not written over: the copy
 * behind the other name keeps its bytes, and the new file is a fresh one. */
TEST(ckpt_replica_receive_never_recycles_a_file_another_name_shares)
{
    char spare[4200], staged[4200], path[4200];
    snprintf(spare, sizeof spare, "%s/spare", test_tmpdir());
    snprintf(staged, sizeof staged, "%s/staged", test_tmpdir());
    snprintf(path, sizeof path, "%s/incoming", test_tmpdir());
    int fd = open(spare, O_WRONLY | O_CREAT | O_EXCL, 0600);
    ASSERT(fd >= 0);
    ASSERT_EQ(write(fd, "staged copy", 11), 11);
    close(fd);
    ASSERT_EQ(link(spare, staged), 0);

    replica_incoming in;
    ASSERT_EQ(replica__incoming_open(path, 11, NULL, spare, &in), 0);
    ASSERT(!in.recycled);
    ASSERT_EQ(pwrite(in.fd, "new content", 11, 0), 11);
    ASSERT_EQ(replica__incoming_keep(&in), 0);

    char bytes[12] = { 0 };
    fd = open(staged, O_RDONLY);
    ASSERT(fd >= 0);
    ASSERT_EQ(read(fd, bytes, 11), 11);
    close(fd);
    ASSERT_STR_EQ(bytes, "staged copy");
    fd = open(path, O_RDONLY);
    ASSERT(fd >= 0);
    ASSERT_EQ(read(fd, bytes, 11), 11);
    close(fd);
    ASSERT_STR_EQ(bytes, "new content");
    ASSERT(access(spare, F_OK) != 0); /* the spare's own name is gone */

    /* A file no other name shares is recycled. */
    fd = open(spare, O_WRONLY | O_CREAT | O_EXCL, 0600);
    ASSERT(fd >= 0);
    close(fd);
    ASSERT_EQ(replica__incoming_open(path, 11, NULL, spare, &in), 0);
    ASSERT(in.recycled);
    replica__incoming_drop(&in);
}

/* An idle TCP connection to `port` from `source` (another host's address
 * on loopback) that never says a word. */
static int idle_socket(const char *source, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT(fd >= 0);
    struct sockaddr_in from = { .sin_family = AF_INET }, to = { .sin_family = AF_INET };
    inet_pton(AF_INET, source, &from.sin_addr);
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    to.sin_port = htons((uint16_t)port);
    ASSERT_OK(bind(fd, (struct sockaddr *)&from, sizeof from));
    ASSERT_OK(connect(fd, (struct sockaddr *)&to, sizeof to));
    return fd;
}

/* Whether the receiver closed `fd` before the deadline. */
static bool closed_by_peer(int fd, int timeout_ms)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    char byte;
    return poll(&p, 1, timeout_ms) == 1 && recv(fd, &byte, 1, 0) <= 0;
}

/* A host without the key holds 20 idle sockets open against a receiver with
 * the defaults (16 peer slots): they wait in handshake slots of their own,
 * at most REPLICA_PER_SOURCE of them from that host, and are closed at the
 * handshake's deadline; a peer with the key pushes steps all along. */
TEST(ckpt_replica_idle_unauthenticated_sockets_never_stop_replication)
{
    const char *a = root_of("a"), *b = root_of("b");
    ASSERT_OK(ckpt__mem_tier_create(a, 64ull << 20, 2));
    replica_server *sb = serve(b, 64ull << 20, 2);
    int port = replica__server_port(sb);
    int idle[20];
    for (int i = 0; i < 20; i++) idle[i] = idle_socket("127.0.0.2", port);
    /* All 20 were accepted by the kernel; past the per-source cap the
     * receiver closes them at once. */
    int closed_at_once = 0;
    for (int i = 0; i < 20; i++) closed_at_once += closed_by_peer(idle[i], 200);
    ASSERT(closed_at_once >= 20 - (int)REPLICA_PER_SOURCE);
    uint64_t start = elastic__now_ms();
    for (uint64_t step = 1; step <= 2; step++) {
        save_step(a, step, 2);
        push(sb, a, step);
    }
    /* Long before the handshake deadline freed anything. */
    ASSERT_LT(elastic__now_ms() - start, (uint64_t)REPLICA_HANDSHAKE_MS);
    uint64_t files = 0;
    replica__server_counts(sb, &files, NULL, NULL);
    ASSERT_EQ(files, 6); /* two steps: two shards and a record each */
    /* The ones that held a handshake slot are closed at its deadline. */
    for (int i = 0; i < 20; i++) {
        if (!closed_by_peer(idle[i], test_scaled_ms(REPLICA_HANDSHAKE_MS + 3000)))
            FAIL("idle socket %d still open past the handshake deadline", i);
        close(idle[i]);
    }
    replica__server_stop(sb);
}

/* `world` ranks of generation `generation` save `step` into the tier's own directory. */
static void save_step_of(const char *root, uint64_t step, uint32_t world, uint64_t generation)
{
    for (uint32_t rank = 0; rank < world; rank++) {
        elastic_ckpt_opts o;
        elastic_ckpt_opts_init(&o, sizeof o);
        o.compression = ELASTIC_CKPT_NONE;
        o.rank = rank;
        o.world = world;
        o.generation = generation;
        elastic_ckpt *c;
        ASSERT_OK(elastic_ckpt_open(own_of(root), &o, &c));
        ASSERT_OK(ckpt_test_save(c, step, rank));
        elastic_ckpt_close(c);
    }
}

/* Shard file names carry their generation: pushes of one origin's step by
 * three generations leave one shard per rank (the last pushed), not three. */
TEST(ckpt_replica_receiver_keeps_one_file_per_rank_and_step_of_an_origin)
{
    const char *b = root_of("b");
    replica_server *sb = serve(b, 64ull << 20, 2);
    for (uint64_t g = 1; g <= 3; g++) {
        char name[16];
        snprintf(name, sizeof name, "a%" PRIu64, g);
        const char *a = root_of(name);
        ASSERT_OK(ckpt__mem_tier_create(a, 64ull << 20, 2));
        save_step_of(a, 1, 2, g);
        push(sb, a, 1);
    }
    char step_dir[4300];
    snprintf(step_dir, sizeof step_dir, "%s/" CKPT_MEM_PEER_DIR "/node-a/step-%020d", b, 1);
    DIR *d = opendir(step_dir);
    ASSERT(d != NULL);
    int shards = 0, of_gen3 = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        uint32_t rank;
        uint64_t gen;
        if (!ckpt__parse_shard_name(e->d_name, &rank, &gen)) continue;
        shards++;
        of_gen3 += gen == 3;
    }
    closedir(d);
    ASSERT_EQ(shards, 2);
    ASSERT_EQ(of_gen3, 2);
    replica__server_stop(sb);
}
