/*
 * The root cause of a failed job: the first failure's node, rank, exit code
 * or signal, time, and its error file or stderr tail. Each agent records its
 * own first failure (and shares the detail through the store); the summary
 * is written when the job fails, and copied into our error file like torchrun.
 */
#include "agent/summary.h"

#include "agent/console.h"
#include "agent/journal.h"
#include "agent/membership.h"
#include "agent/python.h"
#include "agent/spares.h"
#include "rdzv/rdzv.h"

#include "common/json_writer.h"
#include "common/small_file.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void failure_key(const char *run_id, uint64_t generation, const char *node_id, char *key,
                        size_t size)
{
    snprintf(key, size, "agent/%s/failure/%llu/%s", run_id, (unsigned long long)generation,
             node_id);
}

void agent__failure_words(agent_worker *worker, agent_failure *failure)
{
    failure->detail_is_error_file =
        elastic__read_small_text(worker->error_file, failure->detail, sizeof failure->detail) > 0;
    if (!failure->detail_is_error_file)
        agent__stream_tail(agent__worker_err(worker), failure->detail, sizeof failure->detail);
}

void agent__failure_record(agent_group *group, agent_worker *worker,
                           const elastic_rdzv_cause *cause)
{
    agent_failure *failure = &group->local_failure;
    if (failure->valid) return; /* the summary names the first failure */
    failure->valid = true;
    failure->cause = *cause;
    failure->local_rank = worker->local_rank;
    agent__failure_words(worker, failure);
}

/* The SHARE_FAILURE call: the first failure's detail into the job store,
 * where the other nodes' summaries read it. */
typedef struct share_call {
    agent_call base;
    elastic_store *store;
    char key[512];
    char value[AGENT_TAIL_BYTES + 1];
} share_call;

static void share_run(agent_call *call)
{
    share_call *sc = (share_call *)call;
    agent__call_status(call, sc->store != NULL ? elastic_store_set(sc->store, sc->key, sc->value,
                                                                   strlen(sc->value))
                                               : 0);
}

static void share_done(agent_group *group, agent_call *call, agent_input *in)
{
    agent__call_warn(call, "sharing the failure's detail");
}

static const agent_call_type share_type = { share_run, share_done, NULL };

void agent__failure_share(agent_group *group, const elastic_rdzv_cause *cause)
{
    const agent_failure *failure = &group->local_failure;
    if (group->store.client == NULL || !failure->valid ||
        failure->cause.generation != cause->generation || failure->cause.rank != cause->rank)
        return; /* only the first failure is shared, as only it is summarised */
    share_call *call = agent__call_alloc(sizeof *call, AGENT_CALL_SHARE_FAILURE, &share_type);
    if (call == NULL) return;
    call->store = group->store.client;
    failure_key(group->job.run_id, cause->generation, group->job.node_id, call->key,
                sizeof call->key);
    snprintf(call->value, sizeof call->value, "%s", failure->detail);
    agent__call_post(group, &call->base);
}

static void format_time(uint64_t wall_ms, char *out, size_t size)
{
    time_t seconds = (time_t)(wall_ms / 1000);
    struct tm tm;
    gmtime_r(&seconds, &tm);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, size, "%s.%03uZ", date, (unsigned)(wall_ms % 1000));
}

/* The SUMMARY call: the group's inputs copied in (opts and ids are
 * immutable), the root cause written on the calls thread, the text back. */
typedef struct summary_call {
    agent_call base;
    elastic_store *store; /* the job store (NULL: none): other nodes' failure details */
    agent_membership *membership;
    int summary_rc; /* the error that ends the job */
    char why[256];  /* its detail */
    const elastic_agent_opts *opts;
    const char *run_id, *node_id;
    uint64_t generation; /* the last generation this node formed */
    uint64_t fenced_wall_ms;
    char fenced_reason[256];
    char store_endpoint[300];
    agent_failure local_failure;
    char summary[4096];
    /* why the job was closed, when the failed rendezvous could read it */
    bool closed_known;
    bool closed_budget; /* the restart budget ran out */
    elastic_rdzv_cause closed;
} summary_call;

