/*
 * A real etcd for the tests: one member or a cluster of three, started on
 * free loopback ports with data directories from mkdtemp, killed when the
 * test ends (the runner also kills the test's process group on failure).
 * Tests skip, saying why, when the etcd binary is not installed.
 */
#ifndef ELASTIC_TEST_ETCD_FIXTURE_H
#define ELASTIC_TEST_ETCD_FIXTURE_H

#include "test.h"

#include "etcd/curl_loader.h" /* libcurl, loaded as the library loads it */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#define ETCD_FIXTURE_MAX 3

typedef struct etcd_member {
    pid_t pid; /* 0: not running */
    uid_t uid; /* runs as this user (0: root); set before the start (etcd_member_cut_off) */
    int client_port, peer_port;
    char name[16];
    char dir[600];
    uint64_t member_id; /* etcd's id, learned once it answers */
} etcd_member;

typedef struct etcd_cluster {
    int n;
    etcd_member m[ETCD_FIXTURE_MAX];
    char endpoints[256]; /* "127.0.0.1:p1,127.0.0.1:p2,..." */
    char initial[1024];  /* --initial-cluster */
    bool tls;            /* https with client certificates (etcd_cluster_start_tls) */
    bool etcd_timing;    /* etcd's own heartbeat (100 ms) and election timeout (1 s), not the
                            fixture's faster 50/500 ms (etcd_cluster_start_defaults) */
    char cut_chain[32];  /* the iptables chain of a member cut off (etcd_member_cut_off) */
    char ca[600], server_cert[600], server_key[600], client_cert[600], client_key[600];
} etcd_cluster;

static inline uint64_t etcd_fixture_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static inline const char *etcd_fixture_binary(void)
{
    static char path[512];
    const char *dirs[] = { "/usr/bin", "/usr/local/bin", "/usr/sbin", NULL };
    for (int i = 0; dirs[i] != NULL; i++) {
        snprintf(path, sizeof path, "%s/etcd", dirs[i]);
        if (access(path, X_OK) == 0) return path;
    }
    return NULL;
}

