/*
 * One generation's local workers: their directories and log files, their
 * environment and command, starting them, reaping them once exited and
 * signalling their process groups.
 */
#include "agent/journal_events.h"
#include "agent/workers.h"
#include "channel/channel.h"

#include "agent/memory.h"
#include "agent/prestart.h"
#include "agent/probes.h"
#include "agent/proc.h"
#include "agent/reaper.h"
#include "agent/spares.h"
#include "agent/worker_env.h"

#include "common/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* gen_<G>/rank_<R> under the log root, private and reached without
 * following links; *dir_fd is the rank's directory. */
static int make_worker_dir(const agent_group *group, const agent_worker *worker, int *dir_fd)
{
    char gen_name[32], rank_name[32];
    snprintf(gen_name, sizeof gen_name, "gen_%llu", (unsigned long long)group->current.generation);
    snprintf(rank_name, sizeof rank_name, "rank_%d", worker->rank);
    int gen_fd = -1;
    int rc = agent__dir_private(group->job.log_root_fd, gen_name, &gen_fd);
    if (rc == 0) rc = agent__dir_private(gen_fd, rank_name, dir_fd);
    if (gen_fd >= 0) close(gen_fd);
    if (rc != 0) {
        char detail[300];
        snprintf(detail, sizeof detail, "%s", elastic_last_error());
        return elastic__fail(rc, "log directory %s: %s", worker->dir, detail);
    }
    return 0;
}

static int open_log(const agent_worker *worker, int dir_fd, const char *name)
{
    int fd = agent__file_private(dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC);
    if (fd < 0)
        ELASTIC_LOG_W("agent", "log file %s/%s: %s", worker->dir, name, elastic_last_error());
    return fd;
}

static void on_stream_closed(void *owner)
{
    agent__group_post(owner, &(agent_group_event){ .kind = AGENT_GROUP_STREAM_CLOSED });
}

/* Where a stream goes: redirected = file only; tee'd = file and console with
 * a "[<role><rank>]:" prefix; neither = console as is (and the file with --log-dir). */
static void setup_stream(agent_group *group, agent_worker *worker, int dir_fd, agent_stream *stream,
                         int bit, int console_fd)
{
    int redirect_mask = 0, tee_mask = 0;
    agent__std_parse(group->job.opts->redirects, worker->local_rank, &redirect_mask);
    agent__std_parse(group->job.opts->tee, worker->local_rank, &tee_mask);
    memset(stream, 0, sizeof *stream);
    stream->file_fd = -1;
    stream->console_fd = console_fd;
    stream->owner = group;
    stream->on_closed = on_stream_closed;
    stream->keep_tail = bit == AGENT_STD_ERR;
    /* torchrun's prefix: the role and the global rank, "[default0]:" */
    if (tee_mask & bit)
        snprintf(stream->prefix, sizeof stream->prefix, "[%.*s%d]:", 40, group->job.opts->role,
                 worker->rank);
    else if (redirect_mask & bit)
        stream->console_fd = -1;
    if (group->job.write_logs || ((redirect_mask | tee_mask) & bit))
        stream->file_fd =
            open_log(worker, dir_fd, bit == AGENT_STD_OUT ? "stdout.log" : "stderr.log");
}

static int prepare_worker(agent_group *group, agent_worker *worker, int local_rank)
{
    memset(worker, 0, sizeof *worker);
    worker->local_rank = local_rank;
    worker->rank = group->current.rank_base + local_rank;
    snprintf(worker->dir, sizeof worker->dir, "%s/gen_%llu/rank_%d", group->job.log_root,
             (unsigned long long)group->current.generation, worker->rank);
    snprintf(worker->error_file, sizeof worker->error_file, "%s/error.json", worker->dir);
    int dir_fd = -1;
    int rc = make_worker_dir(group, worker, &dir_fd);
    if (rc != 0) return rc;
    unlinkat(dir_fd, "error.json", 0); /* a stale file must not be taken for this run's error */
    setup_stream(group, worker, dir_fd, &worker->out, AGENT_STD_OUT, STDOUT_FILENO);
    setup_stream(group, worker, dir_fd, &worker->err, AGENT_STD_ERR, STDERR_FILENO);
    close(dir_fd);
    return 0;
}

agent_worker_env agent__worker_env_of(const agent_group *group, int local_rank,
                                      const char *error_file, const char *store_prefix)
{
    agent_worker_env spec = {
        .opts = group->job.opts,
        .generation = &group->current,
        .run_id = group->job.run_id,
        .store_endpoint = group->store.endpoint,
        .store_prefix = store_prefix,
        .store_token_file = group->store.token_file,
        .error_file = error_file,
        .local_rank = local_rank,
        .heartbeat_shm = group->monitor ? probe__monitor_heartbeat_path(group->monitor) : NULL,
        .agent_socket = group->monitor ? probe__monitor_socket_path(group->monitor) : NULL,
        .memory_dir = agent__memory_dir(group),
    };
    return spec;
}