/* The first failure's detail: ours, or the failing node's from the store. */
static bool failure_detail(summary_call *call, const elastic_rdzv_cause *cause, char *out,
                           size_t size, bool *is_error_file)
{
    const agent_failure *local = &call->local_failure;
    *is_error_file = false;
    if (local->valid && local->cause.generation == cause->generation &&
        local->cause.rank == cause->rank && strcmp(local->cause.node_id, cause->node_id) == 0) {
        snprintf(out, size, "%s", local->detail);
        *is_error_file = local->detail_is_error_file;
        return true;
    }
    if (call->store == NULL) return false;
    char key[512];
    void *value = NULL;
    size_t len = 0;
    failure_key(call->run_id, cause->generation, cause->node_id, key, sizeof key);
    if (elastic_store_try_get(call->store, key, &value, &len) != 0) return false;
    snprintf(out, size, "%.*s", (int)len, (const char *)value);
    elastic_free(value);
    *is_error_file = out[0] == '{';
    return true;
}

static void write_error_file(const summary_call *call, const char *detail,
                             bool detail_is_error_file)
{
    const char *path =
        call->opts->error_file != NULL ? call->opts->error_file : getenv("TORCHELASTIC_ERROR_FILE");
    if (path == NULL || *path == '\0') return;
    char quoted[2 * sizeof call->summary];
    char json[sizeof quoted + 128];
    const char *content = detail;
    if (!detail_is_error_file) {
        /* The message is cut (at a whole character) to what the file's bound holds. */
        elastic__jw w;
        elastic__jw_init(&w, quoted, sizeof quoted);
        size_t len = strlen(call->summary);
        elastic__jw_string_n(&w, call->summary,
                             elastic__json_escaped_prefix(call->summary, len, sizeof quoted - 3));
        snprintf(json, sizeof json,
                 "{\"message\": {\"message\": %s, \"extraInfo\": {\"timestamp\": \"%llu\"}}}\n",
                 quoted, (unsigned long long)time(NULL));
        content = json;
    }
    int fd = agent__file_private_path(path, O_WRONLY | O_CREAT | O_TRUNC);
    if (fd < 0)
        ELASTIC_LOG_W("agent", "error file %s: %s", path, elastic_last_error());
    else if (write(fd, content, strlen(content)) != (ssize_t)strlen(content))
        ELASTIC_LOG_W("agent", "error file %s: %s", path, strerror(errno));
    if (fd >= 0) close(fd);
}

static void describe_failure(summary_call *call, const elastic_rdzv_cause *cause, char *detail,
                             size_t detail_size, bool *is_error_file)
{
    char when[40], what[400];
    format_time(cause->time_ms, when, sizeof when);
    agent__describe_cause(cause, what,
                          sizeof what); /* the reason once, not "killed ... (killed ...)" */
    size_t used = strlen(call->summary);
    used += (size_t)snprintf(call->summary + used, sizeof call->summary - used,
                             "first failure: rank %d on node %s, generation %llu, at %s: %s\n",
                             cause->rank, cause->node_id, (unsigned long long)cause->generation,
                             when, what);
    if (used >= sizeof call->summary ||
        !failure_detail(call, cause, detail, detail_size, is_error_file) || detail[0] == '\0')
        return;
    char rendered[AGENT_TAIL_BYTES + 512];
    if (*is_error_file && agent__error_file_render(detail, rendered, sizeof rendered) > 0)
        snprintf(call->summary + used, sizeof call->summary - used,
                 "error of rank %d (its error file):\n%s", cause->rank, rendered);
    else
        snprintf(call->summary + used, sizeof call->summary - used, "%s of rank %d:\n%s%s",
                 *is_error_file ? "error file" : "last lines of stderr", cause->rank, detail,
                 detail[strlen(detail) - 1] == '\n' ? "" : "\n");
    used = strlen(call->summary);
    char hint[5000];
    if (used + 1 < sizeof call->summary &&
        agent__python_hint(call->opts, detail, hint, sizeof hint)) {
        size_t n = strnlen(hint, sizeof call->summary - used -
                                     1); /* the hint may be cut, the summary not */
        memcpy(call->summary + used, hint, n);
        call->summary[used + n] = '\0';
    }
}

