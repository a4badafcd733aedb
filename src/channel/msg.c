/*
 * Control-channel framing shared by agent and worker: a fixed header, then a
 * bounded "KEY=value\n" payload parsed in place with the environment's rules.
 * The bytes go through common/conn.h's deadline send and receive.
 */
#include "common/common.h"
#include "common/clock.h"
#include "common/conn.h"
#include "channel/channel.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

int channel__msg_check_header(const channel__msg_header *header)
{
    if (header->magic != CHANNEL__MSG_MAGIC)
        return elastic__fail(ELASTIC_EPROTO, "control frame: bad magic 0x%x", header->magic);
    if (header->type < CHANNEL__MSG_HELLO || header->type >= CHANNEL__MSG_TYPE_END_)
        return elastic__fail(ELASTIC_EPROTO, "control frame: unknown type %u", header->type);
    if (header->length > CHANNEL__MSG_MAX_PAYLOAD)
        return elastic__fail(ELASTIC_ELIMIT, "control frame: payload of %u bytes exceeds %u",
                             header->length, CHANNEL__MSG_MAX_PAYLOAD);
    return 0;
}

static int add_pair(channel__kv *kv, char *line)
{
    char *equals = strchr(line, '=');
    if (equals == NULL || equals == line)
        return elastic__fail(ELASTIC_EPROTO, "control payload: line without KEY=");
    if (kv->count == CHANNEL__MSG_MAX_PAIRS)
        return elastic__fail(ELASTIC_ELIMIT, "control payload: more than %u pairs",
                             CHANNEL__MSG_MAX_PAIRS);
    *equals = '\0';
    kv->keys[kv->count] = line;
    kv->values[kv->count] = equals + 1;
    kv->count++;
    return 0;
}

int channel__kv_parse(char *buf, size_t len, channel__kv *kv)
{
    kv->count = 0;
    if (memchr(buf, '\0', len) != NULL)
        return elastic__fail(ELASTIC_EPROTO, "control payload: NUL byte");
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && buf[i] != '\n') continue;
        if (i == len && i == start) break; /* trailing newline */
        buf[i] = '\0';                     /* buf has room for the NUL at len */
        if (i > start) {
            int rc = add_pair(kv, buf + start);
            if (rc != 0) return rc;
        }
        start = i + 1;
    }
    return 0;
}

const char *channel__kv_get(const channel__kv *kv, const char *key)
{
    for (size_t i = 0; i < kv->count; i++)
        if (strcmp(kv->keys[i], key) == 0) return kv->values[i];
    return NULL;
}

/* A frame the agent does not take in this long (it stopped reading its
 * workers' sockets): the write fails instead of holding the trainer. */
#define CHANNEL__WRITE_MS 30000

int channel__msg_write(int fd, int type, const char *payload, size_t length)
{
    if (length > CHANNEL__MSG_MAX_PAYLOAD)
        return elastic__fail(ELASTIC_ELIMIT, "control payload too large");
    char frame[sizeof(channel__msg_header) + CHANNEL__MSG_MAX_PAYLOAD];
    channel__msg_header header = { .magic = CHANNEL__MSG_MAGIC,
                                   .type = (uint16_t)type,
                                   .length = (uint32_t)length };
    memcpy(frame, &header, sizeof header);
    if (length > 0) memcpy(frame + sizeof header, payload, length);
    /* One write: frames of this size are atomic on a unix stream socket in practice,
     * and the writer never interleaves two frames (one writer per fd side). */
    return elastic__send_all(fd, frame, sizeof header + length,
                             elastic__deadline_ms(CHANNEL__WRITE_MS), "control write");
}

/* Reads exactly len bytes; the frame's first byte waited for up to deadline,
 * the rest of a started frame gets a short grace so a dead peer cannot hang us.
 * The stream's end before a frame is ELASTIC_ECLOSED: the peer left. */
static int read_exact(int fd, void *data, size_t len, uint64_t deadline_ms)
{
    while (len > 0) {
        int rc = elastic__conn_wait(fd, POLLIN, deadline_ms);
        if (rc == ELASTIC_ETIMEDOUT) return elastic__fail(rc, "control read timed out");
        if (rc != 0) return elastic__fail(rc, "control poll: %s", strerror(errno));
        char first;
        ssize_t n = recv(fd, &first, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0) return elastic__fail(ELASTIC_ECLOSED, "control channel closed");
        if (n > 0 || (errno != EINTR && errno != EAGAIN)) /* bytes, or recv_exact's error */
            return elastic__recv_exact(fd, data, len, deadline_ms, "control read");
    }
    return 0;
}

int channel__msg_read(int fd, int timeout_ms, channel__msg_header *header, char *payload)
{
    int rc = read_exact(fd, header, sizeof *header, elastic__deadline_ms(timeout_ms));
    if (rc != 0) return rc;
    rc = channel__msg_check_header(header);
    if (rc != 0) return rc;
    rc = read_exact(fd, payload, header->length, elastic__deadline_ms(5000));
    if (rc == ELASTIC_ETIMEDOUT) rc = elastic__fail(ELASTIC_EPROTO, "control frame truncated");
    if (rc == 0) payload[header->length] = '\0';
    return rc;
}
