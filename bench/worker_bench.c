/*
 * Worker-side costs, each against its peer in the same run:
 *   worker_bench heartbeat        ns per elastic_worker_heartbeat (shared memory)
 *                                 vs. the clock read alone and a write() per beat
 *   worker_bench recovery ROUNDS  one of 4 workers killed: survivors back in their
 *                                 loop with in-process recovery vs. a full restart
 *                                 of all 4 processes (medians over ROUNDS each)
 *   worker_bench worker STEP_US   (internal) the trainer process the agent runs
 * The agent side is the probe monitor on a libuv loop, as elasticrun runs it.
 */
#include "common/clock.h"
#include "probe/probe.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define WORKERS 4
#define REPS    5

extern char **environ;

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *values, int n)
{
    qsort(values, (size_t)n, sizeof *values, compare_double);
    return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "worker_bench: %s: %s (%s)\n", what, elastic_err_name(rc),
            elastic_last_error());
    exit(1);
}

/* ---- heartbeat cost ------------------------------------------------------------ */

static double time_heartbeats(elastic_worker *w, long calls)
{
    uint64_t start = elastic__now_ns();
    for (long i = 1; i <= calls; i++) elastic_worker_heartbeat(w, (uint64_t)i);
    return (double)(elastic__now_ns() - start) / (double)calls;
}

static double time_polls(elastic_worker *w, long calls)
{
    uint64_t start = elastic__now_ns();
    int sum = 0;
    for (long i = 0; i < calls; i++) sum += elastic_worker_poll(w);
    if (sum != 0) die("poll", sum);
    return (double)(elastic__now_ns() - start) / (double)calls;
}

static double time_clock(long calls)
{
    uint64_t start = elastic__now_ns(), sink = 0;
    for (long i = 0; i < calls; i++) sink += elastic__now_ns();
    __asm__ volatile("" : : "r"(sink));
    return (double)(elastic__now_ns() - start) / (double)calls;
}

static double time_pipe_writes(long calls)
{
    int fds[2];
    if (pipe(fds) != 0) die("pipe", ELASTIC_ESYS);
    char drain[65536];
    uint64_t start = elastic__now_ns();
    for (long i = 0; i < calls; i++) {
        uint64_t step = (uint64_t)i;
        if (write(fds[1], &step, sizeof step) != sizeof step) die("write", ELASTIC_ESYS);
        if ((i & 1023) == 1023 && read(fds[0], drain, sizeof drain) < 0) die("read", ELASTIC_ESYS);
    }
    double ns = (double)(elastic__now_ns() - start) / (double)calls;
    close(fds[0]);
    close(fds[1]);
    return ns;
}

static void bench_heartbeat(const char *dir)
{
    char shm[4200], endpoint[64];
    snprintf(shm, sizeof shm, "%s/heartbeat", dir);
    channel__hb_region *region = NULL;
    elastic_store_server *server = NULL;
    int rc = channel__hb_create(shm, 1, &region);
    int port = 0;
    if (rc == 0) rc = elastic_store_server_start(NULL, &server);
    if (rc == 0) rc = elastic_store_server_get_port(server, &port);
    if (rc != 0) die("setup", rc);
    snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", port);
    setenv("RANK", "0", 1), setenv("WORLD_SIZE", "1", 1),
        setenv("ELASTIC_STORE_ENDPOINT", endpoint, 1);
    setenv("ELASTIC_STORE_PREFIX", "bench/", 1), setenv("ELASTIC_GENERATION", "1", 1);
    setenv("ELASTIC_HEARTBEAT_SHM", shm, 1), setenv("ELASTIC_HEARTBEAT_SLOT", "0", 1);
    elastic_worker *w = NULL;
    if ((rc = elastic_worker_init(NULL, &w)) != 0) die("elastic_worker_init", rc);
    double hb[REPS], poll_ns[REPS], clock_ns[REPS], pipe_ns[REPS];
    for (int r = 0; r < REPS; r++) {
        hb[r] = time_heartbeats(w, 20000000);
        poll_ns[r] = time_polls(w, 20000000);
        clock_ns[r] = time_clock(20000000);
        pipe_ns[r] = time_pipe_writes(1000000);
    }
    channel__hb_snapshot snap;
    channel__hb_read(region, 0, &snap);
    if (snap.step != 20000000) die("the slot did not see the beats", ELASTIC_ESTATE);
    printf("| operation (median of %d runs) | ns per call |\n|---|---:|\n", REPS);
    printf("| elastic_worker_heartbeat (shared-memory slot) | %.1f |\n", median(hb, REPS));
    printf("| elastic_worker_poll (group unchanged) | %.1f |\n", median(poll_ns, REPS));
    printf("| peer: clock_gettime(CLOCK_MONOTONIC) alone | %.1f |\n", median(clock_ns, REPS));
    printf("| peer: write() of 8 bytes to a pipe per beat | %.1f |\n", median(pipe_ns, REPS));
    elastic_worker_close(w);
    elastic_store_server_close(server);
    channel__hb_close(region, true);
}

