/*
 * Writing a hung worker's stacks to its log before it is killed: a debugger
 * (gdb, else eu-stack) attached for one batch command, its output captured and
 * checked for frames; when there is none or it fails, the signal the worker
 * library handles by writing its own backtrace.
 */
#include "probe/probe.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define STACK_OUTPUT_MAX      (1u << 20)
#define STACK_DEBUGGER_MIN_MS 1000

struct probe__stack_dump {
    uv_loop_t *loop;
    uv_process_t process;
    uv_pipe_t output;
    uv_timer_t timer;
    int open_handles;
    int pid, log_fd, fallback_signal;
    bool spawned; /* uv_spawn was called: the process handle needs closing */
    bool process_exited, output_ended, finished, canceled;
    elastic__text captured;
    probe__stack_done_fn done;
    void *user;
    const char *how;
};

static bool on_path(const char *name)
{
    const char *path = getenv("PATH");
    if (path == NULL) path = "/usr/local/bin:/usr/bin:/bin";
    while (*path != '\0') {
        size_t len = strcspn(path, ":");
        char candidate[1024];
        if (len > 0 && len + strlen(name) + 2 < sizeof candidate) {
            snprintf(candidate, sizeof candidate, "%.*s/%s", (int)len, path, name);
            if (access(candidate, X_OK) == 0) return true;
        }
        path += len;
        if (*path == ':') path++;
    }
    return false;
}

const char *probe__stack_debugger(void)
{
    static int cached = -1; /* 0: none, 1: gdb, 2: eu-stack */
    int found = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (found < 0) {
        found = on_path("gdb") ? 1 : on_path("eu-stack") ? 2 : 0;
        __atomic_store_n(&cached, found, __ATOMIC_RELAXED);
    }
    return found == 1 ? "gdb" : found == 2 ? "eu-stack" : NULL;
}

static void write_log(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        data += n;
        len -= (size_t)n;
    }
}

static void release(uv_handle_t *handle)
{
    probe__stack_dump *dump = handle->data;
    if (--dump->open_handles > 0) return;
    elastic__text_free(&dump->captured);
    close(dump->log_fd);
    free(dump);
}

static void close_all(probe__stack_dump *dump)
{
    uv_close((uv_handle_t *)&dump->timer, release);
    uv_close((uv_handle_t *)&dump->output, release);
    if (dump->spawned) uv_close((uv_handle_t *)&dump->process, release);
}

/* Falls back to the worker's own handler when the debugger gave no frames. */
static void finish(probe__stack_dump *dump)
{
    if (dump->finished) return;
    dump->finished = true;
    bool frames = dump->captured.data != NULL && strstr(dump->captured.data, "#0") != NULL;
    bool ok = false;
    if (dump->canceled) {
        /* nothing to report */
    } else if (frames) {
        char header[128];
        int n = snprintf(header, sizeof header, "elastic: stacks of pid %d (%s)\n", dump->pid,
                         dump->how);
        write_log(dump->log_fd, header, (size_t)n);
        write_log(dump->log_fd, dump->captured.data, dump->captured.len);
        ok = true;
    } else if (dump->fallback_signal > 0 && kill(dump->pid, dump->fallback_signal) == 0) {
        dump->how = "signal";
        ok = true;
    } else {
        dump->how = "none";
    }
    if (!dump->canceled) dump->done(dump->user, dump->how, ok);
    close_all(dump);
}

/* The debugger is done once it exited and its output reached end of stream. */
static void maybe_finish(probe__stack_dump *dump)
{
    if (dump->process_exited && dump->output_ended) finish(dump);
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
    static char scratch[16384];
    (void)handle, (void)suggested;
    *buf = uv_buf_init(scratch, sizeof scratch); /* the loop's thread only; copied out at once */
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    probe__stack_dump *dump = stream->data;
    if (nread > 0) {
        elastic__text_printf(&dump->captured, "%.*s", (int)nread, buf->base);
    } else if (nread < 0) {
        uv_read_stop(stream);
        dump->output_ended = true;
        maybe_finish(dump);
    }
}

static void on_exit_cb(uv_process_t *process, int64_t status, int term_signal)
{
    probe__stack_dump *dump = process->data;
    (void)status, (void)term_signal;
    dump->process_exited = true;
    maybe_finish(dump);
}

