/* The stand-in agent behind the probe integration tests (see the header). */
#include "support/probe_harness.h"

#include <fcntl.h>
#include <signal.h>

extern char **environ;

static void on_failure(void *user, const probe__failure *f)
{
    harness *h = user;
    if (h->failure_count < 8) h->failures[h->failure_count++] = *f;
}

static void on_straggler(void *user, const probe__failure *f)
{
    harness *h = user;
    if (h->straggler_count < 4) h->stragglers[h->straggler_count++] = *f;
}

static void on_control(void *user, int slot, int type, uint64_t generation, uint64_t sent_ns)
{
    (void)sent_ns;
    harness *h = user;
    if (slot < 0 || slot >= HARNESS_MAX_WORKERS) return;
    if (type == CHANNEL__MSG_HELLO) h->hellos[slot]++;
    if (type == CHANNEL__MSG_ABORT_ACK) h->abort_acks[slot]++;
    if (type == CHANNEL__MSG_READY) {
        h->readies[slot]++;
        h->ready_generation[slot] = generation;
    }
}

static void on_tick(uv_timer_t *timer)
{
    (void)timer;
}

void harness_init(harness *h, unsigned workers)
{
    memset(h, 0, sizeof *h);
    ASSERT_EQ(uv_loop_init(&h->loop), 0);
    uv_timer_init(&h->loop, &h->tick);
    uv_timer_start(&h->tick, on_tick, 10, 10); /* run_until re-checks its predicate this often */
    probe__monitor_opts_init(&h->opts);
    h->opts.loop = &h->loop;
    h->opts.run_dir = test_tmpdir();
    h->opts.local_world_size = workers;
    h->opts.run_id = "probe-test";
    h->opts.node_id = "node-0";
    h->opts.on_failure = on_failure;
    h->opts.on_straggler = on_straggler;
    h->opts.on_control = on_control;
    h->opts.user = h;
    h->generation = 1;
    h->world_size = (int)workers;
    for (int i = 0; i < HARNESS_MAX_WORKERS; i++) h->log_fds[i] = -1;
    ASSERT_OK(elastic_store_server_start(NULL, &h->server));
    snprintf(h->endpoint, sizeof h->endpoint, "127.0.0.1:%d", test_server_port(h->server));
}

void harness_start(harness *h)
{
    ASSERT_OK(probe__monitor_start(&h->opts, &h->monitor));
    probe__generation_info info = { .generation = h->generation,
                                    .world_size = h->world_size,
                                    .nodes = 1 };
    probe__monitor_generation_started(h->monitor, &info);
}

static void on_process_closed(uv_handle_t *handle)
{
    harness *h = handle->data;
    h->handle_open[(uv_process_t *)handle - h->procs] = false;
}

static void on_exit_cb(uv_process_t *process, int64_t status, int term_signal)
{
    harness *h = process->data;
    int slot = (int)(process - h->procs);
    h->running[slot] = false;
    h->exit_status[slot] = term_signal != 0 ? -term_signal : status;
    probe__monitor_worker_exited(h->monitor, slot);
    uv_close((uv_handle_t *)process, on_process_closed);
}

/* The parent's environment plus the worker's variables. */
static char **worker_environment(harness *h, int local_rank, int rank, elastic__text *text)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "gen/%llu/", (unsigned long long)h->generation);
    channel__worker_env env = { .rank = rank,
                                .local_rank = local_rank,
                                .world_size = h->world_size,
                                .local_world_size = (int)h->opts.local_world_size,
                                .generation = h->generation,
                                .run_id = "probe-test",
                                .store_endpoint = h->endpoint,
                                .store_prefix = prefix,
                                .heartbeat_shm = probe__monitor_heartbeat_path(h->monitor),
                                .heartbeat_slot = local_rank,
                                .agent_socket = probe__monitor_socket_path(h->monitor) };
    ASSERT_OK(channel__worker_env_format(&env, text));
    size_t count = 0;
    while (environ[count] != NULL) count++;
    char **out = calloc(count + 64, sizeof *out);
    size_t n = 0;
    for (size_t i = 0; i < count; i++) out[n++] = environ[i];
    for (char *line = text->data; line != NULL && *line != '\0';) {
        char *eol = strchr(line, '\n');
        *eol = '\0';
        out[n++] = line;
        line = eol + 1;
    }
    return out;
}

