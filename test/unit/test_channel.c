/* The agent<->worker channel: heartbeat file layout checks, control framing
 * and its bounds, and the payload parser. */
#include "test.h"
#include "channel/channel.h"

#include <fcntl.h>
#include <sys/socket.h>

static const char *tmp_path(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", test_tmpdir(), name);
    return path;
}

TEST(channel_heartbeat_file_slots_are_shared)
{
    channel__hb_region *agent = NULL, *worker = NULL;
    channel__hb_slot *slot = NULL;
    ASSERT_OK(channel__hb_create(tmp_path("hb"), 4, &agent));
    ASSERT_OK(channel__hb_attach(tmp_path("hb"), 2, &worker, &slot));
    __atomic_store_n(&slot->step, 42, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->beats, 7, __ATOMIC_RELEASE);
    channel__hb_snapshot snap;
    channel__hb_read(agent, 2, &snap);
    ASSERT_EQ(snap.step, 42);
    ASSERT_EQ(snap.beats, 7);
    channel__hb_read(agent, 1, &snap);
    ASSERT_EQ(snap.beats, 0);
    channel__hb_reset(agent, 2);
    channel__hb_read(agent, 2, &snap);
    ASSERT_EQ(snap.step, 0);
    channel__hb_close(worker, false);
    channel__hb_close(agent, true);
    ASSERT(access(tmp_path("hb"), F_OK) != 0);
}

