/*
 * User probes: a command (through /bin/sh -c; exit 0 = healthy) or a callback
 * run on an interval on the agent's loop. A command that outlives its timeout
 * is killed and counts as unhealthy. One run at a time: the next starts an
 * interval after the previous one finished.
 */
#include "probe/probe.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

struct probe__user_probe {
    uv_loop_t *loop;
    uv_timer_t interval_timer, timeout_timer;
    uv_process_t process;
    char *command;
    probe__user_fn fn;
    void *fn_user;
    int interval_ms, timeout_ms;
    probe__user_result_fn result;
    void *user;
    bool running, timed_out, stopping;
    int open_handles;
};

static void release(uv_handle_t *handle)
{
    probe__user_probe *probe = handle->data;
    if (--probe->open_handles > 0) return;
    free(probe->command);
    free(probe);
}

static void schedule(probe__user_probe *probe);

static void report(probe__user_probe *probe, bool healthy, const char *reason)
{
    if (!probe->stopping) probe->result(probe->user, healthy, reason);
    if (!probe->stopping) schedule(probe);
}

static void on_command_exit(uv_process_t *process, int64_t status, int term_signal)
{
    probe__user_probe *probe = process->data;
    probe->running = false;
    uv_timer_stop(&probe->timeout_timer);
    uv_close((uv_handle_t *)process, release);
    char reason[160];
    if (probe->timed_out)
        snprintf(reason, sizeof reason, "user probe timed out after %d ms", probe->timeout_ms);
    else if (term_signal != 0)
        snprintf(reason, sizeof reason, "user probe killed by signal %d", term_signal);
    else
        snprintf(reason, sizeof reason, "user probe exited with %lld", (long long)status);
    report(probe, !probe->timed_out && term_signal == 0 && status == 0, reason);
}

static void on_command_timeout(uv_timer_t *timer)
{
    probe__user_probe *probe = timer->data;
    probe->timed_out = true;
    uv_process_kill(&probe->process, SIGKILL);
}

static void run_command(probe__user_probe *probe)
{
    char *args[] = { "/bin/sh", "-c", probe->command, NULL };
    uv_stdio_container_t stdio[3] = { { .flags = UV_IGNORE },
                                      { .flags = UV_INHERIT_FD, .data.fd = 2 },
                                      { .flags = UV_INHERIT_FD, .data.fd = 2 } };
    uv_process_options_t options = { .exit_cb = on_command_exit,
                                     .file = "/bin/sh",
                                     .args = args,
                                     .stdio_count = 3,
                                     .stdio = stdio };
    probe->process.data = probe;
    probe->open_handles++; /* uv_spawn initialises the handle even when it fails */
    int err = uv_spawn(probe->loop, &probe->process, &options);
    if (err != 0) {
        uv_close((uv_handle_t *)&probe->process, release);
        char reason[160];
        snprintf(reason, sizeof reason, "user probe could not start: %s", uv_strerror(err));
        report(probe, false, reason);
        return;
    }
    probe->running = true;
    probe->timed_out = false;
    uv_timer_start(&probe->timeout_timer, on_command_timeout, (uint64_t)probe->timeout_ms, 0);
}

static void on_interval(uv_timer_t *timer)
{
    probe__user_probe *probe = timer->data;
    if (probe->command != NULL) {
        run_command(probe);
        return;
    }
    char reason[256] = "user probe callback said unhealthy";
    int rc = probe->fn(probe->fn_user, reason, sizeof reason);
    reason[sizeof reason - 1] = '\0';
    report(probe, rc == 0, rc == 0 ? "" : reason);
}

static void schedule(probe__user_probe *probe)
{
    uv_timer_start(&probe->interval_timer, on_interval, (uint64_t)probe->interval_ms, 0);
}

int probe__user_probe_start(uv_loop_t *loop, const char *command, probe__user_fn fn, void *fn_user,
                            int interval_ms, int timeout_ms, probe__user_result_fn result,
                            void *user, probe__user_probe **out)
{
    if ((command == NULL) == (fn == NULL) || interval_ms <= 0 || timeout_ms <= 0 || result == NULL)
        return elastic__fail(ELASTIC_EINVAL,
                             "user probe: give a command or a callback, and positive intervals");
    if (command != NULL && (command[0] == '\0' || strlen(command) > 4096))
        return elastic__fail(ELASTIC_EINVAL,
                             "user probe: command is empty or longer than 4096 bytes");
    probe__user_probe *probe = calloc(1, sizeof *probe);
    if (probe == NULL) return elastic__fail(ELASTIC_ENOMEM, "user probe");
    *probe = (probe__user_probe){ .loop = loop,
                                  .fn = fn,
                                  .fn_user = fn_user,
                                  .interval_ms = interval_ms,
                                  .timeout_ms = timeout_ms,
                                  .result = result,
                                  .user = user,
                                  .open_handles = 2 };
    probe->command = elastic__strdup(command);
    if (command != NULL && probe->command == NULL) {
        free(probe);
        return elastic__fail(ELASTIC_ENOMEM, "user probe");
    }
    uv_timer_init(loop, &probe->interval_timer);
    uv_timer_init(loop, &probe->timeout_timer);
    probe->interval_timer.data = probe->timeout_timer.data = probe;
    schedule(probe);
    *out = probe;
    return 0;
}

void probe__user_probe_stop(probe__user_probe *probe)
{
    if (probe == NULL) return;
    probe->stopping = true;
    if (probe->running) uv_process_kill(&probe->process, SIGKILL); /* its exit callback closes it */
    uv_close((uv_handle_t *)&probe->interval_timer, release);
    uv_close((uv_handle_t *)&probe->timeout_timer, release);
}
