/*
 * The nccl module's insides: the entry points of NCCL and the CUDA runtime it
 * loads with dlopen (declared here with opaque types, so no toolkit header is
 * needed to build), and the communicator handle shared by loader.c,
 * bootstrap.c, comm.c, watchdog.c and rebuild.c.
 */
#ifndef ELASTIC_NCCL_INTERNAL_H
#define ELASTIC_NCCL_INTERNAL_H

#include "common/common.h"
#include "worker/worker.h"

#include <pthread.h>

/* ---- what we use of NCCL and CUDA (their ABI, declared by hand) ----------- */

#define NCCL__UNIQUE_ID_BYTES 128
typedef struct nccl__unique_id {
    char internal[NCCL__UNIQUE_ID_BYTES];
} nccl__unique_id;

/* ncclResult_t values */
#define NCCL__SUCCESS          0
#define NCCL__IN_PROGRESS      7
#define NCCL__SHRINK_ABORT     0x01
#define NCCL__CONFIG_MAGIC     0xcafebeefu
#define NCCL__CONFIG_UNDEF_INT (-2147483647 - 1)
/* cudaError_t values */
#define CUDA__SUCCESS              0
#define CUDA__ERROR_NOT_READY      600
#define CUDA__EVENT_DISABLE_TIMING 0x02u

/* ncclConfig_t as of NCCL 2.28 (size, magic and version tell NCCL which
 * fields a caller knows; older libraries read the prefix they know). */
typedef struct nccl__config {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking, cga_cluster_size, min_ctas, max_ctas;
    const char *net_name;
    int split_share, traffic_class;
    const char *comm_name;
    int collnet_enable, cta_policy, shrink_share, nvls_ctas, channels_per_net_peer,
        nvlink_centric_sched;
} nccl__config;

#define NCCL__MIN_VERSION    21800 /* non-blocking init and async errors as we use them */
#define NCCL__SHRINK_VERSION 22700 /* ncclCommShrink */
#define CUDA__MIN_VERSION    11000

typedef struct nccl__api {
    int version;      /* NCCL_VERSION_CODE */
    int cuda_version; /* cudaRuntimeGetVersion */
    int (*get_version)(int *);
    int (*get_unique_id)(nccl__unique_id *);
    int (*comm_init_rank_config)(void **comm, int nranks, nccl__unique_id id, int rank,
                                 nccl__config *config);
    int (*comm_get_async_error)(void *comm, int *error);
    int (*comm_abort)(void *comm);
    int (*comm_destroy)(void *comm);
    int (*comm_revoke)(void *comm, int flags); /* NULL before 2.28 */
    int (*comm_shrink)(void *comm, int *exclude, int count, void **newcomm, nccl__config *config,
                       int flags); /* NULL before 2.27 */
    const char *(*get_error_string)(int result);
    const char *(*get_last_error)(void *comm); /* may be NULL */
    int (*cuda_get_device_count)(int *);
    int (*cuda_set_device)(int);
    int (*cuda_event_create_with_flags)(void **event, unsigned flags);
    int (*cuda_event_record)(void *event, void *stream);
    int (*cuda_event_query)(void *event);
    int (*cuda_event_destroy)(void *event);
    const char *(*cuda_get_error_string)(int error);
    int (*cuda_runtime_get_version)(int *);
} nccl__api;

/* loader.c: loads both libraries once (later calls return the first result).
 * ELASTIC_EUNSUPPORTED with one line saying what is missing. */
int nccl__load(const nccl__api **api);
/* Whether nccl__load would succeed (for elastic_has_feature). */
int nccl__loadable(void);
/* A config for a non-blocking communicator named by tag. */
void nccl__config_init(nccl__config *config, const char *name);
/* The NCCL error of a call, with the communicator's last error when known. */
int nccl__fail(const nccl__api *api, void *comm, int result, const char *what);

/* ---- the communicator ------------------------------------------------------ */

#define NCCL__TAG_MAX     63
#define NCCL__WATCH_SLOTS 256 /* collectives in flight the watchdog tracks one by one */

