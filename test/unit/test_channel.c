/* The agent<->worker channel: heartbeat file layout checks, control framing
 * and its bounds, and the payload parser. */
#include "test.h"
#include "probe/probe.h"

#include <fcntl.h>
#include <sys/socket.h>

static const char *tmp_path(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", test_tmpdir(), name);
    return path;
}

TEST(probe_heartbeat_file_slots_are_shared)
{
    probe__hb_region *agent = NULL, *worker = NULL;
    probe__hb_slot *slot = NULL;
    ASSERT_OK(probe__hb_create(tmp_path("hb"), 4, &agent));
    ASSERT_OK(probe__hb_attach(tmp_path("hb"), 2, &worker, &slot));
    __atomic_store_n(&slot->step, 42, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->beats, 7, __ATOMIC_RELEASE);
    probe__hb_snapshot snap;
    probe__hb_read(agent, 2, &snap);
    ASSERT_EQ(snap.step, 42);
    ASSERT_EQ(snap.beats, 7);
    probe__hb_read(agent, 1, &snap);
    ASSERT_EQ(snap.beats, 0);
    probe__hb_reset(agent, 2);
    probe__hb_read(agent, 2, &snap);
    ASSERT_EQ(snap.step, 0);
    probe__hb_close(worker, false);
    probe__hb_close(agent, true);
    ASSERT(access(tmp_path("hb"), F_OK) != 0);
}

