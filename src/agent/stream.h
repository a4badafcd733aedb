/*
 * A worker's stdout/stderr relayed on the loop (output.c).
 */
#ifndef ELASTIC_AGENT_STREAM_H
#define ELASTIC_AGENT_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#define AGENT_TAIL_BYTES 2048

typedef struct agent_stream {
    uv_pipe_t pipe;
    bool open;       /* the pipe handle is live (closing counts as live) */
    int console_fd;  /* where the console copy goes; -1: none */
    int file_fd;     /* the log file; -1: none */
    char prefix[56]; /* "[default3]:" when tee'd; "" otherwise */
    char line[1024]; /* partial line waiting for its prefix */
    size_t line_len;
    bool keep_tail; /* remember the last bytes (stderr) for the summary */
    char tail[2 * AGENT_TAIL_BYTES];
    size_t tail_len;
    void (*on_closed)(void *owner); /* after the handle closed */
    void *owner;
} agent_stream;

/* Starts relaying `fd` (owned from now on) on the loop. */
int agent__stream_open(uv_loop_t *loop, agent_stream *stream, int fd);
/* Reads what the exited worker left in the pipe, flushes, closes the file
 * and the handle (asynchronously: *closing_handles drops when done). */
void agent__stream_finish(agent_stream *stream);
/* The last bytes seen, at most size-1, NUL-terminated. */
size_t agent__stream_tail(const agent_stream *stream, char *out, size_t size);

#endif /* ELASTIC_AGENT_STREAM_H */