/* ---- the trainer process ---------------------------------------------------- */

static int run_worker(int step_us)
{
    elastic_worker *w = NULL;
    int rc = elastic_worker_init(NULL, &w);
    if (rc != 0) die("worker init", rc);
    for (uint64_t step = 1;; step++) {
        elastic_worker_heartbeat(w, step);
        rc = elastic_worker_poll(w);
        if (rc == ELASTIC_ECLOSED) break;
        if (rc != 0 && rc != ELASTIC_ERECONFIGURE) die("worker poll", rc);
        usleep((useconds_t)step_us);
    }
    elastic_worker_close(w);
    return 0;
}

/* ---- the agent side: 4 workers under the probe monitor ------------------------- */

typedef struct agent {
    uv_loop_t loop;
    uv_timer_t wake;
    probe__monitor *monitor;
    char endpoint[64], self[4200];
    uint64_t generation;
    uv_process_t procs[WORKERS];
    bool running[WORKERS], handle_open[WORKERS];
    int pids[WORKERS];
    uint64_t hello_gen[WORKERS], ack_gen[WORKERS], ready_gen[WORKERS];
    uint64_t hello_ns[WORKERS], ready_ns[WORKERS]; /* the workers' clock when they sent it */
} agent;

static void on_failure(void *user, const probe__failure *f)
{
    (void)user;
    fprintf(stderr, "worker_bench: unexpected probe failure: %s\n", f->reason);
    exit(1);
}

static void on_control(void *user, int slot, int type, uint64_t generation, uint64_t sent_ns)
{
    agent *a = user;
    if (type == CHANNEL__MSG_HELLO) a->hello_gen[slot] = generation, a->hello_ns[slot] = sent_ns;
    if (type == CHANNEL__MSG_ABORT_ACK) a->ack_gen[slot] = generation;
    if (type == CHANNEL__MSG_READY) a->ready_gen[slot] = generation, a->ready_ns[slot] = sent_ns;
}

/* When the last of the workers (all but `skip`) was back, by their own clocks. */
static double ms_since(const uint64_t *sent_ns, int skip, uint64_t start_ns)
{
    uint64_t last = start_ns;
    for (int i = 0; i < WORKERS; i++)
        if (i != skip && sent_ns[i] > last) last = sent_ns[i];
    return (double)(last - start_ns) / 1e6;
}

static void on_closed(uv_handle_t *handle)
{
    agent *a = handle->data;
    a->handle_open[(uv_process_t *)handle - a->procs] = false;
}

static void on_exit_cb(uv_process_t *process, int64_t status, int term_signal)
{
    agent *a = process->data;
    int slot = (int)(process - a->procs);
    (void)status, (void)term_signal;
    a->running[slot] = false;
    probe__monitor_worker_exited(a->monitor, slot);
    uv_close((uv_handle_t *)process, on_closed);
}

static void fill_env(agent *a, int slot, channel__worker_env *env, char *prefix, size_t size)
{
    snprintf(prefix, size, "bench/gen/%llu/", (unsigned long long)a->generation);
    *env = (channel__worker_env){ .rank = slot,
                                  .local_rank = slot,
                                  .world_size = WORKERS,
                                  .local_world_size = WORKERS,
                                  .generation = a->generation,
                                  .run_id = "bench",
                                  .store_endpoint = a->endpoint,
                                  .store_prefix = prefix,
                                  .heartbeat_shm = probe__monitor_heartbeat_path(a->monitor),
                                  .heartbeat_slot = slot,
                                  .agent_socket = probe__monitor_socket_path(a->monitor) };
}