static int spawn_worker(agent_group *group, agent_worker *worker, const char *path, char **argv)
{
    char prefix[400];
    agent__worker_store_prefix(group, prefix, sizeof prefix);
    agent_worker_env spec =
        agent__worker_env_of(group, worker->local_rank, worker->error_file, prefix);
    agent__memory_plan_for(group, worker->local_rank, &spec.restore_step, &spec.restore_source,
                           &spec.restore_node);
    char **envp = NULL;
    int rc = agent__env_build(&spec, &envp);
    if (rc != 0) return rc;
    int out_fd = -1, err_fd = -1;
    agent_spawn spawn = { .path = path,
                          .argv = (const char *const *)argv,
                          .envp = (const char *const *)envp };
    agent__probes_worker_starting(group, worker);
    pid_t old_pid = worker->pid;
    /* An interpreter started ahead for this rank takes the same command and
     * environment instead of a new process (prestart.c). */
    worker->started_ahead =
        agent__prestart_take(group, worker->local_rank, &spawn, &worker->pid, &out_fd, &err_fd);
    if (!worker->started_ahead) rc = agent__proc_spawn(&spawn, &worker->pid, &out_fd, &err_fd);
    agent__strv_free(envp);
    if (rc != 0) return rc;
    agent__reaper_track(group, old_pid, worker->pid);
    /* Its memory cgroup's OOM-kill count now, while it lives (a dead
     * process shows the root cgroup): a SIGKILL later is the OOM killer's
     * only when the count rose (oom.h). */
    agent__oom_mark(worker->pid, &worker->oom);
    worker->oom_killed = false;
    agent__probes_worker_started(group, worker);
    agent__exit_watch_start(group, worker);
    worker->running = true;
    worker->started_ms = elastic__now_ms();
    agent__group_tell(group, AGENT_IN_WORKER_STARTED);
    if (agent__stream_open(group->loop, &worker->out, out_fd) != 0 ||
        agent__stream_open(group->loop, &worker->err, err_fd) != 0)
        ELASTIC_LOG_W("agent", "rank %d: output not relayed: %s", worker->rank,
                      elastic_last_error());
    return 0;
}

agent_ev_worker agent__ev_worker_of(const agent_group *group, const agent_worker *worker)
{
    return (agent_ev_worker){ .generation = group->current.generation,
                              .rank = worker->rank,
                              .local_rank = worker->local_rank,
                              .pid = worker->pid };
}

/* Whether the OOM killer ended a worker that died of SIGKILL: its cgroup's
 * count rose since its start, or the kernel's log names it (oom.h). */
static bool oom_witnessed(const agent_worker *worker)
{
    char how[160];
    if (!agent__oom_killed(&worker->oom, worker->pid, how, sizeof how)) return false;
    ELASTIC_LOG_I("agent", "rank %d (pid %d) was killed by the OOM killer (%s)", worker->rank,
                  (int)worker->pid, how);
    return true;
}

static void emit_started(agent_group *group, const agent_worker *worker)
{
    agent_ev_worker_started ev = { .worker = agent__ev_worker_of(group, worker),
                                   .started_ahead = worker->started_ahead };
    agent__ev_worker_started(group->job.events, &ev);
}

/* A dead slot's fresh process (a cold start). */
static int cold_start(agent_group *group, agent_worker *worker, int local_rank, bool recovering)
{
    char path[4096];
    char **argv = NULL;
    int rc = prepare_worker(group, worker, local_rank);
    if (rc == 0) rc = agent__command_build(group->job.opts, local_rank, &argv);
    if (rc == 0) rc = agent__resolve_program(argv[0], path, sizeof path);
    if (rc == 0) rc = spawn_worker(group, worker, path, argv);
    agent__strv_free(argv);
    if (rc != 0) {
        char reason[256];
        snprintf(reason, sizeof reason, "could not start: %s", elastic_last_error());
        ELASTIC_LOG_E("agent", "rank %d %s", worker->rank, reason);
        agent__group_worker_unhealthy(group, worker, reason, 127, 0);
        return rc;
    }
    emit_started(group, worker);
    if (recovering) agent__phases_replacement(group, worker, false);
    return 0;
}

/* In a recovery a parked spare takes the slot first. */
static bool promote(agent_group *group, agent_worker *worker, bool recovering)
{
    if (!recovering || !agent__spares_promote(group, worker)) return false;
    agent__phases_replacement(group, worker, true);
    return true;
}

