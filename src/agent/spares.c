/*
 * Warm spares (--warm-spares=N, with --in-process-recovery): N extra
 * trainer processes per node that run the trainer's start-up and park in
 * elastic_worker_park() until a local rank fails. A spare is started with
 * ELASTIC_SPARE=<its control slot> and no rank variables; it parks by saying
 * HELLO in that slot (past the workers' slots). When the next generation
 * forms, agent__workers_start fills a dead worker's slot with a parked
 * spare: the spare gets PROMOTE with that rank's environment, and its
 * process, pid watch and output streams become the worker's (the record
 * stays, owning the streams, until the worker is reaped and they closed).
 *
 * What can go wrong, and what it means:
 *  - a parked spare exits: replaced, `spare_exited` and a console line; not
 *    a failure of the job and no restart budget;
 *  - a spare exits before it parked, or does not park within the startup
 *    timeout: the trainer does not call park (it would otherwise attach as
 *    someone else or train alone): spares are off for this node
 *    (`spares_disabled`, a console line) and recovery cold-starts, as it
 *    would without the flag;
 *  - a rank fails before any spare parked (the first seconds of a job, or
 *    right after a promotion): the dead slot waits for a spare that is
 *    still starting, since it is ahead of a cold start in the same start-up
 *    (agent__spares_await; the machine decides, SPARE_PARKED ends the wait:
 *    it parked and is promoted, or it exited or timed out and the slot
 *    cold-starts);
 *  - more failures than parked (or awaited) spares: the rest are cold-started.
 * Replacements start once the recovery they stand in for is over (every
 * kept worker READY), so on a small node a new spare's imports do not
 * compete with the recovery for CPU.
 */
#include "agent/spares.h"
#include "agent/memory.h"

#include "agent/console.h"
#include "agent/journal_events.h"
#include "agent/probes.h"
#include "agent/proc.h"
#include "agent/reaper.h"
#include "agent/worker_env.h"
#include "agent/workers.h"

#include "common/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* The node's spares; only this file reads or writes it. */
struct agent_spares {
    agent_spare *list; /* every record not yet freed */
    bool disabled;     /* the trainer does not park: no more spares on this node */
    bool closing;      /* the group is closing: nothing is restarted */
    bool awaited;      /* a worker slot waits for a starting spare: tell the machine once */
    uint64_t awaited_generation; /* the generation whose slots wait */
    uv_timer_t timer;  /* a spare that has not parked in time is stopped */
};

#define SPARE_CHECK_MS 1000 /* how often spares are looked at (parking deadline, refills) */
/* A replacement waits this long for the recovery it follows to report its
 * end (recovery_phases) before it starts anyway. */
#define SPARE_REFILL_HOLD_MS 5000

static int spare_startup_timeout_ms(const agent_group *group)
{
    int ms = group->job.opts->startup_timeout_ms;
    return ms > 0 ? ms : 600000; /* the probes' default for a worker's first beat */
}

static agent_ev_spare spare_event(const agent_group *group, const agent_spare *spare)
{
    return (agent_ev_spare){ .generation = group->current.generation,
                             .spare = (int)spare->index,
                             .pid = spare->pid,
                             .startup_ms = (int64_t)(spare->parked_ms - spare->started_ms),
                             .exit_code = spare->exit_code,
                             .signal = spare->term_signal };
}

static void maybe_free(agent_spare *spare)
{
    if (spare->state != AGENT_SPARE_GONE || spare->out.open || spare->err.open) return;
    agent_group *group = spare->group;
    for (agent_spare **at = &group->spares->list; *at != NULL; at = &(*at)->next)
        if (*at == spare) {
            *at = spare->next;
            break;
        }
    free(spare);
}

static void on_stream_closed(void *owner)
{
    agent_spare *spare = owner;
    agent_group *group = spare->group;
    if (spare->streams_counted && !group->spares->closing)
        agent__group_post(group, &(agent_group_event){ .kind = AGENT_GROUP_STREAM_CLOSED });
    maybe_free(spare);
}

/* The last non-empty line of a stream's tail ("" when none), at most cap-1 bytes. */
static void last_line(const agent_stream *stream, char *out, size_t cap)
{
    char tail[AGENT_TAIL_BYTES];
    size_t len = agent__stream_tail(stream, tail, sizeof tail);
    while (len > 0 && (tail[len - 1] == '\n' || tail[len - 1] == '\r' || tail[len - 1] == ' '))
        len--;
    size_t start = len;
    while (start > 0 && tail[start - 1] != '\n') start--;
    snprintf(out, cap, "%.*s", (int)(len - start), tail + start);
}

