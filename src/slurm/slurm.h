/*
 * Slurm, read as data: the hostlist grammar Slurm writes node lists in
 * (SLURM_JOB_NODELIST "gpu[01-04,07],cpu5"), its tasks-per-node lists
 * ("2(x3),1"), and the settings elasticrun derives from a job step's
 * environment (run id, node count, rendezvous endpoint, processes per node,
 * node name, preferred rank). Pure functions over text: nothing here runs
 * Slurm's commands or reads the process environment itself, so every case is
 * a unit test (test/unit/test_slurm_*.c) and the grammar is fuzzed
 * (test/fuzz/fuzz_slurm_hostlist.c). docs/SLURM.md describes the rules.
 */
#ifndef ELASTIC_SLURM_H
#define ELASTIC_SLURM_H

#include "common/common.h"
#include "common/endpoint.h"

/* Bounds on what is read: a node list longer than this, or expanding to more
 * hosts, is refused (a clear error instead of an allocation the size of a
 * typo such as "n[0-999999999]"). A name is a DNS name: 253 characters. */
#define ELASTIC__HOSTLIST_MAX_TEXT  65536
#define ELASTIC__HOSTLIST_MAX_HOSTS 65536
#define ELASTIC__HOSTLIST_NAME_MAX  ELASTIC__HOST_MAX
/* Bracket groups in one name ("rack[1-2]n[01-16]": 2); digits of a bound. */
#define ELASTIC__HOSTLIST_MAX_GROUPS 4
#define ELASTIC__HOSTLIST_MAX_DIGITS 9

/* The expanded list: count names, in Slurm's order (the first bracket group
 * varies slowest; duplicates kept, as Slurm keeps them). */
typedef struct elastic__hostlist {
    char **names;
    size_t count;
} elastic__hostlist;

/* Expands `text` (entries separated by ',' or whitespace outside brackets;
 * an entry is text with up to ELASTIC__HOSTLIST_MAX_GROUPS bracket groups of
 * comma-separated numbers and lo-hi ranges; a bound written with a leading
 * zero pads every number of its range to its width, as "n[08-10]" gives
 * n08 n09 n10). Host characters are [A-Za-z0-9._-]. At most max_hosts names
 * (0: ELASTIC__HOSTLIST_MAX_HOSTS). 0, or ELASTIC_EINVAL / ELASTIC_ENOMEM
 * with one line naming `what` and the rule; *out is written only on
 * success and is freed with elastic__hostlist_free. An empty list is an
 * error (a job has at least one node). */
int elastic__hostlist_expand(const char *what, const char *text, size_t max_hosts,
                             elastic__hostlist *out);
void elastic__hostlist_free(elastic__hostlist *list);

/* Slurm's tasks-per-node text ("2(x3),1": 2 on each of three nodes, then 1):
 * *count = the entry of node `index` (0-based), *nodes = the nodes it names.
 * 0, or ELASTIC_EINVAL naming `what` (malformed, or no entry for index). */
int elastic__slurm_tasks_per_node(const char *what, const char *text, size_t index, int *count,
                                  size_t *nodes);

/* elasticrun's default c10d port; a Slurm job's store listens on
 * ELASTIC__SLURM_PORT_BASE + job id mod ELASTIC__SLURM_PORT_SPAN so that two
 * jobs sharing their first node do not collide. */
#define ELASTIC__SLURM_PORT_BASE 29400
#define ELASTIC__SLURM_PORT_SPAN 1000
#define ELASTIC__SLURM_ID_MAX    32

/* What a job step's environment says. Each field is set only when Slurm gave
 * it (has_*); elasticrun's flags override any of them. */
typedef struct elastic__slurm_settings {
    bool in_slurm;                              /* SLURM_JOB_ID is set */
    char job_id[ELASTIC__SLURM_ID_MAX];         /* digits */
    char step_id[ELASTIC__SLURM_ID_MAX];        /* digits, or "" outside a step */
    char run_id[2 * ELASTIC__SLURM_ID_MAX + 8]; /* "slurm-<job>" or "slurm-<job>.<step>" */
    bool has_nnodes;
    int nnodes; /* the step's nodes (else the job's): --nnodes N:N */
    bool has_endpoint;
    char rdzv_host[ELASTIC__HOSTLIST_NAME_MAX + 1]; /* first node of the step (else the job) */
    int rdzv_port;
    bool has_node_name;
    char node_name[ELASTIC__HOSTLIST_NAME_MAX + 1]; /* SLURMD_NODENAME */
    bool is_host; /* this node is rdzv_host: its agent hosts the store */
    bool has_nproc;
    int nproc_per_node;
    const char *nproc_source; /* "SLURM_GPUS_ON_NODE", "SLURM_NTASKS_PER_NODE", ... */
    int tasks_on_node;        /* elasticrun tasks Slurm started on this node (1 unless told) */
    int local_id;             /* SLURM_LOCALID (0 unless told) */
    bool has_rank;
    int preferred_rank; /* SLURM_PROCID with one task per node, else SLURM_NODEID */
} elastic__slurm_settings;

/* Reads the Slurm variables from `envp` (NULL-terminated "NAME=value"
 * strings, as environ). No SLURM_JOB_ID: 0 with in_slurm false and nothing
 * else set. Otherwise every variable used is validated: a malformed one is
 * ELASTIC_EINVAL naming the variable and its text (nothing is guessed from a
 * broken environment); *out is written only on success. */
int elastic__slurm_derive(char *const *envp, elastic__slurm_settings *out);

/* One line for the start line and --help: "slurm job 17 step 0: run id
 * slurm-17.0, nnodes 3:3, rdzv node1:29417 (host), nproc-per-node 2 (from
 * SLURM_GPUS_ON_NODE), node node2, rank 1". Always NUL-terminated. */
void elastic__slurm_describe(const elastic__slurm_settings *settings, char *buf, size_t size);

/* "elastic: <why>" as one line of printable ASCII without quotes (scontrol
 * and sinfo show it as written); always NUL-terminated. */
void elastic__slurm_drain_reason(const char *why, char *reason, size_t size);

/* Drains `node`: scontrol update NodeName=node State=DRAIN Reason="elastic:
 * why" ($ELASTIC_SCONTROL, else scontrol on PATH), killed after timeout_ms.
 * Only a plain host name that is one of the job's nodes (SLURM_JOB_NODELIST)
 * is drained: anything else is ELASTIC_EPERM and scontrol never runs.
 * Blocks: call it off the event loop. 0 (detail "drained ..."), or
 * ELASTIC_EPERM (scontrol refused: no operator rights), ELASTIC_ETIMEDOUT,
 * ELASTIC_ENOTFOUND (no scontrol), ELASTIC_EIO (another refusal) or
 * ELASTIC_ESYS; detail is one line for the console either way. */
int elastic__slurm_drain(const char *node, const char *why, int timeout_ms, char *detail,
                         size_t detail_size);

#endif /* ELASTIC_SLURM_H */