int agent__workers_start(agent_group *group, bool wait_spare)
{
    int nworkers = group->current.local_world_size;
    if (group->workers == NULL || group->nworkers != nworkers) {
        free(group->workers);
        group->nworkers = 0;
        group->workers = calloc((size_t)nworkers, sizeof *group->workers);
        if (group->workers == NULL) return elastic__fail(ELASTIC_ENOMEM, "out of memory");
    }
    /* The last generation's workers are reaped and their streams closed
     * (STOPPING waited for both): forget their pids before anything can fail. */
    for (int i = 0; i < nworkers; i++) /* in-process recovery keeps the workers that acknowledged */
        if (!(group->workers[i].survivor && group->workers[i].abort_acked &&
              group->workers[i].running))
            memset(&group->workers[i], 0, sizeof group->workers[i]);
    group->nworkers = nworkers;
    agent__inprocess_generation_starting(group);
    int waiting = 0; /* slots waiting for a starting spare: one per such spare */
    for (int local_rank = 0; local_rank < nworkers; local_rank++) {
        agent_worker *worker = &group->workers[local_rank];
        if (worker->running) {
            agent__inprocess_reconfigure(
                group, worker); /* a failure to send kills it: reaped as a failure */
            continue;
        }
        bool recovering = agent__phases_recovering(group, NULL);
        worker->local_rank = local_rank;
        worker->rank = group->current.rank_base + local_rank;
        if (promote(group, worker, recovering)) continue;
        /* A spare still starting is ahead of a cold start: the slot waits for it. */
        if (recovering && wait_spare && agent__spares_await(group, worker) > waiting) {
            worker->waits_spare = true;
            waiting++;
            continue;
        }
        int rc = cold_start(group, worker, local_rank, recovering);
        if (rc != 0) return rc;
    }
    agent__prestart_generation_started(group);
    return 0;
}

int agent__workers_start_waiting(agent_group *group)
{
    for (int i = 0; i < group->nworkers; i++) {
        agent_worker *worker = &group->workers[i];
        if (!worker->waits_spare) continue;
        worker->waits_spare = false;
        if (promote(group, worker, true)) continue;
        int rc = cold_start(group, worker, i, true);
        if (rc != 0) return rc;
    }
    return 0;
}

void agent__workers_reap(agent_group *group, void (*on_exit)(agent_group *, agent_worker *, int))
{
    for (int i = 0; i < group->nworkers; i++) {
        agent_worker *worker = &group->workers[i];
        int status;
        if (!worker->running) continue;
        pid_t got;
        do got = waitpid(worker->pid, &status, WNOHANG);
        while (got < 0 && errno == EINTR);
        if (got == 0 || (got < 0 && errno != ECHILD)) continue;
        if (got <
            0) { /* someone else reaped it (a host program that ignores SIGCHLD): status unknown */
            ELASTIC_LOG_W("agent", "rank %d (pid %d) was reaped outside the agent", worker->rank,
                          (int)worker->pid);
            status = 0xff00; /* as exit(255) */
        }
        agent__exit_watch_stop(worker);
        worker->running = false;
        worker->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        worker->term_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        worker->oom_killed = worker->term_signal == SIGKILL && oom_witnessed(worker);
        agent_stream *out = agent__worker_out(worker), *err = agent__worker_err(worker);
        int streams_closing = (int)out->open + (int)err->open;
        agent__stream_finish(out);
        agent__stream_finish(err);
        agent__probes_worker_exited(group, worker);
        on_exit(group, worker, streams_closing);
        agent__spares_worker_reaped(group, worker); /* a promoted spare's record: its streams */
    }
}

void agent__workers_notice(agent_group *group)
{
    if (group->monitor == NULL) return;
    char reason[64];
    snprintf(reason, sizeof reason, "the agent got signal %d (%s)", group->m.stop_signal,
             group->m.stop_signal > 0 ? strsignal(group->m.stop_signal) : "stop request");
    for (int i = 0; i < group->nworkers; i++)
        if (group->workers[i].running &&
            probe__monitor_notice_worker(group->monitor, i, group->job.opts->grace_period_ms,
                                         reason) != 0)
            ELASTIC_LOG_W("agent", "stop notice to local rank %d: %s", i, elastic_last_error());
}

void agent__workers_signal(agent_group *group, int signum, bool keep_survivors)
{
    for (int i = 0; i < group->nworkers; i++) {
        const agent_worker *worker = &group->workers[i];
        if (worker->survivor && keep_survivors) continue; /* kept for in-process recovery */
        if (worker->pid > 0) agent__proc_signal_group(worker->pid, signum);
    }
}