static void setup_stream(agent_group *group, agent_spare *spare, int dir_fd, agent_stream *stream,
                         int bit, int console_fd, int *parked_console)
{
    int tee_mask = 0, redirect_mask = 0;
    agent__std_parse(group->job.opts->tee, 0, &tee_mask);
    agent__std_parse(group->job.opts->redirects, 0, &redirect_mask);
    memset(stream, 0, sizeof *stream);
    stream->file_fd = -1;
    stream->console_fd = console_fd;
    stream->owner = spare;
    stream->on_closed = on_stream_closed;
    stream->keep_tail = bit == AGENT_STD_ERR;
    if (tee_mask & bit)
        snprintf(stream->prefix, sizeof stream->prefix, "[spare%u]:", spare->index);
    else if (redirect_mask & bit)
        stream->console_fd = -1;
    if ((group->job.write_logs || ((redirect_mask | tee_mask) & bit)) && dir_fd >= 0) {
        const char *name = bit == AGENT_STD_OUT ? "stdout.log" : "stderr.log";
        stream->file_fd = agent__file_private(dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC);
        if (stream->file_fd < 0)
            ELASTIC_LOG_W("agent", "log file %s/%s: %s", spare->dir, name, elastic_last_error());
    }
    *parked_console = stream->console_fd; /* given back when it parks */
    stream->console_fd = -1;
}

/* spare_<n> under the log root: n counts every spare this agent started. */
static int prepare(agent_group *group, agent_spare *spare, unsigned serial)
{
    char name[32];
    snprintf(name, sizeof name, "spare_%u", serial);
    snprintf(spare->dir, sizeof spare->dir, "%s/%s", group->job.log_root, name);
    snprintf(spare->error_file, sizeof spare->error_file, "%s/error.json", spare->dir);
    int dir_fd = -1;
    int rc = agent__dir_private(group->job.log_root_fd, name, &dir_fd);
    if (rc != 0) return rc;
    unlinkat(dir_fd, "error.json", 0);
    setup_stream(group, spare, dir_fd, &spare->out, AGENT_STD_OUT, STDOUT_FILENO,
                 &spare->out_console);
    setup_stream(group, spare, dir_fd, &spare->err, AGENT_STD_ERR, STDERR_FILENO,
                 &spare->err_console);
    close(dir_fd);
    return 0;
}

static int spawn(agent_group *group, agent_spare *spare)
{
    agent_worker_env spec = { .opts = group->job.opts,
                              .generation = &group->current,
                              .run_id = group->job.run_id,
                              .store_token_file = group->store.token_file,
                              .error_file = spare->error_file,
                              .agent_socket = probe__monitor_socket_path(group->monitor),
                              /* the node's tier; the rank's restore plan has no slot in
                               * the promotion (the worker then looks in its own tier) */
                              .memory_dir = agent__memory_dir(group),
                              .spare = true,
                              .spare_slot = group->job.opts->nproc_per_node + (int)spare->index };
    char **envp = NULL, **argv = NULL;
    char path[4096];
    int rc = agent__env_build(&spec, &envp);
    if (rc == 0) rc = agent__command_build(group->job.opts, 0, &argv);
    if (rc == 0) rc = agent__resolve_program(argv[0], path, sizeof path);
    int out_fd = -1, err_fd = -1;
    if (rc == 0) {
        agent_spawn how = { .path = path,
                            .argv = (const char *const *)argv,
                            .envp = (const char *const *)envp };
        rc = agent__proc_spawn(&how, &spare->pid, &out_fd, &err_fd);
    }
    agent__strv_free(envp);
    agent__strv_free(argv);
    if (rc != 0) return rc;
    agent__reaper_track(group, 0, spare->pid);
    spare->running = true;
    spare->started_ms = elastic__now_ms();
    /* exit_watch_start takes a worker; a spare borrows one's fields for it */
    agent_worker probe = { .pid = spare->pid };
    agent__exit_watch_start(group, &probe);
    spare->exit_watch = probe.exit_watch;
    if (agent__stream_open(group->loop, &spare->out, out_fd) != 0 ||
        agent__stream_open(group->loop, &spare->err, err_fd) != 0)
        ELASTIC_LOG_W("agent", "spare %u: output not relayed: %s", spare->index,
                      elastic_last_error());
    return 0;
}