TEST(probe_heartbeat_attach_refuses_foreign_files)
{
    probe__hb_region *region = NULL;
    probe__hb_slot *slot = NULL;
    int fd = open(tmp_path("junk"), O_WRONLY | O_CREAT, 0600);
    char junk[4096];
    memset(junk, 0x5a, sizeof junk);
    ASSERT_EQ(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
    close(fd);
    ASSERT_ERR(probe__hb_attach(tmp_path("junk"), 0, &region, &slot), ELASTIC_EPROTO);
    ASSERT_ERR(probe__hb_attach(tmp_path("missing"), 0, &region, &slot), ELASTIC_ENOTFOUND);
    probe__hb_region *agent = NULL;
    ASSERT_OK(probe__hb_create(tmp_path("hb"), 2, &agent));
    ASSERT_ERR(probe__hb_attach(tmp_path("hb"), 2, &region, &slot), ELASTIC_ERANGE);
    ASSERT_ERR(probe__hb_create(tmp_path("hb2"), 0, &region), ELASTIC_EINVAL);
    probe__hb_close(agent, true);
}

TEST(probe_payload_parses_pairs_in_place)
{
    char text[] = "RANK=3\nREASON=a=b c\n\nEMPTY=\n";
    probe__kv kv;
    ASSERT_OK(probe__kv_parse(text, strlen(text), &kv));
    ASSERT_EQ(kv.count, 3);
    ASSERT_STR_EQ(probe__kv_get(&kv, "RANK"), "3");
    ASSERT_STR_EQ(probe__kv_get(&kv, "REASON"), "a=b c");
    ASSERT_STR_EQ(probe__kv_get(&kv, "EMPTY"), "");
    ASSERT(probe__kv_get(&kv, "MISSING") == NULL);
    char no_newline[8] = "A=1";
    ASSERT_OK(probe__kv_parse(no_newline, 3, &kv));
    ASSERT_STR_EQ(probe__kv_get(&kv, "A"), "1");
}

TEST(probe_payload_rejects_malformed_lines)
{
    probe__kv kv;
    char no_equals[] = "RANK\n";
    ASSERT_ERR(probe__kv_parse(no_equals, strlen(no_equals), &kv), ELASTIC_EPROTO);
    char empty_key[] = "=1\n";
    ASSERT_ERR(probe__kv_parse(empty_key, strlen(empty_key), &kv), ELASTIC_EPROTO);
    char with_nul[] = "A=1\0B=2\n";
    ASSERT_ERR(probe__kv_parse(with_nul, sizeof with_nul - 1, &kv), ELASTIC_EPROTO);
    static char many[PROBE__MSG_MAX_PAIRS * 4 + 8];
    size_t len = 0;
    for (unsigned i = 0; i <= PROBE__MSG_MAX_PAIRS; i++) len += (size_t)sprintf(many + len, "K=\n");
    ASSERT_ERR(probe__kv_parse(many, len, &kv), ELASTIC_ELIMIT);
}

TEST(probe_control_frames_round_trip)
{
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    ASSERT_OK(probe__msg_write(fds[0], PROBE__MSG_ABORT, "GENERATION=4\n", 13));
    ASSERT_OK(probe__msg_write(fds[0], PROBE__MSG_STOP, "", 0));
    probe__msg_header header;
    static char payload[PROBE__MSG_MAX_PAYLOAD + 1];
    ASSERT_OK(probe__msg_read(fds[1], 1000, &header, payload));
    ASSERT_EQ(header.type, PROBE__MSG_ABORT);
    ASSERT_STR_EQ(payload, "GENERATION=4\n");
    ASSERT_OK(probe__msg_read(fds[1], 1000, &header, payload));
    ASSERT_EQ(header.type, PROBE__MSG_STOP);
    ASSERT_EQ(header.length, 0);
    ASSERT_ERR(probe__msg_read(fds[1], 50, &header, payload), ELASTIC_ETIMEDOUT);
    close(fds[0]);
    ASSERT_ERR(probe__msg_read(fds[1], 1000, &header, payload), ELASTIC_ECLOSED);
    close(fds[1]);
}

TEST(probe_control_frames_are_bounded)
{
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    probe__msg_header header = {.magic = PROBE__MSG_MAGIC, .type = PROBE__MSG_ABORT,
                                .length = PROBE__MSG_MAX_PAYLOAD + 1};
    ASSERT_EQ(write(fds[0], &header, sizeof header), (ssize_t)sizeof header);
    static char payload[PROBE__MSG_MAX_PAYLOAD + 1];
    probe__msg_header got;
    ASSERT_ERR(probe__msg_read(fds[1], 1000, &got, payload), ELASTIC_ELIMIT);
    header = (probe__msg_header){.magic = 0x1234, .type = PROBE__MSG_ABORT};
    ASSERT_ERR(probe__msg_check_header(&header), ELASTIC_EPROTO);
    header = (probe__msg_header){.magic = PROBE__MSG_MAGIC, .type = 99};
    ASSERT_ERR(probe__msg_check_header(&header), ELASTIC_EPROTO);
    ASSERT_ERR(probe__msg_write(fds[0], PROBE__MSG_ABORT, payload, PROBE__MSG_MAX_PAYLOAD + 1), ELASTIC_ELIMIT);
    close(fds[0]);
    close(fds[1]);
}

TEST(probe_worker_env_formats_what_the_worker_parses)
{
    probe__worker_env env = {.rank = 2, .local_rank = 0, .world_size = 3, .local_world_size = 1, .group_rank = 2,
                             .restart_count = 1, .generation = 9, .run_id = "j1", .master_addr = "127.0.0.1",
                             .master_port = 1234, .store_endpoint = "127.0.0.1:5", .store_prefix = "g/9/",
                             .heartbeat_shm = "/tmp/hb", .heartbeat_slot = 0, .agent_socket = "/tmp/a.sock"};
    probe__text text;
    probe__text_init(&text, 8192);
    ASSERT_OK(probe__worker_env_format(&env, &text));
    ASSERT(strstr(text.data, "RANK=2\n") != NULL);
    ASSERT(strstr(text.data, "ELASTIC_GENERATION=9\n") != NULL);
    ASSERT(strstr(text.data, "ELASTIC_AGENT_SOCKET=/tmp/a.sock\n") != NULL);
    probe__text_free(&text);
    env.run_id = "bad\nid";
    probe__text_init(&text, 8192);
    ASSERT_ERR(probe__worker_env_format(&env, &text), ELASTIC_EINVAL);
    probe__text_free(&text);
}
