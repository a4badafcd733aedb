/*
 * How the agent learns that a worker exited: one pidfd per worker, polled on
 * the agent's loop, readable once that worker has ended. SIGCHLD is only the
 * fallback for kernels without pidfd_open (before 5.3).
 *
 * Why not SIGCHLD alone: a signal is process-wide state the library does not
 * own (a host program or a sanitizer runtime may install, defer or merge it),
 * and its delivery order relative to the loop's other events is not defined.
 * A pidfd is a plain file descriptor of this one child: it cannot be lost or
 * coalesced, and it becomes readable only after the process is a zombie, so
 * the waitpid() that follows never blocks and never misses the exit.
 */
#include "agent/spares.h"
#include "agent/workers.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

struct agent_exit_watch {
    uv_poll_t poll;
    uv_timer_t retry; /* a readable pidfd whose waitpid() found nothing yet */
    int pidfd;
    int open_handles; /* freed once both handles have closed */
    agent_group *group;
};

#define EXIT_RETRY_MS 100

static void on_watch_closed(uv_handle_t *handle)
{
    agent_exit_watch *watch = handle->data;
    if (--watch->open_handles == 0) free(watch);
}

static void on_sigchld(uv_signal_t *handle, int signum)
{
    (void)signum;
    agent__group_post(handle->data, &(agent_group_event){ .kind = AGENT_GROUP_CHILDREN_EXITED });
}

static void close_watch(agent_exit_watch *watch)
{
    uv_close((uv_handle_t *)&watch->poll, on_watch_closed);
    uv_close((uv_handle_t *)&watch->retry, on_watch_closed);
    /* Safe right after uv_close: libuv no longer polls it. Closed as it was
     * opened, by raw system call, so ThreadSanitizer's descriptor table sees
     * neither (libuv closes the store's sockets that way too: a close() here
     * would look like a race with the store thread's accept of this number). */
    syscall(SYS_close, watch->pidfd);
}

/* Reaps what has ended (closing this watch when its worker was reaped):
 * the group reaps when it takes the event, before this returns. */
static void reap_now(agent_exit_watch *watch)
{
    agent__group_post(watch->group, &(agent_group_event){ .kind = AGENT_GROUP_CHILDREN_EXITED });
}

static void on_retry(uv_timer_t *timer)
{
    reap_now(timer->data);
}

static void on_pidfd(uv_poll_t *poll, int status, int events)
{
    agent_exit_watch *watch = poll->data;
    agent_group *group = watch->group;
    (void)status, (void)events; /* readable or an error: either way the process ended or is gone */
    reap_now(watch);
    if (uv_is_closing((uv_handle_t *)poll)) return;
    /* Still open: its worker was not reaped yet (a thread of it may still be
     * exiting, so waitpid() found nothing). Stop polling a descriptor that
     * stays readable and try again on a timer until the reap succeeds; a
     * watch no worker owns goes now. */
    for (int i = 0; i < group->nworkers; i++)
        if (group->workers[i].exit_watch == watch) {
            uv_poll_stop(poll);
            if (!uv_is_active((uv_handle_t *)&watch->retry))
                uv_timer_start(&watch->retry, on_retry, EXIT_RETRY_MS, EXIT_RETRY_MS);
            return;
        }
    if (agent__spares_own_watch(group, watch)) {
        uv_poll_stop(poll);
        if (!uv_is_active((uv_handle_t *)&watch->retry))
            uv_timer_start(&watch->retry, on_retry, EXIT_RETRY_MS, EXIT_RETRY_MS);
        return;
    }
    close_watch(watch);
}

/* Without pidfds every exit is found by SIGCHLD: started once, on first need. */
static void use_sigchld(agent_group *group, const char *why)
{
    if (uv_is_active((uv_handle_t *)&group->sigchld)) return;
    ELASTIC_LOG_W("agent", "worker exits through SIGCHLD: %s", why);
    int rc = uv_signal_start(&group->sigchld, on_sigchld, SIGCHLD);
    if (rc != 0) ELASTIC_LOG_E("agent", "SIGCHLD handler: %s", uv_strerror(rc));
}

void agent__exit_watch_start(agent_group *group, agent_worker *worker)
{
    worker->exit_watch = NULL;
    int pidfd = (int)syscall(SYS_pidfd_open, worker->pid, 0);
    if (pidfd < 0) {
        use_sigchld(group, strerror(errno));
        return;
    }
    agent_exit_watch *watch = calloc(1, sizeof *watch);
    int rc = watch != NULL ? uv_poll_init(group->loop, &watch->poll, pidfd) : UV_ENOMEM;
    if (rc != 0) {
        free(watch);
        syscall(SYS_close, pidfd);
        use_sigchld(group, uv_strerror(rc));
        return;
    }
    uv_timer_init(group->loop, &watch->retry);
    watch->open_handles = 2;
    watch->pidfd = pidfd;
    watch->group = group;
    watch->poll.data = watch;
    watch->retry.data = watch;
    uv_poll_start(&watch->poll, UV_READABLE, on_pidfd);
    worker->exit_watch = watch;
}

void agent__exit_watch_stop(agent_worker *worker)
{
    agent_exit_watch *watch = worker->exit_watch;
    if (watch == NULL) return;
    worker->exit_watch = NULL;
    close_watch(watch);
}

/* SIGCHLD ignored (SIG_IGN or SA_NOCLDWAIT, which survive exec, so whoever
 * started the agent may have left them) makes the kernel discard every
 * child's exit status: a worker's pidfd would still say it ended, but
 * waitpid() could no longer say how. Back to the default, which keeps them. */
static void keep_exit_statuses(void)
{
    struct sigaction current;
    if (sigaction(SIGCHLD, NULL, &current) != 0) return;
    if (current.sa_handler != SIG_IGN && !(current.sa_flags & SA_NOCLDWAIT)) return;
    ELASTIC_LOG_I("agent",
                  "SIGCHLD was ignored: restoring its default so worker exit codes are kept");
    if (current.sa_handler == SIG_IGN) current.sa_handler = SIG_DFL;
    current.sa_flags &= ~SA_NOCLDWAIT;
    sigaction(SIGCHLD, &current, NULL);
}

int agent__exits_init(agent_group *group)
{
    keep_exit_statuses();
    int rc = uv_signal_init(group->loop, &group->sigchld);
    group->sigchld.data = group;
    return rc;
}

void agent__exits_close(agent_group *group)
{
    for (int i = 0; i < group->nworkers; i++) agent__exit_watch_stop(&group->workers[i]);
    uv_close((uv_handle_t *)&group->sigchld, NULL);
}