static void spawn(agent *a, int slot)
{
    while (a->handle_open[slot]) uv_run(&a->loop, UV_RUN_ONCE);
    char prefix[64];
    channel__worker_env env;
    fill_env(a, slot, &env, prefix, sizeof prefix);
    elastic__text text;
    elastic__text_init(&text, 8192);
    if (channel__worker_env_format(&env, &text) != 0) die("env", ELASTIC_EINVAL);
    size_t count = 0;
    while (environ[count] != NULL) count++;
    char **envp = calloc(count + 32, sizeof *envp);
    size_t n = 0;
    for (size_t i = 0; i < count; i++) envp[n++] = environ[i];
    for (char *line = text.data; *line != '\0';) {
        char *eol = strchr(line, '\n');
        *eol = '\0';
        envp[n++] = line;
        line = eol + 1;
    }
    char *argv[] = { a->self, "worker", "1000", NULL };
    uv_stdio_container_t stdio[3] = { { .flags = UV_IGNORE },
                                      { .flags = UV_INHERIT_FD, .data.fd = 2 },
                                      { .flags = UV_INHERIT_FD, .data.fd = 2 } };
    uv_process_options_t options = { .exit_cb = on_exit_cb,
                                     .file = a->self,
                                     .args = argv,
                                     .env = envp,
                                     .stdio_count = 3,
                                     .stdio = stdio };
    probe__monitor_worker_starting(a->monitor, slot);
    a->procs[slot].data = a;
    a->handle_open[slot] = true;
    int err = uv_spawn(&a->loop, &a->procs[slot], &options);
    free(envp);
    elastic__text_free(&text);
    if (err != 0) die(uv_strerror(err), ELASTIC_ESYS);
    a->running[slot] = true;
    a->pids[slot] = a->procs[slot].pid;
    probe__monitor_worker_started(a->monitor, slot, slot, a->pids[slot], -1);
}

typedef bool (*predicate)(agent *a, int arg);

static void run_until(agent *a, predicate pred, int arg, const char *what)
{
    uint64_t deadline = elastic__now_ms() + 60000;
    while (!pred(a, arg)) {
        if (elastic__now_ms() > deadline) die(what, ELASTIC_ETIMEDOUT);
        uv_run(&a->loop, UV_RUN_ONCE);
    }
}

static bool exited(agent *a, int slot)
{
    return !a->running[slot];
}
static bool all_exited(agent *a, int unused)
{
    (void)unused;
    for (int i = 0; i < WORKERS; i++)
        if (a->running[i]) return false;
    return true;
}
static bool all_hello(agent *a, int unused)
{
    (void)unused;
    for (int i = 0; i < WORKERS; i++)
        if (a->hello_gen[i] != a->generation) return false;
    return true;
}
static bool survivors_acked(agent *a, int victim)
{
    for (int i = 0; i < WORKERS; i++)
        if (i != victim && a->ack_gen[i] != a->generation) return false;
    return true;
}
static bool survivors_ready(agent *a, int victim)
{
    for (int i = 0; i < WORKERS; i++)
        if (i != victim && a->ready_gen[i] != a->generation) return false;
    return true;
}
static bool replacement_hello(agent *a, int victim)
{
    return a->hello_gen[victim] == a->generation;
}

static void next_generation(agent *a)
{
    a->generation++;
    probe__generation_info info = { .generation = a->generation,
                                    .world_size = WORKERS,
                                    .nodes = 1 };
    probe__monitor_generation_started(a->monitor, &info);
}

/* Kill one; abort the survivors, wait for their acks, reconfigure them and
 * restart only the dead one. Returns ms until the survivors are back. */
static double in_process_round(agent *a, int victim, double *replacement_ms)
{
    int survivor_pids[WORKERS];
    memcpy(survivor_pids, a->pids, sizeof survivor_pids);
    uint64_t start = elastic__now_ns(); /* the workers' timestamps use the same clock */
    kill(a->pids[victim], SIGKILL);
    run_until(a, exited, victim, "the victim's exit");
    probe__monitor_pause(a->monitor);
    for (int i = 0; i < WORKERS; i++)
        if (i != victim) probe__monitor_abort_worker(a->monitor, i, "bench: a worker was killed");
    run_until(a, survivors_acked, victim, "abort acknowledgements");
    next_generation(a);
    for (int i = 0; i < WORKERS; i++) {
        if (i == victim) continue;
        char prefix[64];
        channel__worker_env env;
        fill_env(a, i, &env, prefix, sizeof prefix);
        if (probe__monitor_reconfigure_worker(a->monitor, i, &env) != 0)
            die("reconfigure", ELASTIC_ECONNECT);
    }
    spawn(a, victim);
    run_until(a, survivors_ready, victim, "survivors back in their loop");
    double survivors_ms = ms_since(a->ready_ns, victim, start);
    run_until(a, replacement_hello, victim, "the replacement");
    *replacement_ms = (double)(a->hello_ns[victim] - start) / 1e6;
    for (int i = 0; i < WORKERS; i++)
        if (i != victim && a->pids[i] != survivor_pids[i])
            die("a survivor changed pid", ELASTIC_ESTATE);
    return survivors_ms;
}