static bool index_busy(const agent_group *group, unsigned index)
{
    for (const agent_spare *s = group->spares->list; s != NULL; s = s->next)
        if (s->index == index &&
            (s->state == AGENT_SPARE_STARTING || s->state == AGENT_SPARE_PARKED))
            return true;
    return false;
}

static void on_spare_check(uv_timer_t *timer);

/* Alive, not parked yet, and within its startup timeout. */
static bool starting(const agent_group *group, const agent_spare *spare, uint64_t now)
{
    return spare->running && spare->state == AGENT_SPARE_STARTING &&
           now - spare->started_ms < (uint64_t)spare_startup_timeout_ms(group);
}

void agent__spares_count(const agent_group *group, int *parked, int *starting_now)
{
    *parked = *starting_now = 0;
    if (group->spares == NULL || group->spares->disabled || group->spares->closing) return;
    uint64_t now = elastic__now_ms();
    for (const agent_spare *s = group->spares->list; s != NULL; s = s->next) {
        if (s->running && s->state == AGENT_SPARE_PARKED) ++*parked;
        if (starting(group, s, now)) ++*starting_now;
    }
}

/* The awaited spare parked, exited or timed out: the machine starts the
 * waiting slots (SPARE_PARKED). Once per wait. */
static void wait_over(agent_group *group)
{
    if (!group->spares->awaited) return;
    group->spares->awaited = false;
    agent__group_tell(group, AGENT_IN_SPARE_PARKED);
}

int agent__spares_await(agent_group *group, const agent_worker *worker)
{
    const agent_spare *oldest = NULL;
    int count = 0;
    uint64_t now = elastic__now_ms();
    for (const agent_spare *s = group->spares->list; s != NULL; s = s->next)
        if (starting(group, s, now)) {
            count++;
            if (oldest == NULL || s->started_ms < oldest->started_ms) oldest = s;
        }
    if (oldest == NULL) return 0;
    if (group->spares->awaited && group->spares->awaited_generation == group->current.generation)
        return count; /* said for the first slot */
    group->spares->awaited = true; /* an older generation's wait ended with its stop */
    group->spares->awaited_generation = group->current.generation;
    agent_ev_spare ev = spare_event(group, oldest);
    ev.rank = worker->rank;
    ev.startup_ms = (int64_t)(now - oldest->started_ms);
    ev.wait_ms = spare_startup_timeout_ms(group) - ev.startup_ms;
    agent__ev_spare_awaited(group->job.events, &ev);
    agent__console(group,
                   "rank %d: waiting for the warm spare (pid %d) to park (started %.1f s ago; "
                   "at most %.0f s more, then a cold start)",
                   worker->rank, (int)oldest->pid, (double)ev.startup_ms / 1000.0,
                   (double)ev.wait_ms / 1000.0);
    return count;
}

void agent__spares_fill(agent_group *group)
{
    static unsigned serial; /* names the log directories; the loop thread only */
    int wanted = group->job.opts->warm_spares;
    if (wanted <= 0 || group->spares->disabled || group->spares->closing ||
        group->monitor == NULL || !agent__group_is_running(group))
        return;
    if (!uv_is_active((uv_handle_t *)&group->spares->timer))
        uv_timer_start(&group->spares->timer, on_spare_check, SPARE_CHECK_MS, SPARE_CHECK_MS);
    uint64_t failure_ms;
    if (agent__phases_recovering(group, &failure_ms) &&
        elastic__now_ms() - failure_ms < SPARE_REFILL_HOLD_MS)
        return; /* the timer tries again */
    for (unsigned index = 0; index < (unsigned)wanted; index++) {
        if (index_busy(group, index)) continue;
        agent_spare *spare = calloc(1, sizeof *spare);
        if (spare == NULL) {
            ELASTIC_LOG_E("agent", "out of memory starting a warm spare");
            return;
        }
        spare->group = group;
        spare->index = index;
        spare->state = AGENT_SPARE_STARTING;
        int rc = prepare(group, spare, serial++);
        if (rc == 0) rc = spawn(group, spare);
        if (rc != 0) {
            ELASTIC_LOG_W("agent", "warm spare %u not started: %s", index, elastic_last_error());
            free(spare);
            return; /* tried again when the next one is needed */
        }
        spare->next = group->spares->list;
        group->spares->list = spare;
        {
            agent_ev_spare ev = spare_event(group, spare);
            agent__ev_spare_started(group->job.events, &ev);
        }
    }
}

