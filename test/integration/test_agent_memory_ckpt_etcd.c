/*
 * The memory tier's replica channel on etcd with the defaults users get (no
 * token file, where each generation's store has a random token of its own):
 * it still authenticates, with the run's replica key kept under the job's
 * prefix in etcd. A client without the key is refused before any request
 * (so it can neither read, push nor fill), the receiver listens on the
 * node's address (--local-addr), not on every interface, and replication
 * and the job-wide memory commit go on between the agents that hold it.
 */
#include "support/agent_harness.h"
#include "support/elasticrun_args.h"
#include "support/etcd_fixture.h"
#include "support/metrics_page.h"
#include "common/clock.h"
#include "common/http.h"
#include "replica/replica.h"
#include "test.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_LISTENERS 16

typedef struct listener {
    char addr[48]; /* "0100007F" (IPv4, as /proc/net/tcp writes it) or 32 hex digits */
    int port;
} listener;

/* Whether /proc/<pid>/fd has a link to socket:[inode]. */
static bool owns_socket(pid_t pid, unsigned long inode)
{
    char dir[64], link[128], target[64], want[48];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    snprintf(want, sizeof want, "socket:[%lu]", inode);
    DIR *d = opendir(dir);
    bool found = false;
    for (struct dirent *e; d != NULL && !found && (e = readdir(d)) != NULL;) {
        snprintf(link, sizeof link, "%s/%.20s", dir, e->d_name);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n <= 0) continue;
        target[n] = '\0';
        found = strcmp(target, want) == 0;
    }
    if (d) closedir(d);
    return found;
}

/* The TCP sockets process `pid` listens on. */
static int listeners_of(pid_t pid, listener *out, int max)
{
    int n = 0;
    const char *tables[] = { "/proc/net/tcp", "/proc/net/tcp6" };
    for (int t = 0; t < 2; t++) {
        FILE *f = fopen(tables[t], "re");
        char line[512];
        if (f == NULL) continue;
        if (fgets(line, sizeof line, f) == NULL) { /* the header */
            fclose(f);
            continue;
        }
        while (n < max && fgets(line, sizeof line, f) != NULL) {
            char local[48], state[8];
            unsigned long inode;
            if (sscanf(line, "%*d: %47s %*s %7s %*s %*s %*s %*s %*s %lu", local, state, &inode) !=
                3)
                continue;
            char *colon = strchr(local, ':');
            if (strcmp(state, "0A") != 0 || colon == NULL || !owns_socket(pid, inode)) continue;
            *colon = '\0';
            snprintf(out[n].addr, sizeof out[n].addr, "%s", local);
            out[n].port = (int)strtol(colon + 1, NULL, 16);
            n++;
        }
        fclose(f);
    }
    return n;
}

/* The handshake with `key` against a port: 0 accepted; else why not. */
static int handshake(int port, const char *key)
{
    replica_conn *c = NULL;
    uint64_t deadline = elastic__deadline_ms(5000);
    int rc = replica__tcp_connect("127.0.0.1", port, deadline, &c);
    if (rc == 0) rc = replica__auth_client(c, key, deadline);
    replica__close(c);
    return rc;
}

static double metric(const char *where, const char *name, const char *kind)
{
    elastic__text page = { 0 };
    elastic__text_init(&page, 1 << 22);
    int status = 0;
    double v = -1;
    if (elastic__http_get(where, "/metrics", 5000, &page, &status) == 0 && status == 200)
        v = metrics_sample(page.data, name, kind ? "kind" : NULL, kind);
    elastic__text_free(&page);
    return v;
}

TEST_TIMEOUT(agent_memory_ckpt_on_etcd_refuses_a_client_without_the_replica_key, 180)
{
    etcd_cluster c;
    etcd_cluster_start(&c, 1);
    pid_t agents[2];
    char trainer[1024];
    snprintf(trainer, sizeof trainer, "%s", test_example_path("demo_trainer"));
    for (int i = 0; i < 2; i++) {
        char name[32], dir[512], ckpt[600];
        snprintf(name, sizeof name, "etcd-mem-%d", i);
        agent_harness_path(dir, sizeof dir, name);
        mkdir(dir, 0755);
        snprintf(ckpt, sizeof ckpt, "%s/ckpt", dir);
        mkdir(ckpt, 0755);
        elasticrun_args cmd;
        elasticrun_args_init(&cmd);
        /* No --rdzv-conf: no token file, the defaults users get. */
        elasticrun_args_add(&cmd, "--nnodes", "2:2", "--nproc-per-node", "1", "--rdzv-backend",
                            "etcd", "--rdzv-endpoint", c.endpoints, "--rdzv-id", "etcd-memory-key",
                            "--local-addr", "127.0.0.1", "--memory-ckpt", "--memory-ckpt-limit",
                            "64M");
        if (i == 0) elasticrun_args_add(&cmd, "--metrics-port", "0");
        elasticrun_args_add(&cmd, "--no-python", trainer, "--ckpt-dir", ckpt, "--steps", "3000",
                            "--step-ms", "20", "--ckpt-every", "100000", "--memory-every", "1",
                            "--state-mib", "1");
        agents[i] = elasticrun_args_spawn(&cmd, NULL, name);
    }
    char err[600], where[64];
    snprintf(err, sizeof err, "%s/etcd-mem-0.err", test_tmpdir());
    metrics_endpoint_from(err, 60000, where, sizeof where);
    /* The agents that hold the key replicate and memory-commit. */
    uint64_t deadline = elastic__deadline_ms(test_scaled_ms(90000));
    double committed = -1;
    while (elastic__ms_left(deadline) > 0 &&
           (committed = metric(where, "elastic_memory_ckpt_step", "committed")) < 5)
        usleep(100000); /* the job's progress, not a synchronisation */
    if (committed < 5) FAIL("no step memory-committed in time (%g)", committed);
    ASSERT(metric(where, "elastic_memory_ckpt_replica_files_received_total", NULL) > 0);
    /* Every socket the agents listen on: the replica receiver is the one
     * that answers the replica handshake, and it takes no client without
     * the key (neither none nor a wrong one). */
    int receivers = 0;
    for (int a = 0; a < 2; a++) {
        listener ls[MAX_LISTENERS];
        int n = listeners_of(agents[a], ls, MAX_LISTENERS);
        for (int i = 0; i < n; i++) {
            int wrong = handshake(ls[i].port, "not-the-key");
            int none = handshake(ls[i].port, NULL);
            if (wrong == 0 || none == 0)
                FAIL("agent %d port %d took a client without the replica key", a, ls[i].port);
            if (wrong != ELASTIC_EAUTH) continue; /* not the replica channel */
            receivers++;
            /* 127.0.0.1, as --local-addr said: not 0.0.0.0 (nor ::). */
            ASSERT_STR_EQ(ls[i].addr, "0100007F");
        }
    }
    ASSERT_EQ(receivers, 2);
    /* The refusals cost the job nothing: it goes on committing. */
    double later = committed;
    deadline = elastic__deadline_ms(test_scaled_ms(30000));
    while (elastic__ms_left(deadline) > 0 &&
           (later = metric(where, "elastic_memory_ckpt_step", "committed")) <= committed)
        usleep(100000);
    ASSERT(later > committed);
    for (int i = 0; i < 2; i++) kill(agents[i], SIGTERM);
    for (int i = 0; i < 2; i++) {
        int status;
        ASSERT(agent_harness_wait_exit(agents[i], 30000, &status));
    }
    etcd_cluster_stop(&c);
}