/* n distinct free loopback ports: every socket stays bound until all are picked. */
static inline void etcd_fixture_ports(int *ports, int n)
{
    int fds[2 * ETCD_FIXTURE_MAX];
    for (int i = 0; i < n; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in addr = { .sin_family = AF_INET,
                                    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof addr;
        if (fds[i] < 0 || bind(fds[i], (struct sockaddr *)&addr, sizeof addr) != 0 ||
            getsockname(fds[i], (struct sockaddr *)&addr, &len) != 0)
            FAIL("cannot pick a free port: %s", strerror(errno));
        ports[i] = ntohs(addr.sin_port);
    }
    for (int i = 0; i < n; i++) close(fds[i]);
}

/* A curl handle for `path` on the member at `port`, TLS as the cluster
 * speaks it, with a deadline (NULL: libcurl cannot be had). */
static inline CURL *etcd_fixture_curl(const etcd_cluster *c, int port, const char *path,
                                      int timeout_ms)
{
    char why[256];
    if (etcd__curl_load(why, sizeof why) != 0) return NULL;
    CURL *h = etcd__curl.easy_init();
    if (h == NULL) return NULL;
    char url[128];
    snprintf(url, sizeof url, "%s://127.0.0.1:%d%s", c->tls ? "https" : "http", port, path);
    if (c->tls) {
        etcd__curl.easy_setopt(h, CURLOPT_CAINFO, c->ca);
        etcd__curl.easy_setopt(h, CURLOPT_SSLCERT, c->client_cert);
        etcd__curl.easy_setopt(h, CURLOPT_SSLKEY, c->client_key);
    }
    etcd__curl.easy_setopt(h, CURLOPT_URL, url);
    etcd__curl.easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    etcd__curl.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    return h;
}

/* POSTs body to a member's gateway; the reply parsed (NULL: no answer). */
static inline json_object *etcd_fixture_post(const etcd_cluster *c, int port, const char *path,
                                             const char *body, int timeout_ms)
{
    static char buf[65536];
    size_t len = 0;
    CURL *h = etcd_fixture_curl(c, port, path, timeout_ms);
    if (h == NULL) return NULL;
    etcd__curl.easy_setopt(h, CURLOPT_POSTFIELDS, body);
    FILE *out = fmemopen(buf, sizeof buf - 1, "w");
    etcd__curl.easy_setopt(h, CURLOPT_WRITEDATA, out);
    CURLcode rc = etcd__curl.easy_perform(h);
    len = (size_t)ftell(out);
    fclose(out);
    etcd__curl.easy_cleanup(h);
    if (rc != CURLE_OK) return NULL;
    buf[len < sizeof buf ? len : sizeof buf - 1] = '\0';
    return json_tokener_parse(buf);
}

/* delay_proxy (no delay) in front of a member's client port; *port: where it
 * listens. http1: it passes HTTP/1.x only (the JSON gateway), no gRPC. */
static inline pid_t etcd_fixture_proxy(int target_port, bool http1, int *port)
{
    int fds[2];
    if (pipe(fds) != 0) FAIL("pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) FAIL("fork: %s", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
        dup2(fds[1], 1);
        close(fds[0]);
        char target[16];
        snprintf(target, sizeof target, "%d", target_port);
        execl(test_helper_path("delay_proxy"), "delay_proxy", "127.0.0.1", "0", "127.0.0.1", target,
              "0", http1 ? "http1" : (char *)NULL, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    FILE *out = fdopen(fds[0], "r");
    char line[64] = "";
    if (out == NULL || fgets(line, sizeof line, out) == NULL ||
        sscanf(line, "listening %d", port) != 1)
        FAIL("delay_proxy did not say where it listens");
    fclose(out);
    return pid;
}

/* The sum of a metric's samples on a member's /metrics whose labels hold
 * `label` (e.g. "grpc_method=\"LeaseKeepAlive\""); -1 when it does not answer. */
static inline double etcd_fixture_metric(const etcd_cluster *c, int i, const char *name,
                                         const char *label)
{
    static char page[1 << 20];
    CURL *h = etcd_fixture_curl(c, c->m[i].client_port, "/metrics", 5000);
    if (h == NULL) return -1;
    FILE *out = fmemopen(page, sizeof page - 1, "w");
    etcd__curl.easy_setopt(h, CURLOPT_WRITEDATA, out);
    CURLcode rc = etcd__curl.easy_perform(h);
    size_t len = (size_t)ftell(out);
    fclose(out);
    etcd__curl.easy_cleanup(h);
    if (rc != CURLE_OK) return -1;
    page[len < sizeof page ? len : sizeof page - 1] = '\0';
    double sum = 0;
    size_t name_len = strlen(name);
    for (char *line = page, *next; line != NULL && *line != '\0'; line = next) {
        next = strchr(line, '\n');
        if (next != NULL) *next++ = '\0';
        if (strncmp(line, name, name_len) != 0 || line[name_len] != '{' || strstr(line, label) == NULL)
            continue;
        const char *value = strrchr(line, ' ');
        if (value != NULL) sum += strtod(value + 1, NULL);
    }
    return sum;
}

static inline void etcd_member_spawn(etcd_cluster *c, int i, bool fresh)
{
    etcd_member *m = &c->m[i];
    char client[64], peer[64], log_path[700], token[64];
    snprintf(client, sizeof client, "%s://127.0.0.1:%d", c->tls ? "https" : "http", m->client_port);
    snprintf(peer, sizeof peer, "http://127.0.0.1:%d", m->peer_port);
    /* The lengths are checked (and so known to GCC: unchecked, it warns of
     * truncation where ASan's -O1 inlines this into a test). */
    if (snprintf(log_path, sizeof log_path, "%s/etcd.log", m->dir) >= (int)sizeof log_path)
        FAIL("etcd member directory too long: %s", m->dir);
    snprintf(token, sizeof token, "elastic-test-%d", (int)getpid());
    pid_t parent = getpid();
    if (m->uid != 0 && chown(m->dir, m->uid, (gid_t)-1) != 0)
        FAIL("chown %s: %s", m->dir, strerror(errno));
    pid_t pid = fork();
    if (pid < 0) FAIL("fork: %s", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
        if (getppid() != parent) _exit(1);
        int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
        if (m->uid != 0 && (setgid(65534) != 0 || setuid(m->uid) != 0)) _exit(126);
        char data[700];
        if (snprintf(data, sizeof data, "%s/data", m->dir) >= (int)sizeof data) _exit(126);
        if (c->tls)
            execl(etcd_fixture_binary(), "etcd", "--name", m->name, "--data-dir", data,
                  "--listen-client-urls", client, "--advertise-client-urls", client,
                  "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                  "--initial-cluster", c->initial, "--initial-cluster-state",
                  fresh ? "new" : "existing", "--initial-cluster-token", token, "--log-level",
                  "warn", "--cert-file", c->server_cert, "--key-file", c->server_key,
                  "--trusted-ca-file", c->ca, "--client-cert-auth", (char *)NULL);
        else if (c->etcd_timing)
            execl(etcd_fixture_binary(), "etcd", "--name", m->name, "--data-dir", data,
                  "--listen-client-urls", client, "--advertise-client-urls", client,
                  "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                  "--initial-cluster", c->initial, "--initial-cluster-state",
                  fresh ? "new" : "existing", "--initial-cluster-token", token, "--log-level",
                  "warn", (char *)NULL);
        else
            execl(etcd_fixture_binary(), "etcd", "--name", m->name, "--data-dir", data,
                  "--listen-client-urls", client, "--advertise-client-urls", client,
                  "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                  "--initial-cluster", c->initial, "--initial-cluster-state",
                  fresh ? "new" : "existing", "--initial-cluster-token", token,
                  "--heartbeat-interval", "50", "--election-timeout", "500", "--log-level", "warn",
                  (char *)NULL);
        _exit(127);
    }
    m->pid = pid;
}

/* Whether member i answers a read through the gateway (fills member_id). */
static inline bool etcd_member_ready(etcd_cluster *c, int i)
{
    json_object *reply =
        etcd_fixture_post(c, c->m[i].client_port, "/v3/kv/range", "{\"key\":\"AA==\"}", 1000);
    json_object *header = NULL, *id = NULL;
    bool ok = reply != NULL && json_object_object_get_ex(reply, "header", &header) &&
              json_object_object_get_ex(header, "member_id", &id);
    if (ok) c->m[i].member_id = strtoull(json_object_get_string(id), NULL, 10);
    json_object_put(reply);
    return ok;
}

static inline void etcd_cluster_wait_ready(etcd_cluster *c, int timeout_ms)
{
    uint64_t deadline = etcd_fixture_now_ms() + (uint64_t)test_scaled_ms(timeout_ms);
    for (int i = 0; i < c->n; i++) {
        while (c->m[i].pid != 0 && !etcd_member_ready(c, i)) {
            if (etcd_fixture_now_ms() > deadline)
                FAIL("etcd member %d did not answer in %d ms", i, timeout_ms);
            int status;
            if (waitpid(c->m[i].pid, &status, WNOHANG) == c->m[i].pid)
                FAIL("etcd member %d exited at start", i);
            struct timespec pause = { 0, 50 * 1000000L };
            nanosleep(&pause, NULL);
        }
    }
}

/* Starts n (1 or 3) members and waits until every one answers. */
static inline void etcd_cluster_launch(etcd_cluster *c, int n)
{
    if (etcd_fixture_binary() == NULL)
        SKIP("etcd is not installed (Debian: apt-get install etcd-server)");
    if (n < 1 || n > ETCD_FIXTURE_MAX) FAIL("etcd fixture: %d members (1..%d)", n, ETCD_FIXTURE_MAX);
    c->n = n;
    int ports[2 * ETCD_FIXTURE_MAX];
    etcd_fixture_ports(ports, 2 * n);
    size_t at = 0, eat = 0;
    for (int i = 0; i < n; i++) {
        etcd_member *m = &c->m[i];
        m->client_port = ports[2 * i];
        m->peer_port = ports[2 * i + 1];
        snprintf(m->name, sizeof m->name, "m%d", i);
        snprintf(m->dir, sizeof m->dir, "%s/etcd-m%d-XXXXXX", test_tmpdir(), i);
        if (mkdtemp(m->dir) == NULL) FAIL("mkdtemp: %s", strerror(errno));
        at += (size_t)snprintf(c->initial + at, sizeof c->initial - at, "%sm%d=http://127.0.0.1:%d",
                               i ? "," : "", i, m->peer_port); /* m->name is "m<i>" */
        eat += (size_t)snprintf(c->endpoints + eat, sizeof c->endpoints - eat, "%s127.0.0.1:%d",
                                i ? "," : "", m->client_port);
    }
    for (int i = 0; i < n; i++) etcd_member_spawn(c, i, true);
    etcd_cluster_wait_ready(c, 30000);
}

static inline void etcd_cluster_start(etcd_cluster *c, int n)
{
    memset(c, 0, sizeof *c);
    etcd_cluster_launch(c, n);
}

/* One member speaking https only to clients with a certificate from a CA
 * made for this test (openssl CLI; skipped without it). */
static inline void etcd_cluster_start_tls(etcd_cluster *c)
{
    memset(c, 0, sizeof *c);
    if (access("/usr/bin/openssl", X_OK) != 0) SKIP("openssl is not installed");
    char dir[560], script[4096];
    snprintf(dir, sizeof dir, "%.500s/pki", test_tmpdir());
    if (mkdir(dir, 0700) != 0) FAIL("mkdir %s: %s", dir, strerror(errno));
    snprintf(script, sizeof script,
             "set -e; cd '%s'\n"
             "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 -subj "
             "/CN=test-ca 2>/dev/null\n"
             "printf 'subjectAltName=IP:127.0.0.1\\n' > san.ext\n"
             "for who in server client; do\n"
             "  openssl req -newkey rsa:2048 -nodes -keyout $who.key -out $who.csr -subj /CN=$who "
             "2>/dev/null\n"
             "  openssl x509 -req -in $who.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out "
             "$who.pem -days 1 "
             "-extfile san.ext 2>/dev/null\n"
             "done\n",
             dir);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", script, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    uint64_t deadline = etcd_fixture_now_ms() + (uint64_t)test_scaled_ms(60000);
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (etcd_fixture_now_ms() > deadline) {
            kill(pid, SIGKILL);
            FAIL("making test certificates took too long");
        }
        struct timespec pause = { 0, 20 * 1000000L };
        nanosleep(&pause, NULL);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        FAIL("openssl could not make the test certificates");
    c->tls = true;
    snprintf(c->ca, sizeof c->ca, "%s/ca.pem", dir);
    snprintf(c->server_cert, sizeof c->server_cert, "%s/server.pem", dir);
    snprintf(c->server_key, sizeof c->server_key, "%s/server.key", dir);
    snprintf(c->client_cert, sizeof c->client_cert, "%s/client.pem", dir);
    snprintf(c->client_key, sizeof c->client_key, "%s/client.key", dir);
    etcd_cluster_launch(c, 1);
}

static inline void etcd_member_kill(etcd_cluster *c, int i)
{
    if (c->m[i].pid == 0) return;
    kill(c->m[i].pid, SIGKILL);
    waitpid(c->m[i].pid, NULL, 0);
    c->m[i].pid = 0;
}

/* The member that leads right now (-1: none known). */
static inline int etcd_cluster_leader(etcd_cluster *c)
{
    for (int i = 0; i < c->n; i++) {
        if (c->m[i].pid == 0) continue;
        json_object *reply = etcd_fixture_post(c, c->m[i].client_port, "/v3/maintenance/status",
                                               "{}", 1000),
                    *leader;
        uint64_t id = 0;
        if (reply != NULL && json_object_object_get_ex(reply, "leader", &leader))
            id = strtoull(json_object_get_string(leader), NULL, 10);
        json_object_put(reply);
        for (int j = 0; id != 0 && j < c->n; j++)
            if (c->m[j].member_id == id && c->m[j].pid != 0) return j;
    }
    return -1;
}

/* Three members with etcd's own timing (heartbeat 100 ms, election timeout
 * 1 s), as an operator runs it; member 0 runs as `nobody` so that it can be
 * cut off from the other two (etcd_member_cut_off). */
static inline void etcd_cluster_start_defaults(etcd_cluster *c)
{
    memset(c, 0, sizeof *c);
    c->etcd_timing = true;
    c->m[0].uid = 65534;
    /* nobody must reach its data directory: search permission on the way */
    char dir[600];
    snprintf(dir, sizeof dir, "%s", test_tmpdir());
    for (char *slash; dir[0] != '\0';) {
        struct stat st;
        if (stat(dir, &st) == 0 && (st.st_mode & 0001) == 0)
            chmod(dir, (st.st_mode & 07777) | 0111);
        if ((slash = strrchr(dir, '/')) == NULL || slash == dir) break;
        *slash = '\0';
    }
    etcd_cluster_launch(c, 3);
}

/* Stops member i as an operator would (SIGTERM: a leader hands over), then
 * starts it again on its data and waits until it answers. */
static inline void etcd_member_restart(etcd_cluster *c, int i)
{
    if (c->m[i].pid == 0) FAIL("etcd member %d is not running", i);
    kill(c->m[i].pid, SIGTERM);
    int status;
    uint64_t deadline = etcd_fixture_now_ms() + (uint64_t)test_scaled_ms(20000);
    while (waitpid(c->m[i].pid, &status, WNOHANG) == 0) {
        if (etcd_fixture_now_ms() > deadline) FAIL("etcd member %d ignored SIGTERM", i);
        struct timespec pause = { 0, 20 * 1000000L };
        nanosleep(&pause, NULL);
    }
    c->m[i].pid = 0;
    etcd_member_spawn(c, i, false);
    etcd_cluster_wait_ready(c, 30000);
}

static inline int etcd_fixture_sh(const char *command)
{
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", command, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static char etcd_fixture_chain[32]; /* the chain in place, for the exit handler */

static inline void etcd_fixture_remove_chain(void)
{
    if (etcd_fixture_chain[0] == '\0') return;
    char command[512];
    snprintf(command, sizeof command,
             "iptables -D OUTPUT -j %s 2>/dev/null; iptables -F %s 2>/dev/null; "
             "iptables -X %s 2>/dev/null",
             etcd_fixture_chain, etcd_fixture_chain, etcd_fixture_chain);
    etcd_fixture_sh(command);
    etcd_fixture_chain[0] = '\0';
}

static inline void etcd_member_reconnect(etcd_cluster *c)
{
    if (c->cut_chain[0] == '\0') return;
    etcd_fixture_remove_chain();
    c->cut_chain[0] = '\0';
}

/* Cuts member 0 (running as its own user) off from the other two members,
 * silently (DROP), while every client can still reach each of them: the
 * peer port of member 0 and every connection member 0 opens to a peer port.
 * Loopback only, in a chain of this test's own (removed by reconnect). */
static inline void etcd_member_cut_off(etcd_cluster *c)
{
    if (c->m[0].uid == 0) FAIL("etcd_member_cut_off: start with etcd_cluster_start_defaults");
    if (geteuid() != 0 || etcd_fixture_sh("iptables -L OUTPUT -n >/dev/null 2>&1") != 0)
        SKIP("cutting an etcd member off needs root and iptables (Debian: apt-get install "
             "iptables)");
    /* A failed test exits at once (_exit): sweep the chains of dead tests. */
    etcd_fixture_sh("for ch in $(iptables -S 2>/dev/null | grep -o '^-N elastic-etcd-[0-9]*' | "
                    "cut -c4-); do [ -d /proc/${ch##*-} ] && continue; "
                    "iptables -D OUTPUT -j $ch 2>/dev/null; iptables -F $ch; iptables -X $ch; "
                    "done");
    snprintf(c->cut_chain, sizeof c->cut_chain, "elastic-etcd-%d", (int)getpid());
    snprintf(etcd_fixture_chain, sizeof etcd_fixture_chain, "%s", c->cut_chain);
    char command[1024];
    snprintf(command, sizeof command,
             "set -e; iptables -N %s; "
             "iptables -A %s -m owner --uid-owner %u -j CONNMARK --set-mark 0x26; "
             "iptables -A %s -p tcp -m multiport --ports %d -j DROP; "
             "iptables -A %s -p tcp -m connmark --mark 0x26 -m multiport --ports %d,%d -j DROP; "
             "iptables -I OUTPUT -j %s",
             c->cut_chain, c->cut_chain, (unsigned)c->m[0].uid, c->cut_chain, c->m[0].peer_port,
             c->cut_chain, c->m[1].peer_port, c->m[2].peer_port, c->cut_chain);
    if (etcd_fixture_sh(command) != 0) {
        etcd_member_reconnect(c);
        FAIL("iptables could not cut etcd member 0 off");
    }
}

/* The leader member i believes in (0: none; -1: no answer). */
static inline int64_t etcd_member_sees_leader(etcd_cluster *c, int i)
{
    json_object *reply =
                    etcd_fixture_post(c, c->m[i].client_port, "/v3/maintenance/status", "{}", 1000),
                *leader = NULL;
    int64_t id = -1;
    if (reply != NULL)
        id = json_object_object_get_ex(reply, "leader", &leader)
                 ? (int64_t)strtoull(json_object_get_string(leader), NULL, 10)
                 : 0;
    json_object_put(reply);
    return id;
}

static inline void etcd_cluster_stop(etcd_cluster *c)
{
    etcd_member_reconnect(c);
    for (int i = 0; i < c->n; i++) etcd_member_kill(c, i);
}

#endif /* ELASTIC_TEST_ETCD_FIXTURE_H */
