/*
 * The job's store with --rdzv-backend etcd-v3: no agent hosts it for the
 * whole job. Each generation, group rank 0 hosts it (a survivor keeps the
 * one it already runs) and publishes its endpoint through the rendezvous;
 * every agent connects to that generation's store before starting workers.
 * Runs on the calls thread, inside next(); the NEXT call carries the new
 * store, endpoint and token file back to the loop (agent__jobstore_take).
 */
#include "agent/generation_store.h"

#include "agent/calls.h"
#include "rdzv/rdzv.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>

static void random_token(char *out, size_t size)
{
    unsigned char raw[16];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) {
        uint64_t mix = elastic__now_ns() ^ ((uint64_t)getpid() << 32);
        for (size_t i = 0; i < sizeof raw; i++)
            raw[i] = (unsigned char)(mix >> (8 * (i % 8))) ^ (unsigned char)i;
    }
    for (size_t i = 0; i < sizeof raw && 2 * i + 2 < size; i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
}

/* Starts our store (once: a host that stays rank 0 keeps its data), with
 * the job's token, else a random one that only etcd's readers learn. */
static int host(agent_jobstore *js, char *endpoint, size_t size)
{
    if (js->server == NULL) {
        if (js->fixed_token == NULL) random_token(js->host_token, sizeof js->host_token);
        elastic_store_server_opts opts;
        elastic_store_server_opts_init(&opts, sizeof opts);
        opts.host = js->bind_host;
        opts.port = 0;
        opts.token = js->fixed_token != NULL ? js->fixed_token : js->host_token;
        if (js->max_connections > 0) opts.max_connections = js->max_connections;
        int rc = elastic_store_server_start(&opts, &js->server);
        if (rc != 0) return rc;
    }
    int port = 0;
    int rc = elastic_store_server_get_port(js->server, &port);
    if (rc != 0) return rc;
    if (js->published == 0 || js->logged_port != port)
        ELASTIC_LOG_I("agent", "hosting the job's store on %s:%d", js->advertise_host, port);
    js->logged_port = port;
    snprintf(endpoint, size, strchr(js->advertise_host, ':') ? "[%s]:%d" : "%s:%d",
             js->advertise_host, port);
    return 0;
}

/* The workers read the generation's random token from a file in the
 * agent's private run directory (never their environment): rewritten when
 * the host, and so the token, changed. A configured token was written once. */
static int give_workers_token(agent_jobstore *js, const char *token)
{
    if (js->fixed_token != NULL || strcmp(token, js->written_token) == 0) return 0;
    if (js->written_token[0] != '\0') unlink(js->token_file);
    js->written_token[0] = '\0';
    js->token_file_now = NULL;
    if (token[0] == '\0') return 0;
    int rc = agent__token_publish(js->token_dir, token, js->token_file, js->token_file_size);
    if (rc != 0) return rc;
    snprintf(js->written_token, sizeof js->written_token, "%s", token);
    js->token_file_now = js->token_file;
    return 0;
}

/* Parks a watch on a key only we write: it returns when we wake it (stop)
 * or fails the moment the host's connection is gone. */
static void *watcher_main(void *arg)
{
    agent_jobstore *js = arg;
    uint64_t revision = 0;
    while (!__atomic_load_n(&js->watcher_stop, __ATOMIC_ACQUIRE)) {
        int rc = elastic_store_watch(js->watch_store, js->watch_key, revision, 5000, &revision);
        if (rc == 0 || rc == ELASTIC_ETIMEDOUT) continue;
        if (__atomic_load_n(&js->watcher_stop, __ATOMIC_ACQUIRE)) break;
        char why[200];
        snprintf(why, sizeof why, "%.190s", elastic_last_error());
        __atomic_store_n(&js->lost_generation, js->watch_generation, __ATOMIC_RELEASE);
        ELASTIC_LOG_W("agent", "job store host of generation %llu lost (%s)",
                      (unsigned long long)js->watch_generation, why);
        if (rdzv__jobstore_host_lost(js->watch_rdzv, js->watch_generation, why) != 0)
            ELASTIC_LOG_W("agent", "ending generation %llu: %s",
                          (unsigned long long)js->watch_generation, elastic_last_error());
        break;
    }
    return NULL;
}

static void watcher_stop(agent_jobstore *js)
{
    if (!js->watching) return;
    __atomic_store_n(&js->watcher_stop, 1, __ATOMIC_RELEASE);
    (void)elastic_store_set(js->watch_store, js->watch_key, "1",
                            1); /* fails harmlessly once the host is gone */
    pthread_join(js->watcher, NULL);
    js->watching = false;
}

