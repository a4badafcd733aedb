/*
 * The agent's public face: from options to a running job. Sets up the job's
 * store (hosting it when this node should), the membership, the event log
 * and the log directories, then runs the group's state machine on a loop.
 */
#include "agent/group.h"
#include "agent/console.h"
#include "agent/generation_store.h"
#include "agent/outcome.h"
#include "agent/health.h"
#include "agent/journal_events.h"
#include "agent/memory.h"
#include "agent/membership.h"
#include "agent/probes.h"
#include "agent/python.h"
#include "agent/reaper.h"
#include "agent/workers.h"
#include "common/endpoint.h"
#include "common/names.h"
#include "rdzv/rdzv.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define AGENT_C10D_DEFAULT_PORT        29400
#define AGENT_ETCD_KEEP_ALIVE_ATTEMPTS 10 /* x keep_alive_interval (0.5 s): a 5 s etcd lease */

struct elastic_agent {
    elastic_agent_opts opts;
    agent_rdzv_conf conf;
    uv_loop_t loop;
    bool loop_ready;
    agent_group group;
    bool group_ready;
    bool ran;
    int accepting_stop;           /* atomic: request_stop may touch the loop */
    elastic_store_server *server; /* when this node hosts the job's store (c10d, static) */
    agent_jobstore jobstore;      /* etcd-v3: the store re-hosted every generation */
    char etcd_password[256];
    elastic_store *store;
    agent_events *events;
    agent_membership *membership;
    agent_outcome_mark outcome; /* c10d, not the host: the outcome is owed to this node */
    char run_id[160];
    char node_id[200];
    char hostname[128];
    char node_addr[INET6_ADDRSTRLEN + 16]; /* what peers reach this node at (node_address) */
    char store_endpoint[300];
    char *token;          /* the store token (NULL: none) */
    char token_file[800]; /* where the workers read it ("": not written) */
    char log_root[700];
    int log_root_fd; /* the log root, opened once: everything below it goes through it */
    bool log_root_is_temporary;
    elastic_agent *next_abandoned;
};

/* Agents freed while a rendezvous thread still used them: kept (and
 * reachable) until the process exits. */
static pthread_mutex_t abandoned_lock = PTHREAD_MUTEX_INITIALIZER;
static elastic_agent *abandoned_agents;

static void random_hex(char *out, size_t bytes)
{
    unsigned char raw[32];
    if (bytes > sizeof raw) bytes = sizeof raw;
    if (getrandom(raw, bytes, 0) != (ssize_t)bytes) {
        uint64_t mix = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ (uint64_t)time(NULL);
        for (size_t i = 0; i < bytes; i++)
            raw[i] = (unsigned char)(mix >> (8 * (i % 8))) ^ (unsigned char)i;
    }
    for (size_t i = 0; i < bytes; i++) snprintf(out + 2 * i, 3, "%02x", raw[i]);
}

static bool local_only(const elastic_agent *agent)
{
    return agent->opts.max_nodes == 1;
}

static bool on_etcd(const elastic_agent *agent)
{
    return !local_only(agent) && (strcmp(agent->opts.rdzv_backend, "etcd-v3") == 0 ||
                                  strcmp(agent->opts.rdzv_backend, "etcd") == 0);
}

/* This node's address for its peers (the memory tier's replica channel, the
 * store a generation's rank 0 hosts on etcd):
 * --local-addr, else the one chosen at setup (choose_node_address), else
 * loopback (a one-node job, or before the choice). */
static const char *node_address(const elastic_agent *agent)
{
    if (agent->opts.local_addr != NULL) return agent->opts.local_addr;
    return agent->node_addr[0] != '\0' ? agent->node_addr : "127.0.0.1";
}

/* Without --local-addr a node of a multi-node job is reached at its
 * interface on the route to the rendezvous endpoint: the host name may
 * resolve to loopback (Debian's 127.0.1.1), and loopback is no address for
 * a peer on another host. */
static void choose_node_address(elastic_agent *agent)
{
    const elastic_agent_opts *o = &agent->opts;
    if (o->local_addr != NULL || local_only(agent)) return;
    char first[512], host[256];
    int port = 0;
    const char *endpoint = strcmp(o->rdzv_backend, "static") == 0 ? o->master_addr
                                                                   : o->rdzv_endpoint;
    if (endpoint == NULL) return;
    const char *scheme = strstr(endpoint, "://");
    snprintf(first, sizeof first, "%s", scheme != NULL ? scheme + 3 : endpoint);
    first[strcspn(first, ",/")] = '\0'; /* etcd: the first of its endpoints, no path */
    int rc = elastic__endpoint_parse("--rdzv-endpoint", first, AGENT_C10D_DEFAULT_PORT, host,
                                     sizeof host, &port);
    if (rc == 0) rc = agent__route_source(host, port, agent->node_addr, sizeof agent->node_addr);
    if (rc != 0) {
        agent->node_addr[0] = '\0';
        ELASTIC_LOG_W("agent", "%s: peers are told 127.0.0.1 (set --local-addr)",
                      elastic_last_error());
    }
}