static void disable(agent_group *group, const agent_spare *spare, const char *why)
{
    if (group->spares->disabled) return;
    group->spares->disabled = true;
    agent_ev_spare ev = spare_event(group, spare);
    ev.reason = why;
    agent__ev_spares_disabled(group->job.events, &ev);
    agent__console(group, "warm spares off: spare (pid %d) %s; failed ranks are started afresh",
                   (int)spare->pid, why);
    /* the others are the same trainer: they will not park either */
    for (agent_spare *s = group->spares->list; s != NULL; s = s->next)
        if (s->running && s->state == AGENT_SPARE_STARTING)
            agent__proc_signal_group(s->pid, SIGKILL);
}

/* The startup timeout, for spares: one that has not parked by then never will. */
static void on_spare_check(uv_timer_t *timer)
{
    agent_group *group = timer->data;
    uint64_t now = elastic__now_ms();
    for (agent_spare *s = group->spares->list; s != NULL; s = s->next) {
        if (!s->running || s->state != AGENT_SPARE_STARTING) continue;
        if (now - s->started_ms >= (uint64_t)spare_startup_timeout_ms(group)) {
            char why[96];
            snprintf(why, sizeof why, "did not park within %d s (the trainer never calls park)",
                     spare_startup_timeout_ms(group) / 1000);
            disable(group, s, why);
            agent__proc_signal_group(s->pid, SIGKILL);
        }
    }
    if (group->spares->disabled) {
        uv_timer_stop(timer);
        return;
    }
    agent__spares_fill(group);
}

void agent__spares_on_control(agent_group *group, unsigned index, int type)
{
    if (type != CHANNEL__MSG_HELLO) return; /* a disconnect: its exit is what counts */
    for (agent_spare *s = group->spares->list; s != NULL; s = s->next) {
        if (s->index != index || !s->running || s->state != AGENT_SPARE_STARTING) continue;
        s->state = AGENT_SPARE_PARKED;
        s->parked_ms = elastic__now_ms();
        s->out.console_fd = s->out_console; /* it runs the trainer's code knowingly now */
        s->err.console_fd = s->err_console;
        {
            agent_ev_spare ev = spare_event(group, s);
            agent__ev_spare_parked(group->job.events, &ev);
        }
        wait_over(group);
        return;
    }
}

bool agent__spares_promote(agent_group *group, agent_worker *worker)
{
    agent_spare *spare = NULL;
    for (agent_spare *s = group->spares->list; s != NULL && spare == NULL; s = s->next)
        if (s->running && s->state == AGENT_SPARE_PARKED &&
            probe__monitor_spare_parked(group->monitor, s->index))
            spare = s;
    if (spare == NULL) return false;
    char prefix[400];
    channel__worker_env env;
    agent__inprocess_channel_env(group, worker, prefix, sizeof prefix, &env);
    agent__probes_worker_starting(group, worker); /* its heartbeat slot zeroed before it attaches */
    if (probe__monitor_spare_send(group->monitor, spare->index, &env,
                                  group->current.group_world_size) != 0) {
        ELASTIC_LOG_W("agent", "spare %u not promoted (%s): stopping it", spare->index,
                      elastic_last_error());
        agent__proc_signal_group(spare->pid, SIGKILL);
        return false;
    }
    /* The process, its exit watch and its output are the worker's now. */
    spare->state = AGENT_SPARE_PROMOTED;
    spare->running = false;
    spare->streams_counted = true;
    worker->spare = spare;
    worker->pid = spare->pid;
    worker->exit_watch = spare->exit_watch;
    spare->exit_watch = NULL;
    snprintf(worker->dir, sizeof worker->dir, "%s", spare->dir);
    snprintf(worker->error_file, sizeof worker->error_file, "%s", spare->error_file);
    worker->running = true;
    worker->started_ms = elastic__now_ms();
    agent__oom_mark(worker->pid, &worker->oom); /* alive: its cgroup's OOM count from now */
    worker->oom_killed = false;
    agent__group_tell(group, AGENT_IN_WORKER_STARTED);
    probe__monitor_worker_started(group->monitor, worker->local_rank, worker->rank, worker->pid,
                                  spare->err.file_fd);
    agent__ev_spare_promoted(group->job.events,
                             &(agent_ev_spare_promoted){
                                 .worker = agent__ev_worker_of(group, worker),
                                 .spare = (int)spare->index,
                                 .parked_ms = (int64_t)(worker->started_ms - spare->parked_ms) });
    ELASTIC_LOG_I("agent", "warm spare %u (pid %d) promoted to rank %d", spare->index,
                  (int)spare->pid, worker->rank);
    return true;
}