typedef enum nccl__state {
    NCCL__STATE_NONE,     /* no NCCL communicator (before init, or after a failed rebuild) */
    NCCL__STATE_BUILDING, /* NCCL's non-blocking init or shrink is under way */
    NCCL__STATE_READY,
    NCCL__STATE_REVOKED, /* in-flight work stopped; kept so that it can be shrunk */
    NCCL__STATE_ABORTED  /* ncclCommAbort ran: the NCCL object is gone */
} nccl__state;

typedef struct nccl__watch_slot {
    void *event;
    uint64_t collective; /* the number of the last collective it covers */
    uint64_t since_ns;   /* when the first collective it covers was marked */
} nccl__watch_slot;

struct elastic_nccl_comm {
    elastic_worker *worker;
    elastic_nccl_opts opts;
    char tag[NCCL__TAG_MAX + 1];
    const nccl__api *api;
    worker__hook hook; /* abort and reconfigure hooks on the worker */
    bool hook_added;

    pthread_mutex_t lock; /* guards everything below */
    pthread_cond_t wake;
    void *nccl; /* ncclComm_t, NULL in NONE and ABORTED */
    nccl__state state;
    int rank, nranks, device;
    uint64_t generation; /* of the worker when built */
    uint64_t builds;     /* builds in this generation so far: numbers the store keys */
    uint64_t collectives;
    int rebuilds, last_method, last_build_ms;
    bool faulted; /* the watchdog reported a fault in this generation */

    /* watched collectives: a ring, oldest at head */
    nccl__watch_slot slots[NCCL__WATCH_SLOTS];
    unsigned head, count;
    void *spare_events[NCCL__WATCH_SLOTS];
    unsigned spare_count;

    pthread_t watchdog;
    bool watchdog_started, stopping;
};

/* bootstrap.c: what every rank of the new generation says about itself, and
 * the plan they all derive from the same list. */
typedef struct nccl__plan {
    bool shrink;
    int exclude[4096]; /* old ranks that are gone (shrink only) */
    int exclude_count;
} nccl__plan;

/* Publishes this rank's membership record for build number `build` and reads
 * everyone's; the plan is the same on every rank. old_rank < 0: no usable
 * communicator to shrink. */
int nccl__bootstrap_plan(elastic_nccl_comm *c, const elastic_worker_info *info, int old_rank,
                         int old_nranks, uint64_t old_generation, int deadline_ms,
                         nccl__plan *plan);
/* Rank 0 creates and publishes the unique id; the others wait for it. */
int nccl__bootstrap_unique_id(const nccl__api *api, elastic_store *store, const char *tag,
                              uint64_t build, int rank, int timeout_ms, nccl__unique_id *id);

/* comm.c */
/* Polls a non-blocking communicator until it is ready, failed, or the deadline passed. */
int nccl__wait_ready(elastic_nccl_comm *c, void *nccl, uint64_t deadline_ms, const char *what);
/* Creates the NCCL communicator from scratch for the worker's generation. */
int nccl__create(elastic_nccl_comm *c, const elastic_worker_info *info, uint64_t deadline_ms);
/* Tells the agent how long a build took (event and metric). */
void nccl__report_build(elastic_nccl_comm *c, const char *method, int ms);

/* watchdog.c */
int nccl__watchdog_start(elastic_nccl_comm *c);
void nccl__watchdog_stop(elastic_nccl_comm *c);
/* Forgets every watched collective (under the lock): after an abort or rebuild. */
void nccl__watch_clear(elastic_nccl_comm *c);

/* rebuild.c */
/* Stops in-flight work now (revoke when a shrink can follow, else abort);
 * callable from any thread. `why` goes to the log. */
int nccl__abort(elastic_nccl_comm *c, const char *why);
/* The watchdog's abort after its report: only of the build it found faulted,
 * never of the next generation's that the trainer may be building by then. */
int nccl__abort_faulted(elastic_nccl_comm *c, const char *why);
int nccl__rebuild(elastic_nccl_comm *c);
void nccl__hooks_add(elastic_nccl_comm *c);
void nccl__hooks_remove(elastic_nccl_comm *c);

#endif /* ELASTIC_NCCL_INTERNAL_H */