/* ---- the job's store ---------------------------------------------------------- */

/* The connection limit follows the job's size: each node's agent holds a
 * few connections (rendezvous, its job-store view) and each worker may hold
 * one (barriers, checkpoint commits); the default 4096 stays the floor. */
size_t agent__store_connections(int max_nodes, int nproc_per_node)
{
    size_t nodes = max_nodes > 0 ? (size_t)max_nodes : 1;
    size_t per_node = 4 + (size_t)(nproc_per_node > 0 ? nproc_per_node : 1);
    size_t wanted = nodes * per_node + 64;
    return wanted > 4096 ? wanted : 4096;
}

static int host_store(elastic_agent *agent, const char *bind_host, int port)
{
    elastic_store_server_opts server_opts;
    elastic_store_server_opts_init(&server_opts, sizeof server_opts);
    server_opts.host = bind_host;
    server_opts.port = port;
    server_opts.token = agent->token;
    server_opts.max_connections =
        agent__store_connections(agent->opts.max_nodes, agent->opts.nproc_per_node);
    return elastic_store_server_start(&server_opts, &agent->server);
}

/* Which store, and whether we host it: one node hosts its own on a free
 * port; c10d hosts at the endpoint when it names this machine (or is_host=1),
 * falling back to a client when another local agent got the port first;
 * static hosts at master_addr:master_port on node rank 0. */