void harness_spawn(harness *h, int local_rank, int rank, const char *const *args)
{
    char log_path[4200];
    snprintf(log_path, sizeof log_path, "%s/worker%d.log", test_tmpdir(), local_rank);
    if (h->log_fds[local_rank] < 0)
        h->log_fds[local_rank] = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    elastic__text text;
    elastic__text_init(&text, 8192);
    char **env = worker_environment(h, local_rank, rank, &text);
    char *argv[8] = { (char *)(h->program != NULL ? h->program
                                                  : test_helper_path("probe_worker")) };
    for (int i = 0; args[i] != NULL && i < 6; i++) argv[i + 1] = (char *)args[i];
    uv_stdio_container_t stdio[3] = { { .flags = UV_IGNORE },
                                      { .flags = UV_INHERIT_FD, .data.fd = h->log_fds[local_rank] },
                                      { .flags = UV_INHERIT_FD,
                                        .data.fd = h->log_fds[local_rank] } };
    uv_process_options_t options = { .exit_cb = on_exit_cb,
                                     .file = argv[0],
                                     .args = argv,
                                     .env = env,
                                     .stdio_count = 3,
                                     .stdio = stdio };
    while (h->handle_open[local_rank])
        uv_run(&h->loop, UV_RUN_ONCE); /* the previous process's handle */
    probe__monitor_worker_starting(h->monitor, local_rank);
    h->procs[local_rank].data = h;
    h->handle_open[local_rank] = true;
    int err = uv_spawn(&h->loop, &h->procs[local_rank], &options);
    free(env);
    elastic__text_free(&text);
    if (err != 0) FAIL("spawn %s: %s", argv[0], uv_strerror(err));
    h->running[local_rank] = true;
    h->pids[local_rank] = h->procs[local_rank].pid;
    probe__monitor_worker_started(h->monitor, local_rank, rank, h->pids[local_rank],
                                  h->log_fds[local_rank]);
}

void harness_kill(harness *h, int local_rank)
{
    if (h->running[local_rank]) uv_process_kill(&h->procs[local_rank], SIGKILL);
}

void harness_run_until(harness *h, bool (*pred)(harness *), int timeout_ms, const char *what)
{
    uint64_t deadline = uv_now(&h->loop) + (uint64_t)test_scaled_ms(timeout_ms);
    while (!pred(h)) {
        uv_update_time(&h->loop);
        if (uv_now(&h->loop) > deadline) {
            for (int i = 0; i < (int)h->opts.local_world_size; i++)
                fprintf(stderr, "--- worker %d log:\n%s\n", i, harness_log(h, i));
            FAIL("timed out waiting for %s", what);
        }
        uv_run(&h->loop, UV_RUN_ONCE);
    }
}

void harness_new_generation(harness *h, int world_size)
{
    h->generation++;
    h->world_size = world_size;
    probe__generation_info info = { .generation = h->generation,
                                    .world_size = world_size,
                                    .nodes = 1,
                                    .restart_count = (int)h->generation - 1 };
    probe__monitor_generation_started(h->monitor, &info);
}

const char *harness_log(harness *h, int local_rank)
{
    static char text[1 << 16];
    char path[4200];
    snprintf(path, sizeof path, "%s/worker%d.log", test_tmpdir(), local_rank);
    text[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f == NULL) return text;
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

static bool all_exited(harness *h)
{
    for (int i = 0; i < HARNESS_MAX_WORKERS; i++)
        if (h->running[i]) return false;
    return true;
}

void harness_stop(harness *h)
{
    for (int i = 0; i < HARNESS_MAX_WORKERS; i++) harness_kill(h, i);
    harness_run_until(h, all_exited, 10000, "workers to exit");
    probe__monitor_stop(h->monitor);
    uv_close((uv_handle_t *)&h->tick, NULL);
    uv_run(&h->loop, UV_RUN_DEFAULT);
    ASSERT_EQ(uv_loop_close(&h->loop), 0);
    for (int i = 0; i < HARNESS_MAX_WORKERS; i++)
        if (h->log_fds[i] >= 0) close(h->log_fds[i]);
    elastic_store_server_close(h->server);
}