static void watcher_start(agent_jobstore *js, elastic_rdzv *r, elastic_store *store,
                          uint64_t generation)
{
    js->watch_rdzv = r;
    js->watch_store = store;
    js->watch_generation = generation;
    snprintf(js->watch_key, sizeof js->watch_key, "agent/watch/%p/%llu", (void *)js,
             (unsigned long long)generation);
    __atomic_store_n(&js->watcher_stop, 0, __ATOMIC_RELEASE);
    js->watching = pthread_create(&js->watcher, NULL, watcher_main, js) == 0;
    if (!js->watching)
        ELASTIC_LOG_W("agent",
                      "cannot watch the job store's connection: losing its host costs budget");
}

bool agent__jobstore_lost(agent_jobstore *js, uint64_t generation)
{
    if (js == NULL || generation == 0) return false;
    if (__atomic_load_n(&js->lost_generation, __ATOMIC_ACQUIRE) == generation) return true;
    if (!js->watching || js->watch_generation != generation) return false;
    /* The watcher may not have seen the reset yet: one round trip on our own
     * connection to that store tells (a dead host refuses the reconnect). */
    void *value = NULL;
    size_t len = 0;
    int rc = elastic_store_try_get(js->watch_store, js->watch_key, &value, &len);
    elastic_free(value);
    if (rc != ELASTIC_ECONNECT && rc != ELASTIC_ECLOSED && rc != ELASTIC_EIO) return false;
    __atomic_store_n(&js->lost_generation, generation, __ATOMIC_RELEASE);
    return true;
}

int agent__jobstore_attach(agent_jobstore *js, elastic_rdzv *r, const elastic_rdzv_result *result)
{
    watcher_stop(js); /* the previous generation's store is done with */
    char endpoint[300], token[128];
    int rc;
    if (result->group_rank == 0) {
        rc = host(js, endpoint, sizeof endpoint);
        /* A configured token stays off etcd: every node has it already. */
        if (rc == 0)
            rc = rdzv__jobstore_publish(r, result->generation, endpoint,
                                        js->fixed_token ? "" : js->host_token);
        if (rc != 0) return rc;
        snprintf(token, sizeof token, "%s", js->fixed_token ? "" : js->host_token);
        if (js->published != 0) rdzv__jobstore_forget(r, js->published);
        js->published = result->generation;
    } else {
        rc = rdzv__jobstore_lookup(r, result->generation, js->lookup_timeout_ms, endpoint,
                                   sizeof endpoint, token, sizeof token);
        if (rc != 0) return rc;
    }
    elastic_store *store = NULL;
    elastic_store_opts opts;
    elastic_store_opts_init(&opts, sizeof opts);
    opts.token = js->fixed_token != NULL ? js->fixed_token : token[0] != '\0' ? token : NULL;
    opts.connect_timeout_ms = js->lookup_timeout_ms;
    if (js->read_timeout_ms > 0) opts.timeout_ms = js->read_timeout_ms;
    rc = elastic_store_connect(endpoint, &opts, &store);
    if (rc == 0) rc = give_workers_token(js, token);
    if (rc != 0) {
        elastic_store_close(store);
        return rc;
    }
    /* The NEXT call takes it to the loop, which closes the old one there. */
    js->fresh_store = store;
    watcher_start(js, r, store, result->generation);
    snprintf(js->endpoint_now, sizeof js->endpoint_now, "%s", endpoint);
    if (result->group_rank != 0 &&
        js->server != NULL) { /* we hosted an older generation: nobody uses it now */
        elastic_store_server_close(js->server);
        js->server = NULL;
    }
    return 0;
}

void agent__jobstore_take(agent_jobstore *js, agent_next_call *call)
{
    if (js == NULL || js->fresh_store == NULL) return;
    call->store = js->fresh_store;
    call->store_changed = true;
    js->fresh_store = NULL;
    snprintf(call->endpoint, sizeof call->endpoint, "%s", js->endpoint_now);
    call->token_file_changed = js->fixed_token == NULL; /* a configured token's file stays */
    snprintf(call->token_file, sizeof call->token_file, "%s",
             js->token_file_now != NULL ? js->token_file_now : "");
}

bool agent__jobstore_hosting(const agent_jobstore *js)
{
    return js != NULL && js->server != NULL;
}

void agent__jobstore_close(agent_jobstore *js)
{
    if (js == NULL) return;
    watcher_stop(js);
    elastic_store_server_close(js->server);
    js->server = NULL;
}

void agent__store_link_apply(agent_store_link *link, agent_next_call *call)
{
    if (!call->store_changed) return;
    /* etcd: this generation's store replaces the last one */
    elastic_store_close(link->client);
    link->client = call->store;
    call->store = NULL;
    call->store_changed = false;
    snprintf(link->endpoint_buf, sizeof link->endpoint_buf, "%s", call->endpoint);
    link->endpoint = link->endpoint_buf;
    if (call->token_file_changed) {
        snprintf(link->token_buf, sizeof link->token_buf, "%s", call->token_file);
        link->token_file = call->token_file[0] != '\0' ? link->token_buf : NULL;
    }
}