static int setup_store(elastic_agent *agent)
{
    const elastic_agent_opts *o = &agent->opts;
    char host[256];
    int port, rc;
    /* On etcd a store without a configured token gets a random one per host,
     * published in etcd (generation_store.c): no warning about an open store then. */
    if ((rc = agent__token_load(&agent->conf, !local_only(agent) && !on_etcd(agent),
                                &agent->token)) != 0)
        return rc;
    if (on_etcd(
            agent)) { /* no store yet: each generation's rank 0 hosts one (generation_store.c) */
        agent_jobstore *js = &agent->jobstore;
        js->bind_host = agent->conf.store_bind_addr[0] != '\0' ? agent->conf.store_bind_addr
                        : o->local_addr != NULL                ? o->local_addr
                                                               : "0.0.0.0";
        js->advertise_host = node_address(agent);
        js->fixed_token = agent->token;
        js->max_connections = agent__store_connections(o->max_nodes, o->nproc_per_node);
        js->read_timeout_ms = agent->conf.read_timeout_ms > 0 ? agent->conf.read_timeout_ms : 0;
        js->token_dir = agent__probes_dir(&agent->group);
        js->token_file = agent->token_file;
        js->token_file_size = sizeof agent->token_file;
        return 0;
    }
    if (local_only(agent)) {
        if (agent->token == NULL) { /* only our workers need it */
            if ((agent->token = malloc(33)) == NULL)
                return elastic__fail(ELASTIC_ENOMEM, "out of memory");
            random_hex(agent->token, 16);
        }
        snprintf(host, sizeof host, "%s", node_address(agent));
        if ((rc = host_store(agent, host, 0)) != 0) return rc;
        if ((rc = elastic_store_server_get_port(agent->server, &port)) != 0) return rc;
    } else {
        bool is_static = strcmp(o->rdzv_backend, "static") == 0;
        if (is_static)
            snprintf(host, sizeof host, "%s", o->master_addr), port = o->master_port;
        else if ((rc = elastic__endpoint_parse("--rdzv-endpoint", o->rdzv_endpoint,
                                               AGENT_C10D_DEFAULT_PORT, host, sizeof host,
                                               &port)) != 0)
            return rc;
        bool should_host = is_static                  ? o->node_rank == 0
                           : agent->conf.is_host >= 0 ? agent->conf.is_host == 1
                                                      : agent__address_is_local(host);
        if (should_host) {
            /* The endpoint's own address, not every interface, unless told. */
            const char *bind =
                agent->conf.store_bind_addr[0] != '\0' ? agent->conf.store_bind_addr : host;
            rc = host_store(agent, bind, port);
            if (rc == 0 && agent__name_is_loopback_alias(bind))
                ELASTIC_LOG_W(
                    "agent",
                    "the store listens on %s, a loopback address on this host: other hosts cannot "
                    "reach it (set --rdzv-conf store_bind_addr=0.0.0.0 or an interface's address)",
                    bind);
            bool explicit_host = is_static || agent->conf.is_host == 1;
            if (rc != 0 && explicit_host) return rc;
            if (rc != 0)
                ELASTIC_LOG_I("agent", "store port %d taken (%s): joining as a client", port,
                              elastic_last_error());
        }
    }
    snprintf(agent->store_endpoint, sizeof agent->store_endpoint,
             strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
    elastic_store_opts client_opts;
    elastic_store_opts_init(&client_opts, sizeof client_opts);
    client_opts.token = agent->token;
    if (agent->conf.read_timeout_ms > 0) client_opts.timeout_ms = agent->conf.read_timeout_ms;
    return elastic_store_connect(agent->store_endpoint, &client_opts, &agent->store);
}

/* ---- membership ------------------------------------------------------------------ */

/* etcd's password: password_file (first line) or ELASTIC_ETCD_PASSWORD, never a flag. */
static int read_etcd_password(elastic_agent *agent)
{
    const char *path = agent->conf.password_file;
    if (path[0] == '\0') {
        const char *env = getenv("ELASTIC_ETCD_PASSWORD");
        if (env == NULL)
            return elastic__fail(ELASTIC_EINVAL,
                                 "etcd user given without password_file or ELASTIC_ETCD_PASSWORD");
        if (strlen(env) >= sizeof agent->etcd_password)
            return elastic__fail(ELASTIC_EINVAL, "ELASTIC_ETCD_PASSWORD is too long");
        snprintf(agent->etcd_password, sizeof agent->etcd_password, "%s", env);
        return 0;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return elastic__fail(elastic__from_errno(errno), "password_file %s: %s", path,
                             strerror(errno));
    ssize_t n = read(fd, agent->etcd_password, sizeof agent->etcd_password - 1);
    close(fd);
    if (n < 0) return elastic__fail(ELASTIC_EIO, "password_file %s: %s", path, strerror(errno));
    agent->etcd_password[n] = '\0';
    agent->etcd_password[strcspn(agent->etcd_password, "\r\n")] = '\0';
    if (agent->etcd_password[0] == '\0')
        return elastic__fail(ELASTIC_EINVAL, "password_file %s is empty", path);
    return 0;
}

static int setup_membership(elastic_agent *agent)
{
    const elastic_agent_opts *o = &agent->opts;
    if (local_only(agent))
        return agent__membership_local(o->nproc_per_node, o->max_restarts, node_address(agent),
                                       &agent->membership);
    elastic_rdzv_opts rdzv_opts;
    elastic_rdzv_opts_init(&rdzv_opts, sizeof rdzv_opts);
    rdzv_opts.run_id = agent->run_id;
    rdzv_opts.store = agent->store;
    rdzv_opts.min_nodes = o->min_nodes;
    rdzv_opts.max_nodes = o->max_nodes;
    rdzv_opts.max_restarts = o->max_restarts;
    rdzv_opts.local_world_size = o->nproc_per_node;
    rdzv_opts.node_addr = o->local_addr; /* NULL: the host name */
    rdzv_opts.node_id = agent->node_id;
    rdzv_opts.preferred_rank = o->preferred_rank;
    rdzv_opts.max_infra_restarts = o->max_infra_restarts;
    const agent_rdzv_conf *conf = &agent->conf;
    if (conf->join_timeout_ms > 0) rdzv_opts.join_timeout_ms = conf->join_timeout_ms;
    if (conf->last_call_timeout_ms >= 0)
        rdzv_opts.last_call_timeout_ms = conf->last_call_timeout_ms;
    if (conf->keep_alive_interval_ms > 0)
        rdzv_opts.keepalive_interval_ms = conf->keep_alive_interval_ms;
    if (rdzv_opts.keepalive_interval_ms < 100) rdzv_opts.keepalive_interval_ms = 100;
    /* On etcd the lease must outlast a leader election: no leader expires
     * it meanwhile, but a node whose keep-alives find no leader for its TTL
     * fences (etcd's default election timeout is 1 s; elections after a
     * leader's SIGKILL took 1.1-2.5 s here). 10 x 0.5 s, where the store's
     * own lease, tied to its connection, is 4 x 0.5 s (docs/RDZV.md). */
    int attempts = conf->keep_alive_max_attempt > 0 ? conf->keep_alive_max_attempt
                   : on_etcd(agent)                 ? AGENT_ETCD_KEEP_ALIVE_ATTEMPTS
                                                    : 4;
    if (conf->keep_alive_interval_ms > 0 || conf->keep_alive_max_attempt > 0 || on_etcd(agent))
        rdzv_opts.keepalive_timeout_ms = rdzv_opts.keepalive_interval_ms * attempts;
    if (!on_etcd(agent))
        return agent__membership_rdzv(&rdzv_opts, agent__group_on_change, &agent->group,
                                      &agent->membership);
    rdzv_opts.store = NULL;
    rdzv_opts.backend = ELASTIC_RDZV_BACKEND_ETCD;
    rdzv_opts.etcd_endpoints = o->rdzv_endpoint;
    rdzv_opts.etcd_prefix = conf->etcd_prefix[0] != '\0' ? conf->etcd_prefix : NULL;
    rdzv_opts.etcd_ca_file = conf->cacert[0] != '\0' ? conf->cacert : NULL;
    rdzv_opts.etcd_cert_file = conf->cert[0] != '\0' ? conf->cert : NULL;
    rdzv_opts.etcd_key_file = conf->key[0] != '\0' ? conf->key : NULL;
    rdzv_opts.etcd_user = conf->user[0] != '\0' ? conf->user : NULL;
    if (conf->read_timeout_ms > 0) rdzv_opts.etcd_timeout_ms = conf->read_timeout_ms;
    if (rdzv_opts.etcd_user != NULL) {
        int rc = read_etcd_password(agent);
        if (rc != 0) return rc;
        rdzv_opts.etcd_password = agent->etcd_password;
    }
    /* The generation's store host must publish within a few keep-alive timeouts. */
    agent->jobstore.lookup_timeout_ms = 3 * rdzv_opts.keepalive_timeout_ms + 2000;
    return agent__membership_etcd(&rdzv_opts, &agent->jobstore, agent__group_on_change,
                                  &agent->group, &agent->membership);
}

/* ---- a store host outlives its own workers ---------------------------------------- */

typedef struct closed_watch {
    elastic_rdzv *rdzv; /* the rendezvous knows where its backend marks the end */
    int stop;           /* atomic */
    int done;           /* atomic */
    uv_async_t *wake;
} closed_watch;

/* Waits, a second at a time (so stop is seen), until the rendezvous says the
 * job ended (every node finished, or its budget ran out). */
static void closed_watch_main(void *arg)
{
    closed_watch *watch = arg;
    while (!__atomic_load_n(&watch->stop, __ATOMIC_ACQUIRE))
        if (rdzv__wait_closed(watch->rdzv, 1000) != ELASTIC_ETIMEDOUT) break;
    __atomic_store_n(&watch->done, 1, __ATOMIC_RELEASE);
    uv_async_send(watch->wake);
}

static int outcome_timeout_ms(const elastic_agent *agent)
{
    return agent->conf.outcome_timeout_ms >= 0 ? agent->conf.outcome_timeout_ms
                                               : AGENT_OUTCOME_TIMEOUT_MS;
}

/* c10d: every node but the host marks itself as owed the outcome (outcome.h). */
static void owe_outcome(elastic_agent *agent)
{
    if (agent->server != NULL || local_only(agent) || on_etcd(agent) || agent->store == NULL ||
        outcome_timeout_ms(agent) == 0)
        return;
    if (agent__outcome_owe(agent->store_endpoint, agent->token, agent->run_id, agent->node_id,
                           outcome_timeout_ms(agent), &agent->outcome) != 0)
        ELASTIC_LOG_W("agent",
                      "%s: if this node is cut off as the job ends, the store's host will not "
                      "wait for it to learn how the job ended",
                      elastic_last_error());
}

typedef struct settled_watch {
    elastic_store *store;
    const char *run_id;
    int timeout_ms;
    int stop; /* atomic */
    int done; /* atomic */
    int rc;
    char error[300];
    uv_async_t *wake;
} settled_watch;

static void settled_watch_main(void *arg)
{
    settled_watch *watch = arg;
    watch->rc =
        agent__outcome_wait_settled(watch->store, watch->run_id, watch->timeout_ms, &watch->stop);
    if (watch->rc != 0) snprintf(watch->error, sizeof watch->error, "%s", elastic_last_error());
    __atomic_store_n(&watch->done, 1, __ATOMIC_RELEASE);
    uv_async_send(watch->wake);
}

/* Serving ends on the next stop request after the serving began. */
static bool told_to_leave(const elastic_agent *agent, unsigned stops)
{
    return __atomic_load_n(&agent->group.queue.stop_requests, __ATOMIC_ACQUIRE) != stops;
}

/* c10d's host: the job is over here; serve until every other node learned
 * how it ended (its outcome mark is gone), for at most timeout_ms, or until
 * told to stop. */
static void serve_until_settled(elastic_agent *agent, unsigned stops, int timeout_ms)
{
    settled_watch watch = { .store = agent->store,
                            .run_id = agent->run_id,
                            .timeout_ms = timeout_ms,
                            .wake = &agent->group.queue.wake };
    uv_thread_t thread;
    if (watch.store == NULL || watch.timeout_ms == 0 ||
        uv_thread_create(&thread, settled_watch_main, &watch) != 0)
        return;
    uint64_t started = elastic__now_ms();
    while (!__atomic_load_n(&watch.done, __ATOMIC_ACQUIRE) && !told_to_leave(agent, stops))
        uv_run(&agent->loop, UV_RUN_ONCE);
    __atomic_store_n(&watch.stop, 1, __ATOMIC_RELEASE);
    uv_thread_join(&thread);
    if (watch.rc != 0 && !told_to_leave(agent, stops))
        ELASTIC_LOG_W("agent", "stopped serving the job's store after %.1f s: %s",
                      (double)(elastic__now_ms() - started) / 1000.0, watch.error);
    else if (elastic__now_ms() - started >= 1000)
        ELASTIC_LOG_I("agent", "every node learned how the job ended after %.1f s",
                      (double)(elastic__now_ms() - started) / 1000.0);
}

static void on_serve_timer(uv_timer_t *timer)
{
    *(bool *)timer->data = true;
}

/* Every node learned how the job ended, or is gone: serve close_timeout
 * more (default 2 s) for a read still in flight, or until told to stop. */
static void serve_a_while(elastic_agent *agent, unsigned stops)
{
    bool expired = false;
    uv_timer_t timer;
    uv_timer_init(&agent->loop, &timer);
    timer.data = &expired;
    int ms = agent->conf.close_timeout_ms >= 0 ? agent->conf.close_timeout_ms : 2000;
    uv_timer_start(&timer, on_serve_timer, (uint64_t)ms, 0);
    while (!expired && !told_to_leave(agent, stops)) uv_run(&agent->loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&timer, NULL);
    uv_run(&agent->loop, UV_RUN_NOWAIT);
}

/* This node's workers all succeeded, but it hosts the store the other nodes
 * still use: serve until the job closes or we are told to stop. */
static void serve_until_closed(elastic_agent *agent, unsigned stops)
{
    closed_watch watch = { .rdzv = agent__membership_handle(agent->membership),
                           .wake = &agent->group.queue.wake };
    uv_thread_t thread;
    if (watch.rdzv == NULL || uv_thread_create(&thread, closed_watch_main, &watch) != 0) return;
    ELASTIC_LOG_I("agent", "workers done; serving the job's store until every node has finished");
    while (!__atomic_load_n(&watch.done, __ATOMIC_ACQUIRE) && !told_to_leave(agent, stops))
        uv_run(&agent->loop, UV_RUN_ONCE);
    __atomic_store_n(&watch.stop, 1, __ATOMIC_RELEASE);
    uv_thread_join(&thread);
}

/* ---- log directories ------------------------------------------------------------- */

/* The log root: <--log-dir>/<run_id> (a private directory of ours inside
 * the user's), else a fresh temporary one. */
static int setup_log_root(elastic_agent *agent)
{
    if (agent->opts.log_dir != NULL) {
        snprintf(agent->log_root, sizeof agent->log_root, "%s/%s", agent->opts.log_dir,
                 agent->run_id);
        agent->group.job.write_logs = true;
        int parent = -1;
        int rc = agent__dir_open_user(agent->opts.log_dir, &parent);
        if (rc == 0) rc = agent__dir_private(parent, agent->run_id, &agent->log_root_fd);
        if (parent >= 0) close(parent);
        if (rc != 0) {
            char detail[512];
            snprintf(detail, sizeof detail, "%s", elastic_last_error());
            return elastic__fail(rc, "--log-dir %s: %s", agent->opts.log_dir, detail);
        }
        return 0;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(agent->log_root, sizeof agent->log_root, "%s/elasticrun-%s-XXXXXX",
             tmp && *tmp ? tmp : "/tmp", agent->run_id);
    if (mkdtemp(agent->log_root) == NULL)
        return elastic__fail(elastic__from_errno(errno), "mkdtemp %s: %s", agent->log_root,
                             strerror(errno));
    agent->log_root_fd = open(agent->log_root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (agent->log_root_fd < 0)
        return elastic__fail(elastic__from_errno(errno), "%s: %s", agent->log_root,
                             strerror(errno));
    int redirects = 0, tee = 0;
    agent__std_parse(agent->opts.redirects, 0, &redirects);
    agent__std_parse(agent->opts.tee, 0, &tee);
    /* Without --log-dir only error files land here, and go with the agent;
     * redirected output is kept for the user to read. */
    agent->log_root_is_temporary = strchr(agent->opts.redirects, ':') == NULL &&
                                   strchr(agent->opts.tee, ':') == NULL && redirects == 0 &&
                                   tee == 0;
    if (!agent->log_root_is_temporary) ELASTIC_LOG_W("agent", "worker logs in %s", agent->log_root);
    return 0;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st, (void)type, (void)ftw;
    remove(path);
    return 0;
}

/* ---- public API -------------------------------------------------------------------- */

static int validate(const elastic_agent_opts *o)
{
    if (o->argc < 1 || o->argv == NULL)
        return elastic__fail(ELASTIC_EINVAL, "no training program given");
    if (o->nproc_per_node < 1 || o->min_nodes < 1 || o->max_nodes < o->min_nodes ||
        o->max_restarts < 0 || o->max_infra_restarts < 0 || o->grace_period_ms < 0 || o->role == NULL || o->run_id == NULL ||
        o->redirects == NULL || o->tee == NULL || o->rdzv_backend == NULL ||
        o->rdzv_endpoint == NULL)
        return elastic__fail(ELASTIC_EINVAL, "invalid agent options");
    if (!o->standalone && elastic__check_run_id(o->run_id, "agent") != 0) return ELASTIC_EINVAL;
    int mask;
    if (agent__std_parse(o->redirects, 0, &mask) != 0 || agent__std_parse(o->tee, 0, &mask) != 0)
        return elastic__fail(ELASTIC_EINVAL, "invalid --redirects/--tee: %s", elastic_last_error());
    if (o->preferred_rank < -1 || o->preferred_rank >= 100000)
        return elastic__fail(ELASTIC_EINVAL, "preferred_rank %d is not -1 or 0..99999",
                             o->preferred_rank);
    if (o->node_name != NULL &&
        (o->node_name[0] == '\0' || strlen(o->node_name) > 120 ||
         strspn(o->node_name,
                "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
             strlen(o->node_name)))
        return elastic__fail(ELASTIC_EINVAL,
                             "node_name must be 1..120 characters of [A-Za-z0-9._-]");
    return agent__check_warm_spares(o);
}

/* The memory tier. Its replica channel is never open: it authenticates
 * with the job's token, else (etcd, a store run without a token file) with
 * the run's replica key from the rendezvous' key space; its receiver listens
 * on the node's address (the one its peers are told), and not at all in a
 * one-node job, where no peer can push or fetch. */
static int start_memory_tier(elastic_agent *agent)
{
    if (!agent->opts.memory_ckpt) return 0;
    if (local_only(agent)) return agent__memory_start(&agent->group, NULL, NULL);
    char key[RDZV_REPLICA_KEY_CHARS + 1];
    const char *use = agent->token;
    if (use == NULL) {
        int rc = rdzv__replica_key(agent__membership_handle(agent->membership), key, sizeof key);
        if (rc != 0) {
            char detail[256];
            snprintf(detail, sizeof detail, "%s", elastic_last_error());
            return elastic__fail(rc, "memory checkpoint tier: no replica key: %s", detail);
        }
        use = key;
    }
    int rc = agent__memory_start(&agent->group, use, node_address(agent));
    memset(key, 0, sizeof key);
    return rc;
}

static int setup(elastic_agent *agent)
{
    int rc = agent__rdzv_conf_parse(agent->opts.rdzv_conf, &agent->conf);
    if (rc != 0) {
        char detail[256];
        snprintf(detail, sizeof detail, "%s", elastic_last_error());
        return elastic__fail(rc, "--rdzv-conf: %s", detail);
    }
    if (agent->opts.standalone) {
        char hex[33];
        random_hex(hex, 16);
        snprintf(agent->run_id, sizeof agent->run_id, "%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8,
                 hex + 12, hex + 16, hex + 20);
    } else {
        snprintf(agent->run_id, sizeof agent->run_id, "%s", agent->opts.run_id);
    }
    snprintf(agent->hostname, sizeof agent->hostname, "node");
    gethostname(agent->hostname, sizeof agent->hostname - 1);
    /* Under Slurm the node is named as Slurm names it (SLURMD_NODENAME). */
    snprintf(agent->node_id, sizeof agent->node_id, "%s-%d",
             agent->opts.node_name != NULL ? agent->opts.node_name : agent->hostname,
             (int)getpid());
    if ((rc = uv_loop_init(&agent->loop)) != 0)
        return elastic__fail(ELASTIC_ESYS, "uv_loop_init: %s", uv_strerror(rc));
    agent->loop_ready = true;
    if ((rc = agent__group_init(&agent->group, &agent->loop)) != 0) return rc;
    agent->group_ready = true;
    choose_node_address(agent);
    if ((rc = setup_log_root(agent)) != 0 || (rc = setup_store(agent)) != 0 ||
        (rc = setup_membership(agent)) != 0 ||
        (rc = agent__events_open(agent->opts.event_log, agent->run_id, agent->node_id,
                                 &agent->events)) != 0)
        return rc;
    agent_group *group = &agent->group;
    group->job.opts = &agent->opts;
    group->membership = agent->membership;
    group->job.events = agent->events;
    /* Failure details are shared only between nodes; on etcd the store comes per generation. */
    group->store.client = local_only(agent) || on_etcd(agent) ? NULL : agent->store;
    group->store.jobstore = on_etcd(agent) ? &agent->jobstore : NULL;
    group->job.run_id = agent->run_id;
    group->job.node_id = agent->node_id;
    group->store.endpoint = agent->store_endpoint;
    group->job.log_root = agent->log_root;
    group->job.log_root_fd = agent->log_root_fd;
    owe_outcome(agent);
    if ((rc = agent__probes_start(group)) != 0) return rc;
    if ((rc = agent__health_start(group)) != 0) return rc; /* its first round runs now */
    if (agent->token != NULL) {
        /* Workers read the token from the agent's private run directory: it
         * never sits in their environment (nor their children's). */
        rc = agent__token_publish(agent__probes_dir(group), agent->token, agent->token_file,
                                  sizeof agent->token_file);
        if (rc != 0) return rc;
        group->store.token_file = agent->token_file;
    }
    group->job.node_addr = node_address(agent);
    if ((rc = start_memory_tier(agent)) != 0) return rc;
    return agent__reaper_start(group); /* after the run directory exists: it removes it */
}

ELASTIC_EXTERN int elastic_agent_create(const elastic_agent_opts *opts, elastic_agent **out)
{
    elastic__clear_error();
    if (out == NULL) return elastic__fail(ELASTIC_EINVAL, "elastic_agent_create: agent is NULL");
    *out = NULL;
    elastic_agent *agent = calloc(1, sizeof *agent);
    if (agent == NULL) return elastic__fail(ELASTIC_ENOMEM, "out of memory");
    agent->log_root_fd = -1;
    agent__opts_defaults(&agent->opts);
    int rc = ELASTIC__STRUCT_READ(&agent->opts, opts, "elastic_agent_opts");
    if (rc == 0) rc = validate(&agent->opts);
    if (rc == 0) rc = setup(agent);
    if (rc != 0) {
        char detail[512];
        snprintf(detail, sizeof detail, "%s", elastic_last_error());
        elastic_agent_free(agent);
        return elastic__fail(rc, "%s", detail);
    }
    agent__ev_agent_started(agent->events, &(agent_ev_agent_started){
                                               .nproc_per_node = agent->opts.nproc_per_node,
                                               .min_nodes = agent->opts.min_nodes,
                                               .max_nodes = agent->opts.max_nodes,
                                               .max_restarts = agent->opts.max_restarts,
                                               .store = agent->store_endpoint,
                                               .hosts_store = agent->server != NULL,
                                               .slurm_job = agent->opts.slurm_job,
                                               .slurm_node = agent->opts.node_name });
    __atomic_store_n(&agent->accepting_stop, 1, __ATOMIC_RELEASE);
    *out = agent;
    return 0;
}

ELASTIC_EXTERN int elastic_agent_run(elastic_agent *agent, elastic_agent_result *result)
{
    elastic__clear_error();
    if (agent == NULL || result == NULL)
        return elastic__fail(ELASTIC_EINVAL, "elastic_agent_run: NULL argument");
    int rc = elastic__struct_size_check(result->struct_size, "elastic_agent_result");
    if (rc != 0) return rc;
    if (agent->ran) return elastic__fail(ELASTIC_ESTATE, "elastic_agent_run: an agent runs once");
    agent->ran = true;
    if (!agent->opts.quiet)
        agent__python_start_line(&agent->opts, agent->run_id); /* a console line too */
    agent__group_start(&agent->group);
    while (!agent__group_is_done(&agent->group)) uv_run(&agent->loop, UV_RUN_ONCE);
    bool hosting = agent->server != NULL || agent__jobstore_hosting(&agent->jobstore);
    unsigned stops = __atomic_load_n(&agent->group.queue.stop_requests, __ATOMIC_ACQUIRE);
    if (hosting && !local_only(agent) && agent->group.m.stop_signal == 0) {
        /* Closed, the store still serves until every node learned the
         * outcome: a node that was cut off or waiting as a spare reads that
         * the job succeeded (left out, exit 0) instead of finding the store
         * gone. */
        if (agent->group.m.exit_code == 0) serve_until_closed(agent, stops);
        if (agent->server != NULL) serve_until_settled(agent, stops, outcome_timeout_ms(agent));
        serve_a_while(agent, stops);
    } else if (agent->server != NULL && !local_only(agent)) {
        /* Stopped (scancel signals every node at once): the other nodes'
         * ranks may still be committing their notice saves through this
         * store. Serve until each node left (its mark goes with its agent),
         * for at most the grace their workers get to save, since a node that
         * was not stopped keeps its mark; a second stop leaves now. */
        int grace_ms = agent->opts.grace_period_ms, outcome_ms = outcome_timeout_ms(agent);
        serve_until_settled(agent, stops, grace_ms < outcome_ms ? grace_ms : outcome_ms);
    }
    elastic_agent_result full = { .struct_size = sizeof full };
    agent__outcome_settled(&agent->outcome); /* this node knows it: the host need not wait */
    full.exit_code = agent->group.m.exit_code;
    full.generations = agent->group.m.generations;
    full.restarts = agent->group.current.restart_count;
    snprintf(full.summary, sizeof full.summary, "%s", agent->group.summary);
    return ELASTIC__STRUCT_WRITE(result, &full, "elastic_agent_result");
}

ELASTIC_EXTERN void elastic_agent_request_stop(elastic_agent *agent, int signum)
{
    if (agent != NULL && __atomic_load_n(&agent->accepting_stop, __ATOMIC_ACQUIRE))
        agent__group_request_stop(&agent->group, signum);
}

static void close_any(uv_handle_t *handle, void *arg)
{
    (void)arg;
    if (!uv_is_closing(handle)) uv_close(handle, NULL);
}

ELASTIC_EXTERN void elastic_agent_free(elastic_agent *agent)
{
    if (agent == NULL) return;
    __atomic_store_n(&agent->accepting_stop, 0, __ATOMIC_RELEASE);
    if (agent->group_ready) {
        agent__health_stop(&agent->group); /* its thread posts to the group: stopped first */
        agent__workers_signal(&agent->group, SIGKILL, false); /* only if the run ended abnormally */
        if (!agent__group_close(&agent->group)) {
            ELASTIC_LOG_I("agent",
                          "leaving with a rendezvous in flight; the process should exit now");
            pthread_mutex_lock(&abandoned_lock); /* its thread still uses the agent: keep it all */
            agent->next_abandoned = abandoned_agents;
            abandoned_agents = agent;
            pthread_mutex_unlock(&abandoned_lock);
            return;
        }
    }
    if (agent->token_file[0] != '\0') unlink(agent->token_file); /* before its directory goes */
    if (agent->group_ready) agent__memory_stop(&agent->group);   /* frees the tier's memory */
    if (agent->group_ready)
        agent__probes_stop(&agent->group); /* its handles close with their callbacks */
    if (agent->loop_ready) {
        uv_walk(&agent->loop, close_any, NULL);
        uv_run(&agent->loop, UV_RUN_DEFAULT);
        uv_loop_close(&agent->loop);
    }
    agent__jobstore_close(
        &agent->jobstore); /* its watcher uses the membership and the group's store */
    if (agent->membership != NULL) agent->membership->ops->destroy(agent->membership);
    agent__outcome_settled(&agent->outcome); /* a run that never ran, or was left */
    elastic_store_close(agent->store);
    if (on_etcd(agent) && agent->group_ready) elastic_store_close(agent->group.store.client);
    elastic_store_server_close(agent->server);
    memset(agent->etcd_password, 0, sizeof agent->etcd_password);
    agent__events_close(agent->events);
    if (agent->group_ready) agent__reaper_stop(&agent->group); /* last: it removes what is left */
    if (agent->log_root_is_temporary) nftw(agent->log_root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (agent->log_root_fd >= 0) close(agent->log_root_fd);
    /* Last: the membership's threads (the rdzv guard's fence news) post to
     * the group under its lock until the membership is destroyed above. */
    if (agent->group_ready) agent__group_destroy(&agent->group);
    agent__token_free(agent->token);
    free(agent);
}
