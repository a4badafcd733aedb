/*
 * Relays a worker's stdout or stderr: into its log file, onto the console
 * (with a "[default0]:" prefix per line when tee'd, as torchrun), and keeps the last bytes of
 * stderr for the root-cause summary.
 */
#include "common/tsan_fd.h"
#include "agent/stream.h"

#include "common/common.h"

#include <string.h>

#include <errno.h>
#include <unistd.h>

static void write_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t written = write(fd, data, len);
        if (written < 0 && errno == EINTR) continue;
        if (written <= 0) return; /* a full disk or a closed console must not stop the agent */
        data += written;
        len -= (size_t)written;
    }
}

static void keep_tail(agent_stream *stream, const char *data, size_t len)
{
    if (len >= AGENT_TAIL_BYTES) {
        memcpy(stream->tail, data + len - AGENT_TAIL_BYTES, AGENT_TAIL_BYTES);
        stream->tail_len = AGENT_TAIL_BYTES;
        return;
    }
    if (stream->tail_len + len > sizeof stream->tail) {
        size_t keep = AGENT_TAIL_BYTES - len;
        memmove(stream->tail, stream->tail + stream->tail_len - keep, keep);
        stream->tail_len = keep;
    }
    memcpy(stream->tail + stream->tail_len, data, len);
    stream->tail_len += len;
}

static void flush_line(agent_stream *stream)
{
    if (stream->line_len == 0) return;
    char out[sizeof stream->line + sizeof stream->prefix + 2];
    size_t prefix_len = strlen(stream->prefix);
    memcpy(out, stream->prefix, prefix_len);
    memcpy(out + prefix_len, stream->line, stream->line_len);
    write_all(stream->console_fd, out, prefix_len + stream->line_len);
    stream->line_len = 0;
}

/* Prefixed console output goes out a whole line at a time, so lines of
 * different ranks do not interleave mid-line. */
static void to_console(agent_stream *stream, const char *data, size_t len)
{
    if (stream->prefix[0] == '\0') {
        write_all(stream->console_fd, data, len);
        return;
    }
    for (size_t i = 0; i < len; i++) {
        stream->line[stream->line_len++] = data[i];
        if (data[i] == '\n' || stream->line_len == sizeof stream->line) flush_line(stream);
    }
}

static void deliver(agent_stream *stream, const char *data, size_t len)
{
    if (stream->file_fd >= 0) write_all(stream->file_fd, data, len);
    if (stream->console_fd >= 0) to_console(stream, data, len);
    if (stream->keep_tail) keep_tail(stream, data, len);
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
    static _Thread_local char buffer[65536]; /* per loop thread: consumed before the next read */
    (void)handle;
    (void)suggested;
    *buf = uv_buf_init(buffer, sizeof buffer);
}

static void on_read(uv_stream_t *handle, ssize_t nread, const uv_buf_t *buf)
{
    agent_stream *stream = handle->data;
    if (nread > 0) deliver(stream, buf->base, (size_t)nread);
    if (nread < 0) uv_read_stop(handle); /* EOF or error: agent__stream_finish closes it */
}

int agent__stream_open(uv_loop_t *loop, agent_stream *stream, int fd)
{
    int rc = uv_pipe_init(loop, &stream->pipe, 0);
    if (rc == 0) rc = uv_pipe_open(&stream->pipe, fd);
    if (rc != 0) {
        close(fd);
        return elastic__fail(ELASTIC_ESYS, "worker output pipe: %s", uv_strerror(rc));
    }
    stream->pipe.data = stream;
    stream->open = true;
    rc = uv_read_start((uv_stream_t *)&stream->pipe, on_alloc, on_read);
    if (rc != 0) return elastic__fail(ELASTIC_ESYS, "worker output read: %s", uv_strerror(rc));
    return 0;
}

static void on_closed(uv_handle_t *handle)
{
    agent_stream *stream = handle->data;
    stream->open = false;
    if (stream->on_closed != NULL) stream->on_closed(stream->owner);
}

void agent__stream_finish(agent_stream *stream)
{
    if (!stream->open || uv_is_closing((uv_handle_t *)&stream->pipe)) return;
    uv_read_stop((uv_stream_t *)&stream->pipe);
    /* The worker has exited: what it wrote is in the pipe now. Read it
     * without waiting (libuv made the fd non-blocking); grandchildren that
     * still hold the pipe do not keep us here. */
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&stream->pipe, &fd) == 0) {
        char buffer[65536];
        for (int rounds = 0; rounds < 64; rounds++) {
            ssize_t got = read(fd, buffer, sizeof buffer);
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) break;
            deliver(stream, buffer, (size_t)got);
        }
    }
    if (stream->line_len > 0) {                  /* a last line without its newline: end it */
        stream->line[stream->line_len++] = '\n'; /* to_console flushes before the buffer is full */
        flush_line(stream);
    }
    if (stream->file_fd >= 0) close(stream->file_fd);
    stream->file_fd = -1;
    if (uv_fileno((uv_handle_t *)&stream->pipe, &fd) == 0) elastic__tsan_fd_closing(fd);
    uv_close((uv_handle_t *)&stream->pipe, on_closed);
}

size_t agent__stream_tail(const agent_stream *stream, char *out, size_t size)
{
    if (size == 0) return 0;
    size_t len = stream->tail_len < size - 1 ? stream->tail_len : size - 1;
    memcpy(out, stream->tail + stream->tail_len - len, len);
    out[len] = '\0';
    return len;
}