/* Kill one; stop the others (SIGTERM, as torchrun does) and start all four again. */
static double full_restart_round(agent *a, int victim)
{
    uint64_t start = elastic__now_ns();
    kill(a->pids[victim], SIGKILL);
    run_until(a, exited, victim, "the victim's exit");
    probe__monitor_pause(a->monitor);
    for (int i = 0; i < WORKERS; i++)
        if (a->running[i]) uv_process_kill(&a->procs[i], SIGTERM);
    run_until(a, all_exited, 0, "the group to stop");
    next_generation(a);
    for (int i = 0; i < WORKERS; i++) spawn(a, i);
    run_until(a, all_hello, 0, "the restarted group");
    return ms_since(a->hello_ns, -1, start);
}

static void bench_recovery(const char *dir, const char *self, int rounds)
{
    static agent a;
    snprintf(a.self, sizeof a.self, "%s", self);
    elastic_store_server *server = NULL;
    int port = 0;
    int rc = elastic_store_server_start(NULL, &server);
    if (rc == 0) rc = elastic_store_server_get_port(server, &port);
    if (rc != 0) die("store", rc);
    snprintf(a.endpoint, sizeof a.endpoint, "127.0.0.1:%d", port);
    uv_loop_init(&a.loop);
    probe__monitor_opts opts;
    probe__monitor_opts_init(&opts);
    opts.loop = &a.loop;
    opts.run_dir = dir;
    opts.local_world_size = WORKERS;
    opts.on_failure = on_failure;
    opts.on_control = on_control;
    opts.user = &a;
    if ((rc = probe__monitor_start(&opts, &a.monitor)) != 0) die("monitor", rc);
    a.generation = 1;
    probe__generation_info info = { .generation = 1, .world_size = WORKERS, .nodes = 1 };
    probe__monitor_generation_started(a.monitor, &info);
    for (int i = 0; i < WORKERS; i++) spawn(&a, i);
    run_until(&a, all_hello, 0, "the first group");
    double in_process[64], replacement[64], full[64];
    if (rounds > 64) rounds = 64;
    for (int r = 0; r < rounds; r++) {
        in_process[r] = in_process_round(&a, r % WORKERS, &replacement[r]);
        full[r] = full_restart_round(&a, r % WORKERS);
    }
    double in_ms = median(in_process, rounds), repl_ms = median(replacement, rounds),
           full_ms = median(full, rounds);
    printf("\n| one of %d workers killed (median of %d rounds) | ms |\n|---|---:|\n", WORKERS,
           rounds);
    printf("| in-process: survivors back in their training loop | %.2f |\n", in_ms);
    printf("| in-process: replacement process attached | %.2f |\n", repl_ms);
    printf("| peer: full restart of all %d processes, all attached | %.2f |\n", WORKERS, full_ms);
    printf("| full restart / in-process | %.1fx |\n", full_ms / in_ms);
    for (int i = 0; i < WORKERS; i++) probe__monitor_stop_worker(a.monitor, i);
    run_until(&a, all_exited, 0, "the workers to stop");
    probe__monitor_stop(a.monitor);
    uv_run(&a.loop, UV_RUN_DEFAULT);
    uv_loop_close(&a.loop);
    elastic_store_server_close(server);
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (argc == 3 && strcmp(argv[1], "worker") == 0) return run_worker(atoi(argv[2]));
    char dir[] = "/tmp/elastic-bench-XXXXXX";
    if (mkdtemp(dir) == NULL) die("mkdtemp", ELASTIC_ESYS);
    if (argc == 2 && strcmp(argv[1], "heartbeat") == 0)
        bench_heartbeat(dir);
    else if (argc == 3 && strcmp(argv[1], "recovery") == 0)
        bench_recovery(dir, argv[0], atoi(argv[2]));
    else {
        fprintf(stderr, "usage: worker_bench heartbeat | recovery ROUNDS\n");
        rmdir(dir);
        return 64;
    }
    rmdir(dir);
    return 0;
}