void agent__spares_worker_reaped(agent_group *group, agent_worker *worker)
{
    (void)group;
    agent_spare *spare = worker->spare;
    if (spare == NULL) return;
    worker->spare = NULL;
    spare->state = AGENT_SPARE_GONE;
    maybe_free(spare);
}

void agent__spares_reap(agent_group *group)
{
    bool starting_gone = false;
    for (agent_spare *s = group->spares->list, *next; s != NULL; s = next) {
        next = s->next;
        if (!s->running) continue;
        int status;
        pid_t got;
        do got = waitpid(s->pid, &status, WNOHANG);
        while (got < 0 && errno == EINTR);
        if (got == 0 || (got < 0 && errno != ECHILD)) continue;
        if (got < 0) status = 0xff00;
        agent_worker probe = { .exit_watch = s->exit_watch };
        agent__exit_watch_stop(&probe);
        s->exit_watch = NULL;
        s->running = false;
        s->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        s->term_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        agent_spare_state was = s->state;
        s->state = AGENT_SPARE_GONE;
        starting_gone |= was == AGENT_SPARE_STARTING;
        agent__stream_finish(&s->out);
        agent__stream_finish(&s->err);
        if (!group->spares->closing) {
            {
            agent_ev_spare ev = spare_event(group, s);
            agent__ev_spare_exited(group->job.events, &ev);
        }
            char how[96];
            agent__describe_exit(s->exit_code, s->term_signal, how, sizeof how);
            if (s->stopped) {
                /* told to stop: the job ended here */
            } else if (was == AGENT_SPARE_PARKED) {
                agent__console(group, "warm spare (pid %d) %s while parked: replacing it",
                               (int)s->pid, how);
            } else if (!group->spares->disabled) {
                char why[512], last[256];
                last_line(&s->err, last, sizeof last);
                snprintf(why, sizeof why, "%s before it parked (does the trainer call park?)%s%s",
                         how, last[0] != '\0' ? "; its last line: " : "", last);
                disable(group, s, why);
            }
        }
        maybe_free(s); /* may free s: next was read first */
    }
    /* a spare a slot waited for will not park (said once above, by disable) */
    if (starting_gone && !group->spares->closing) wait_over(group);
    agent__spares_fill(group);
}

bool agent__spares_own_watch(const agent_group *group, const agent_exit_watch *watch)
{
    for (const agent_spare *s = group->spares->list; s != NULL; s = s->next)
        if (s->exit_watch == watch) return true;
    return false;
}

void agent__spares_stop(agent_group *group)
{
    uv_timer_stop(&group->spares->timer);
    group->spares->disabled = true; /* none is started again */
    for (agent_spare *s = group->spares->list; s != NULL; s = s->next) {
        if (!s->running) continue;
        s->stopped = true;
        if (s->state != AGENT_SPARE_PARKED ||
            probe__monitor_spare_send(group->monitor, s->index, NULL, 0) != 0)
            agent__proc_signal_group(s->pid, SIGTERM);
    }
}

int agent__spares_init(agent_group *group)
{
    group->spares = calloc(1, sizeof *group->spares);
    if (group->spares == NULL) return elastic__fail(ELASTIC_ENOMEM, "out of memory (spares)");
    int rc = uv_timer_init(group->loop, &group->spares->timer);
    group->spares->timer.data = group;
    return rc == 0 ? 0 : elastic__fail(ELASTIC_ESYS, "spare timer: %s", uv_strerror(rc));
}

void agent__spares_close(agent_group *group)
{
    group->spares->closing = true;
    uv_close((uv_handle_t *)&group->spares->timer, NULL);
    for (agent_spare *s = group->spares->list, *next; s != NULL; s = next) {
        next = s->next;
        if (s->running) {
            agent__proc_signal_group(s->pid, SIGKILL);
            agent_worker probe = { .exit_watch = s->exit_watch };
            agent__exit_watch_stop(&probe);
            s->exit_watch = NULL;
            s->running = false;
        }
        if (s->state != AGENT_SPARE_PROMOTED) {
            s->state = AGENT_SPARE_GONE;
            agent__stream_finish(&s->out);
            agent__stream_finish(&s->err);
            maybe_free(s);
        }
    }
}

void agent__spares_destroy(agent_group *group)
{
    if (group->spares == NULL) return;
    while (group->spares->list != NULL) {
        agent_spare *next = group->spares->list->next;
        free(group->spares->list);
        group->spares->list = next;
    }
    free(group->spares);
    group->spares = NULL;
}