static void summary_run(agent_call *call);

static void summary_done(agent_group *group, agent_call *call, agent_input *in)
{
    snprintf(group->summary, sizeof group->summary, "%s", ((summary_call *)call)->summary);
}

static const agent_call_type summary_type = { summary_run, summary_done, NULL };

agent_call *agent__summary_call(const agent_group *group, const agent_next_call *next)
{
    summary_call *call = agent__call_alloc(sizeof *call, AGENT_CALL_SUMMARY, &summary_type);
    if (call == NULL) return NULL;
    call->store = group->store.client;
    call->membership = group->membership;
    call->summary_rc = next != NULL ? next->base.rc : 0;
    snprintf(call->why, sizeof call->why, "%s", next != NULL ? next->base.error : "");
    if (next != NULL) {
        call->closed_known = next->closed_known;
        call->closed_budget = next->closed_budget;
        call->closed = next->closed;
    }
    call->opts = group->job.opts;
    call->run_id = group->job.run_id;
    call->node_id = group->job.node_id;
    call->generation = group->m.generation;
    call->fenced_wall_ms = group->losses.fenced_wall_ms;
    snprintf(call->fenced_reason, sizeof call->fenced_reason, "%s", group->losses.fenced_reason);
    if (call->fenced_wall_ms == 0 &&
        group->losses.store_lost_wall_ms != 0) { /* lost before the fence */
        call->fenced_wall_ms = group->losses.store_lost_wall_ms;
        snprintf(call->fenced_reason, sizeof call->fenced_reason, "%s",
                 group->losses.store_lost_reason);
    }
    snprintf(call->store_endpoint, sizeof call->store_endpoint, "%s",
             group->store.endpoint != NULL ? group->store.endpoint : "");
    call->local_failure = group->local_failure;
    snprintf(call->summary, sizeof call->summary, "%s", group->summary);
    return &call->base;
}

/* The store was lost and never came back: etcd, or c10d's host. Writes the
 * summary and says true; false: the store is not why the job ended. */
static bool summarise_lost_store(summary_call *call, int rc, const char *why, char *detail,
                                 size_t detail_size, bool *is_error_file)
{
    if (call->fenced_wall_ms != 0 && (rc == ELASTIC_ECONNECT || rc == ELASTIC_ETIMEDOUT ||
                                      rc == ELASTIC_ECLOSED || rc == ELASTIC_ESTATE)) {
        /* Cut off from the store and it never came back (c10d cannot go on
         * without the host that served it): one line says which and when. */
        char when[40];
        format_time(call->fenced_wall_ms, when, sizeof when);
        bool etcd = strncmp(call->opts->rdzv_backend, "etcd", 4) == 0;
        snprintf(call->summary, sizeof call->summary,
                 "the job failed: lost %s at %s%s at %s: %s; then %s\n",
                 etcd ? "etcd" : "the job's store",
                 etcd ? call->opts->rdzv_endpoint : call->store_endpoint,
                 etcd ? "" : " (the store's host)", when, call->fenced_reason,
                 rc == ELASTIC_ESTATE  ? "the generation could not be ended without it"
                 : why != NULL && *why ? why
                                       : elastic_strerror(rc));
        return true;
    }
    if (strncmp(call->opts->rdzv_backend, "etcd", 4) != 0 &&
        (rc == ELASTIC_ECONNECT || rc == ELASTIC_ETIMEDOUT) && call->store_endpoint[0] != '\0') {
        /* Waiting in the rendezvous when the store stopped answering: on
         * c10d that is its host, gone. It is the cause even after a failure
         * of ours: every deliberate end (a bug, the budget, too many lost
         * nodes) closes the job first and the host serves until the others
         * left, so only a host that died leaves a node unanswered. A failure
         * of this generation, which this node was restarting after, follows
         * as context; an older one had been recovered from. */
        snprintf(call->summary, sizeof call->summary,
                 "the job failed: lost the job's store at %s (the store's host) while this node "
                 "waited to join: %s\n",
                 call->store_endpoint, why != NULL && *why ? why : elastic_strerror(rc));
        if (call->local_failure.valid && call->local_failure.cause.generation >= call->generation) {
            size_t used = strlen(call->summary);
            snprintf(call->summary + used, sizeof call->summary - used,
                     "this node was restarting after its own ");
            describe_failure(call, &call->local_failure.cause, detail, detail_size, is_error_file);
        }
        return true;
    }
    return false;
}

