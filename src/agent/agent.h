/*
 * Internal interface of the agent module: the parsers behind the command
 * line, the worker processes, their output, the event log and the group's
 * state machine. Only src/agent/ and the tests include this.
 */
#ifndef ELASTIC_AGENT_INTERNAL_H
#define ELASTIC_AGENT_INTERNAL_H

#include "common/common.h"
#include "common/parse_int.h" /* every number the agent reads */

#include <stdbool.h>
#include <stdint.h>

/* ---- --rdzv-conf (conf.c) ------------------------------------------------ */

/* The keys of --rdzv-conf that change what we do; -1 / 0 means "not given". */
typedef struct agent_rdzv_conf {
    int join_timeout_ms;      /* join_timeout (s) */
    int last_call_timeout_ms; /* last_call_timeout (s) */
    int close_timeout_ms; /* close_timeout (s): a store host's grace once every node settled */
    int outcome_timeout_ms; /* outcome_timeout (s): how long it keeps the outcome for a silent node */
    int read_timeout_ms;  /* read_timeout (s): store calls */
    int keep_alive_interval_ms; /* keep_alive_interval (s) */
    int keep_alive_max_attempt; /* keep_alive_max_attempt */
    int is_host;                /* is_host: -1 unset, 0, 1 */
    int require_token;          /* require_token: -1 unset, 0, 1 (refuse multi-node, no token) */
    char token_file[4096];      /* token_file: the store token's file ("" unset) */
    char store_bind_addr[256];  /* store_bind_addr: hosted store's address ("": the endpoint's) */
    /* etcd-v3 only (empty: not given): TLS files, auth and the key prefix. */
    char cacert[256]; /* cacert: CA file; https when set */
    char cert[256];   /* cert, key: client certificate and its key */
    char key[256];
    char user[128]; /* user (etcd auth), password from password_file or ELASTIC_ETCD_PASSWORD */
    char password_file[256];
    char etcd_prefix[128]; /* etcd_prefix: keys under "<prefix>/<run_id>/" (default /elastic) */
} agent_rdzv_conf;

/* Parses "key=value,..." as torchrun does (keys and values trimmed; empty
 * string = no keys). Unknown keys are accepted (torchrun passes them to its
 * backends) and logged. ELASTIC_EINVAL with a one-line detail otherwise. */
int agent__rdzv_conf_parse(const char *text, agent_rdzv_conf *conf);

/* torchrun's Std for --redirects/--tee: "0".."3" for every local rank, or
 * "local_rank:std,..." per rank. Bit 1 = stdout, bit 2 = stderr. */
/* elasticrun's exit code when fewer than --nnodes' minimum remain (docs/OPERATIONS.md):
 * a Slurm recipe requeues on it (cold replacement). */
#define AGENT_EXIT_TOO_FEW_NODES 75
/* elasticrun's exit code when the failure policy stopped the job for a
 * deterministic bug in the training code (EX_SOFTWARE; docs/OPERATIONS.md):
 * FAILURE_POLICY_EXIT_DETERMINISTIC, so a requeue script can tell "don't retry". */
#define AGENT_EXIT_BUG 70
/* elasticrun's exit code when the job's infrastructure failures (lost nodes,
 * nodes that stepped aside for a spare) passed --max-infra-restarts
 * (EX_UNAVAILABLE; docs/OPERATIONS.md): the fleet, not the code, is broken. */
#define AGENT_EXIT_INFRA 69
/* With --slurm-drain, the job gives up on a node that fenced itself this
 * many times (a node in a crash loop is the failure policy's to find: its
 * node quarantine, src/common/failure_policy.h). */
#define AGENT_GIVE_UP_FENCES 3

#define AGENT_STD_OUT 1
#define AGENT_STD_ERR 2
int agent__std_parse(const char *text, int local_rank, int *mask);

/* elastic_agent_opts with every default (args.c). */
void agent__opts_defaults(elastic_agent_opts *opts);
/* --warm-spares: in range and with --in-process-recovery (args.c). */
int agent__check_warm_spares(const elastic_agent_opts *opts);
/* Seconds read from flags, environment or conf values (integers go through
 * common/parse_int.h): bounded; may have a fraction; become milliseconds. */
int agent__parse_seconds_ms(const char *text, double max_seconds, int *ms);
/* torch's bool spelling: 1/0, true/false, t/f, yes/no, y/n (any case). */
int agent__parse_bool(const char *text, int *value);

/* ---- the store token (token.c) ----------------------------------------------- */

/* The job's store token: --rdzv-conf token_file, else ELASTIC_STORE_TOKEN_FILE,
 * else ELASTIC_STORE_TOKEN; *token NULL when none (free with
 * agent__token_free). A multi-node job without one warns once, or fails with
 * ELASTIC_EAUTH under require_token=1 / ELASTIC_REQUIRE_TOKEN=1. */
int agent__token_load(const agent_rdzv_conf *conf, bool multi_node, char **token);
void agent__token_free(char *token);
/* Writes the token to <dir>/store_token (0600, created afresh, no link
 * followed) for the workers; *path gets the file's path. */
int agent__token_publish(const char *dir, const char *token, char *path, size_t size);

/* ---- files the agent creates (files.c) ------------------------------------- */

/* Creates (0700) or opens the directory `name` inside parent without
 * following a link; refuses one owned by another user or writable by
 * others. *out: its descriptor. */
int agent__dir_private(int parent, const char *name, int *out);
/* A directory path the user named (its missing components created 0700). */
int agent__dir_open_user(const char *path, int *out);
/* Opens a regular file in dir with flags | O_NOFOLLOW, created 0600: a
 * descriptor, or a negative ELASTIC_E* (a link, a FIFO...). */
int agent__file_private(int dir, const char *name, int flags);
/* The same for a path the user named (its last component is not followed). */
int agent__file_private_path(const char *path, int flags);

/* ---- endpoints (host.c; parsed by common/endpoint.h) -------------------------- */

/* Whether `host` names this machine (localhost, its hostname, a loopback or
 * interface address). */
bool agent__address_is_local(const char *host);
/* Whether a host *name* (not a literal address, not "localhost") resolves
 * here to a loopback address first (Debian's 127.0.1.1 for the hostname): a
 * store bound to it cannot be reached from other hosts. */
bool agent__name_is_loopback_alias(const char *host);
/* The address of this machine's interface on the route to host:port (a UDP
 * socket connected there: nothing is sent), numeric into out: what a peer
 * on that network reaches this node at. ELASTIC_ECONNECT naming host when
 * it does not resolve or no route leads there. */
int agent__route_source(const char *host, int port, char *out, size_t cap);

#endif /* ELASTIC_AGENT_INTERNAL_H */