TEST(channel_heartbeat_attach_refuses_foreign_files)
{
    channel__hb_region *region = NULL;
    channel__hb_slot *slot = NULL;
    int fd = open(tmp_path("junk"), O_WRONLY | O_CREAT, 0600);
    char junk[4096];
    memset(junk, 0x5a, sizeof junk);
    ASSERT_EQ(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
    close(fd);
    ASSERT_ERR(channel__hb_attach(tmp_path("junk"), 0, &region, &slot), ELASTIC_EPROTO);
    ASSERT_ERR(channel__hb_attach(tmp_path("missing"), 0, &region, &slot), ELASTIC_ENOTFOUND);
    channel__hb_region *agent = NULL;
    ASSERT_OK(channel__hb_create(tmp_path("hb"), 2, &agent));
    ASSERT_ERR(channel__hb_attach(tmp_path("hb"), 2, &region, &slot), ELASTIC_ERANGE);
    ASSERT_ERR(channel__hb_create(tmp_path("hb2"), 0, &region), ELASTIC_EINVAL);
    channel__hb_close(agent, true);
}

TEST(channel_payload_parses_pairs_in_place)
{
    char text[] = "RANK=3\nREASON=a=b c\n\nEMPTY=\n";
    channel__kv kv;
    ASSERT_OK(channel__kv_parse(text, strlen(text), &kv));
    ASSERT_EQ(kv.count, 3);
    ASSERT_STR_EQ(channel__kv_get(&kv, "RANK"), "3");
    ASSERT_STR_EQ(channel__kv_get(&kv, "REASON"), "a=b c");
    ASSERT_STR_EQ(channel__kv_get(&kv, "EMPTY"), "");
    ASSERT(channel__kv_get(&kv, "MISSING") == NULL);
    char no_newline[8] = "A=1";
    ASSERT_OK(channel__kv_parse(no_newline, 3, &kv));
    ASSERT_STR_EQ(channel__kv_get(&kv, "A"), "1");
}

TEST(channel_payload_rejects_malformed_lines)
{
    channel__kv kv;
    char no_equals[] = "RANK\n";
    ASSERT_ERR(channel__kv_parse(no_equals, strlen(no_equals), &kv), ELASTIC_EPROTO);
    char empty_key[] = "=1\n";
    ASSERT_ERR(channel__kv_parse(empty_key, strlen(empty_key), &kv), ELASTIC_EPROTO);
    char with_nul[] = "A=1\0B=2\n";
    ASSERT_ERR(channel__kv_parse(with_nul, sizeof with_nul - 1, &kv), ELASTIC_EPROTO);
    static char many[CHANNEL__MSG_MAX_PAIRS * 4 + 8];
    size_t len = 0;
    for (unsigned i = 0; i <= CHANNEL__MSG_MAX_PAIRS; i++)
        len += (size_t)sprintf(many + len, "K=\n");
    ASSERT_ERR(channel__kv_parse(many, len, &kv), ELASTIC_ELIMIT);
}

TEST(channel_control_frames_round_trip)
{
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    ASSERT_OK(channel__msg_write(fds[0], CHANNEL__MSG_ABORT, "GENERATION=4\n", 13));
    ASSERT_OK(channel__msg_write(fds[0], CHANNEL__MSG_STOP, "", 0));
    channel__msg_header header;
    static char payload[CHANNEL__MSG_MAX_PAYLOAD + 1];
    ASSERT_OK(channel__msg_read(fds[1], 1000, &header, payload));
    ASSERT_EQ(header.type, CHANNEL__MSG_ABORT);
    ASSERT_STR_EQ(payload, "GENERATION=4\n");
    ASSERT_OK(channel__msg_read(fds[1], 1000, &header, payload));
    ASSERT_EQ(header.type, CHANNEL__MSG_STOP);
    ASSERT_EQ(header.length, 0);
    ASSERT_ERR(channel__msg_read(fds[1], 50, &header, payload), ELASTIC_ETIMEDOUT);
    close(fds[0]);
    ASSERT_ERR(channel__msg_read(fds[1], 1000, &header, payload), ELASTIC_ECLOSED);
    close(fds[1]);
}

TEST(channel_control_frames_are_bounded)
{
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    channel__msg_header header = { .magic = CHANNEL__MSG_MAGIC,
                                   .type = CHANNEL__MSG_ABORT,
                                   .length = CHANNEL__MSG_MAX_PAYLOAD + 1 };
    ASSERT_EQ(write(fds[0], &header, sizeof header), (ssize_t)sizeof header);
    static char payload[CHANNEL__MSG_MAX_PAYLOAD + 1];
    channel__msg_header got;
    ASSERT_ERR(channel__msg_read(fds[1], 1000, &got, payload), ELASTIC_ELIMIT);
    header = (channel__msg_header){ .magic = 0x1234, .type = CHANNEL__MSG_ABORT };
    ASSERT_ERR(channel__msg_check_header(&header), ELASTIC_EPROTO);
    header = (channel__msg_header){ .magic = CHANNEL__MSG_MAGIC, .type = 99 };
    ASSERT_ERR(channel__msg_check_header(&header), ELASTIC_EPROTO);
    ASSERT_ERR(
        channel__msg_write(fds[0], CHANNEL__MSG_ABORT, payload, CHANNEL__MSG_MAX_PAYLOAD + 1),
        ELASTIC_ELIMIT);
    close(fds[0]);
    close(fds[1]);
}

TEST(channel_worker_env_formats_what_the_worker_parses)
{
    channel__worker_env env = { .rank = 2,
                                .local_rank = 0,
                                .world_size = 3,
                                .local_world_size = 1,
                                .group_rank = 2,
                                .restart_count = 1,
                                .generation = 9,
                                .incarnation = 1764600000123ull,
                                .run_id = "j1",
                                .master_addr = "127.0.0.1",
                                .master_port = 1234,
                                .store_endpoint = "127.0.0.1:5",
                                .store_prefix = "g/9/",
                                .heartbeat_shm = "/tmp/hb",
                                .heartbeat_slot = 0,
                                .agent_socket = "/tmp/a.sock" };
    elastic__text text;
    elastic__text_init(&text, 8192);
    ASSERT_OK(channel__worker_env_format(&env, &text));
    ASSERT(strstr(text.data, "RANK=2\n") != NULL);
    ASSERT(strstr(text.data, "ELASTIC_GENERATION=9\n") != NULL);
    ASSERT(strstr(text.data, "ELASTIC_INCARNATION=1764600000123\n") != NULL);
    ASSERT(strstr(text.data, "ELASTIC_AGENT_SOCKET=/tmp/a.sock\n") != NULL);
    elastic__text_free(&text);
    env.incarnation = 0; /* none: not set at all */
    elastic__text_init(&text, 8192);
    ASSERT_OK(channel__worker_env_format(&env, &text));
    ASSERT(strstr(text.data, "ELASTIC_INCARNATION") == NULL);
    elastic__text_free(&text);
    env.run_id = "bad\nid";
    elastic__text_init(&text, 8192);
    ASSERT_ERR(channel__worker_env_format(&env, &text), ELASTIC_EINVAL);
    elastic__text_free(&text);
}