/* On the calls thread: writes the summary and the error file from the
 * call's own copy of the inputs. */
static void summary_run(agent_call *base)
{
    summary_call *call = (summary_call *)base;
    base->rc = 0; /* a summary always comes back */
    int rc = call->summary_rc;
    const char *why = call->why;
    char detail[AGENT_TAIL_BYTES + 1] = "";
    bool is_error_file = false;
    elastic_rdzv_cause cause = { .struct_size = sizeof cause };
    if (rc == ELASTIC_EBUDGET) {
        snprintf(call->summary, sizeof call->summary,
                 "the job failed: restart budget exhausted (--max-restarts %d)\n",
                 call->opts->max_restarts);
        if (call->membership->ops->first_failure(call->membership, &cause) == 0)
            describe_failure(call, &cause, detail, sizeof detail, &is_error_file);
    } else if (rc == ELASTIC_ECLOSED && call->closed_known && rdzv__cause_is_infra(&call->closed)) {
        /* Lost or replaced nodes kept ending generations: the fleet, not
         * the training code; the reason names the bound and the last node. */
        snprintf(call->summary, sizeof call->summary,
                 "the job failed: %s (closed by node %s, generation %llu; exit %d)\n",
                 call->closed.reason, call->closed.node_id,
                 (unsigned long long)call->closed.generation, AGENT_EXIT_INFRA);
    } else if (rc == ELASTIC_ECLOSED && call->closed_known) {
        /* The store answered: it said the job is shut. Who shut it, and why;
         * a fence before is the second line, not the cause. */
        char fenced[400] = "";
        if (call->fenced_wall_ms != 0) {
            char when[40];
            format_time(call->fenced_wall_ms, when, sizeof when);
            snprintf(fenced, sizeof fenced,
                     "; this node had been fenced out at %s (%s) and waited to rejoin", when,
                     call->fenced_reason);
        }
        snprintf(call->summary, sizeof call->summary,
                 "the job failed: it was closed while this node waited (by node %s, generation "
                 "%llu: %s)%s\n",
                 call->closed.node_id, (unsigned long long)call->closed.generation,
                 call->closed.reason, fenced);
    } else if (summarise_lost_store(call, rc, why, detail, sizeof detail, &is_error_file)) {
        /* the store (etcd, or c10d's host) was lost: said */
    } else if (call->local_failure.valid) {
        /* Our own worker's failure is the root cause; the store error after it is a second line. */
        snprintf(call->summary, sizeof call->summary, "the job failed: ");
        describe_failure(call, &call->local_failure.cause, detail, sizeof detail, &is_error_file);
        size_t used = strlen(call->summary);
        snprintf(call->summary + used, sizeof call->summary - used,
                 "then the rendezvous failed: %s%s%s\n", elastic_strerror(rc),
                 why != NULL && *why ? ": " : "", why != NULL ? why : "");
    } else {
        snprintf(call->summary, sizeof call->summary, "the job failed: rendezvous: %s%s%s\n",
                 elastic_strerror(rc), why != NULL && *why ? ": " : "", why != NULL ? why : "");
    }
    write_error_file(call, detail, is_error_file);
}