/* A debugger stuck on the tracee: kill it; its exit then finishes the dump. */
static void on_timeout(uv_timer_t *timer)
{
    probe__stack_dump *dump = timer->data;
    ELASTIC_LOG_W("probe", "%s on pid %d did not finish in time", dump->how, dump->pid);
    uv_process_kill(&dump->process, SIGKILL);
    dump->output_ended = true;
    uv_read_stop((uv_stream_t *)&dump->output);
    maybe_finish(dump);
}

static int spawn_debugger(probe__stack_dump *dump, const char *debugger, int timeout_ms)
{
    char pid_text[16];
    snprintf(pid_text, sizeof pid_text, "%d", dump->pid);
    char *gdb_args[] = { "gdb",    "-p",
                         pid_text, "-batch",
                         "-nx",    "-q",
                         "-ex",    "set pagination off",
                         "-ex",    "thread apply all bt",
                         NULL };
    char *eu_args[] = { "eu-stack", "-p", pid_text, NULL };
    uv_stdio_container_t stdio[3] = {
        { .flags = UV_IGNORE },
        { .flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&dump->output },
        { .flags = UV_INHERIT_FD, .data.fd = dump->log_fd },
    };
    uv_process_options_t options = {
        .exit_cb = on_exit_cb, .file = debugger, .stdio_count = 3, .stdio = stdio
    };
    options.args = strcmp(debugger, "gdb") == 0 ? gdb_args : eu_args;
    dump->spawned = true; /* uv_spawn initialises the handle even when it fails */
    int err = uv_spawn(dump->loop, &dump->process, &options);
    if (err != 0) return elastic__fail(ELASTIC_ESYS, "spawn %s: %s", debugger, uv_strerror(err));
    uv_read_start((uv_stream_t *)&dump->output, on_alloc, on_read);
    uv_timer_start(&dump->timer, on_timeout, (uint64_t)timeout_ms, 0);
    return 0;
}

int probe__stack_dump_start(uv_loop_t *loop, int pid, int log_fd, int fallback_signal,
                            int timeout_ms, probe__stack_done_fn done, void *user,
                            probe__stack_dump **out)
{
    if (pid <= 0 || timeout_ms <= 0 || done == NULL)
        return elastic__fail(ELASTIC_EINVAL, "stack dump arguments");
    probe__stack_dump *dump = calloc(1, sizeof *dump);
    if (dump == NULL) return elastic__fail(ELASTIC_ENOMEM, "stack dump");
    *dump = (probe__stack_dump){
        .loop = loop, .pid = pid, .fallback_signal = fallback_signal, .done = done, .user = user
    };
    dump->log_fd = fcntl(log_fd >= 0 ? log_fd : STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
    elastic__text_init(&dump->captured, STACK_OUTPUT_MAX);
    uv_pipe_init(loop, &dump->output, 0);
    uv_timer_init(loop, &dump->timer);
    dump->output.data = dump->timer.data = dump->process.data = dump;
    /* Attaching a debugger takes a good fraction of a second: within a
     * shorter budget the worker's own handler writes its backtrace instead. */
    const char *debugger =
        fallback_signal != 0 && timeout_ms < STACK_DEBUGGER_MIN_MS ? NULL : probe__stack_debugger();
    dump->how = debugger != NULL ? debugger : "none";
    int rc = dump->log_fd < 0 ? elastic__fail(ELASTIC_ESYS, "dup log fd: %s", strerror(errno)) : 0;
    if (rc == 0 && debugger != NULL) rc = spawn_debugger(dump, debugger, timeout_ms);
    dump->open_handles = dump->spawned ? 3 : 2;
    if (rc != 0) ELASTIC_LOG_W("probe", "stack dump of pid %d: %s", pid, elastic_last_error());
    if (rc != 0 || debugger == NULL) finish(dump); /* straight to the fallback signal */
    if (out != NULL) *out = dump->finished ? NULL : dump;
    return 0;
}

void probe__stack_dump_cancel(probe__stack_dump *dump)
{
    if (dump == NULL || dump->finished) return;
    dump->canceled = true; /* finishes when the killed debugger exits */
    uv_process_kill(&dump->process, SIGKILL);
}
