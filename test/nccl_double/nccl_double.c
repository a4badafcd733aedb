/* A TEST DOUBLE of NCCL and the CUDA runtime: it serves libelastic's tests only and is never shipped. */
/*
 * Implements the handful of entry points the nccl module and the test trainer
 * use. Collectives (float sum all-reduce) run between processes through a
 * file mapped by every rank of a communicator (named by the unique id, under
 * NCCL_DOUBLE_DIR), executed by one host thread per stream, so they are
 * asynchronous like GPU work: cudaEventRecord/Query and cudaStreamSynchronize
 * behave as on a device. Faults on request, once per process:
 *   NCCL_DOUBLE_HANG=R:K      rank R's K-th collective never ends (until abort)
 *   NCCL_DOUBLE_ERROR=R:K     rank R's K-th collective raises ncclRemoteError
 *   NCCL_DOUBLE_VERSION=V     ncclGetVersion reports V (22600: no shrink)
 *   NCCL_DOUBLE_DEVICES=N     cudaGetDeviceCount reports N (0: no device)
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define API       __attribute__((visibility("default")))
#define MAX_RANKS 16
#define MAX_COUNT 1024
#define QUEUE     1024
#define ID_PREFIX "ncclDouble:"

enum { OK = 0, INVALID_ARGUMENT = 4, INVALID_USAGE = 5, REMOTE_ERROR = 6, IN_PROGRESS = 7 };
enum { STATE_INIT, STATE_READY, STATE_REVOKED, STATE_ABORTED };

typedef struct region {
    _Atomic uint32_t joined[MAX_RANKS];
    _Atomic uint64_t posted[MAX_RANKS]; /* the last collective whose data the rank posted */
    _Atomic uint64_t done[MAX_RANKS];   /* the last collective the rank finished reading */
    float data[2][MAX_RANKS][MAX_COUNT];
} region;

typedef struct comm {
    region *shared;
    char name[160];
    int rank, nranks;
    _Atomic int state;
    _Atomic int async_error;
    uint64_t seq;     /* collectives enqueued (the trainer's thread) */
    _Atomic int refs; /* the handle + queued operations */
    int shrinks;
} comm;

typedef struct op {
    comm *c;
    const float *send;
    float *recv;
    size_t count;
    uint64_t seq;
} op;

typedef struct stream {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t thread;
    op queue[QUEUE];
    uint64_t enqueued, completed;
} stream;

typedef struct event {
    stream *s;
    uint64_t target;
} event;

static pthread_once_t default_once = PTHREAD_ONCE_INIT;
static stream *default_stream;
static _Atomic int fault_used;

/* ---- small helpers ----------------------------------------------------------------- */

static void pause_briefly(void)
{
    struct timespec ts = { 0, 100000 }; /* 0.1 ms: a spinning kernel, politely */
    nanosleep(&ts, NULL);
}

static bool fault_requested(const char *var, int rank, uint64_t seq)
{
    const char *spec = getenv(var);
    int want_rank = -1;
    unsigned long long want_seq = 0;
    if (spec == NULL || sscanf(spec, "%d:%llu", &want_rank, &want_seq) != 2) return false;
    if (want_rank != rank || want_seq != seq) return false;
    int expected = 0;
    return atomic_compare_exchange_strong(&fault_used, &expected, 1);
}

static void comm_release(comm *c)
{
    if (atomic_fetch_sub(&c->refs, 1) != 1) return;
    munmap(c->shared, sizeof(region));
    free(c);
}

static bool live(comm *c)
{
    return atomic_load(&c->state) == STATE_READY;
}

/* ---- the collective, on the stream's thread ----------------------------------------------- */

static bool wait_all(comm *c, _Atomic uint64_t *counters, uint64_t at_least)
{
    for (int i = 0; i < c->nranks; i++)
        while (atomic_load(&counters[i]) < at_least) {
            if (!live(c)) return false;
            pause_briefly();
        }
    return true;
}

static void run_allreduce(op *o)
{
    comm *c = o->c;
    if (!live(c)) return;
    if (fault_requested("NCCL_DOUBLE_HANG", c->rank, o->seq)) {
        while (live(c)) pause_briefly(); /* the kernel that never ends, until abort */
        return;
    }
    if (fault_requested("NCCL_DOUBLE_ERROR", c->rank, o->seq)) {
        atomic_store(&c->async_error, REMOTE_ERROR);
        while (live(c)) pause_briefly();
        return;
    }
    int buffer = (int)(o->seq % 2);
    /* The buffer was last used two collectives ago: everyone must have read it. */
    if (o->seq > 2 && !wait_all(c, c->shared->done, o->seq - 2)) return;
    memcpy(c->shared->data[buffer][c->rank], o->send, o->count * sizeof(float));
    atomic_store(&c->shared->posted[c->rank], o->seq);
    if (!wait_all(c, c->shared->posted, o->seq)) return;
    for (size_t k = 0; k < o->count; k++) {
        float sum = 0;
        for (int i = 0; i < c->nranks; i++) sum += c->shared->data[buffer][i][k];
        o->recv[k] = sum;
    }
    atomic_store(&c->shared->done[c->rank], o->seq);
}

static void *stream_main(void *arg)
{
    stream *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (s->completed == s->enqueued) pthread_cond_wait(&s->cond, &s->lock);
        op o = s->queue[s->completed % QUEUE];
        pthread_mutex_unlock(&s->lock);
        run_allreduce(&o);
        comm_release(o.c);
        pthread_mutex_lock(&s->lock);
        s->completed++;
        pthread_cond_broadcast(&s->cond);
    }
    return NULL;
}

static stream *stream_new(void)
{
    stream *s = calloc(1, sizeof *s);
    if (s == NULL) return NULL;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    if (pthread_create(&s->thread, NULL, stream_main, s) != 0) {
        free(s);
        return NULL;
    }
    pthread_detach(s->thread);
    return s;
}

static void make_default_stream(void)
{
    default_stream = stream_new();
}

static stream *resolve(void *handle)
{
    if (handle != NULL) return handle;
    pthread_once(&default_once, make_default_stream);
    return default_stream;
}

/* ---- NCCL ------------------------------------------------------------------------------ */

API int ncclGetVersion(int *version)
{
    const char *forced = getenv("NCCL_DOUBLE_VERSION");
    *version = forced != NULL ? atoi(forced) : 22809;
    return OK;
}

API const char *ncclGetErrorString(int result)
{
    switch (result) {
    case OK: return "no error";
    case INVALID_ARGUMENT: return "invalid argument";
    case INVALID_USAGE: return "invalid usage";
    case REMOTE_ERROR: return "remote process exited or there was a network error";
    case IN_PROGRESS: return "NCCL operation in progress";
    default: return "unhandled error";
    }
}

API const char *ncclGetLastError(void *c)
{
    (void)c;
    return "test double";
}

API int ncclGetUniqueId(char id[128])
{
    unsigned char random[16];
    if (getrandom(random, sizeof random, 0) != (ssize_t)sizeof random) return INVALID_USAGE;
    memset(id, 0, 128);
    int n = snprintf(id, 128, ID_PREFIX);
    for (size_t i = 0; i < sizeof random; i++)
        n += snprintf(id + n, 128 - (size_t)n, "%02x", random[i]);
    return OK;
}

static comm *comm_open(const char *name, int nranks, int rank)
{
    const char *dir = getenv("NCCL_DOUBLE_DIR");
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir != NULL ? dir : "/tmp", name);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return NULL;
    if (ftruncate(fd, sizeof(region)) != 0) {
        close(fd);
        return NULL;
    }
    region *shared = mmap(NULL, sizeof(region), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    comm *c = calloc(1, sizeof *c);
    if (shared == MAP_FAILED || c == NULL) {
        if (shared != MAP_FAILED) munmap(shared, sizeof(region));
        free(c);
        return NULL;
    }
    *c = (comm){ .shared = shared, .rank = rank, .nranks = nranks, .refs = 1 };
    snprintf(c->name, sizeof c->name, "%s", name);
    atomic_store(&shared->joined[rank], 1);
    return c;
}

/* config: ncclConfig_t; only its blocking field (after size, magic, version) matters here. */
typedef struct config_head {
    size_t size;
    unsigned magic, version;
    int blocking;
} config_head;

static int wait_if_blocking(comm *c, const config_head *config);

typedef struct unique_id {
    char internal[128];
} unique_id; /* passed by value, as ncclUniqueId is */

API int ncclCommInitRankConfig(comm **out, int nranks, unique_id unique, int rank,
                               config_head *config)
{
    const char *id = unique.internal;
    *out = NULL;
    if (strncmp(id, ID_PREFIX, strlen(ID_PREFIX)) != 0 || nranks < 1 || nranks > MAX_RANKS ||
        rank < 0 || rank >= nranks)
        return INVALID_ARGUMENT;
    char name[160];
    snprintf(name, sizeof name, "double-%.40s", id + strlen(ID_PREFIX));
    comm *c = comm_open(name, nranks, rank);
    if (c == NULL) return INVALID_USAGE;
    *out = c;
    return wait_if_blocking(c, config);
}

static bool all_joined(comm *c)
{
    for (int i = 0; i < c->nranks; i++)
        if (atomic_load(&c->shared->joined[i]) == 0) return false;
    return true;
}

static int wait_if_blocking(comm *c, const config_head *config)
{
    if (config != NULL && config->blocking == 0) return IN_PROGRESS;
    while (!all_joined(c)) pause_briefly();
    atomic_store(&c->state, STATE_READY);
    return OK;
}

API int ncclCommGetAsyncError(comm *c, int *error)
{
    int state = atomic_load(&c->state);
    if (state == STATE_INIT) {
        if (all_joined(c)) atomic_store(&c->state, STATE_READY);
        *error = all_joined(c) ? OK : IN_PROGRESS;
        return OK;
    }
    *error = atomic_load(&c->async_error);
    return OK;
}

API int ncclCommRevoke(comm *c, int flags)
{
    if (flags != 0) return INVALID_ARGUMENT;
    atomic_store(&c->state, STATE_REVOKED);
    atomic_store(&c->async_error, OK);
    return OK;
}

/* How often each release path ran in this process, for tests that load the
 * double in-process (nccl_double_calls, found with dlsym). */
static _Atomic int destroy_calls, abort_calls;

static int comm_end(comm *c)
{
    if (c == NULL) return OK;
    atomic_store(&c->state, STATE_ABORTED);
    comm_release(c); /* queued operations hold their own references */
    return OK;
}

API int ncclCommAbort(comm *c)
{
    if (c != NULL) atomic_fetch_add(&abort_calls, 1);
    return comm_end(c);
}

API int ncclCommDestroy(comm *c)
{
    if (c != NULL) atomic_fetch_add(&destroy_calls, 1);
    return comm_end(c);
}

/* Not NCCL's: how many communicators ncclCommDestroy and ncclCommAbort ended. */
API void nccl_double_calls(int *destroyed, int *aborted)
{
    *destroyed = atomic_load(&destroy_calls);
    *aborted = atomic_load(&abort_calls);
}

API int ncclCommShrink(comm *parent, int *exclude, int count, comm **out, config_head *config,
                       int flags)
{
    (void)flags;
    *out = NULL;
    int new_rank = parent->rank;
    for (int i = 0; i < count; i++) {
        if (exclude[i] == parent->rank) return INVALID_ARGUMENT;
        if (exclude[i] < parent->rank) new_rank--;
    }
    atomic_store(&parent->state, STATE_ABORTED); /* NCCL_SHRINK_ABORT: the parent's work ends */
    char name[160];
    snprintf(name, sizeof name, "%.140s-shrink%d", parent->name, ++parent->shrinks);
    comm *c = comm_open(name, parent->nranks - count, new_rank);
    if (c == NULL) return INVALID_USAGE;
    *out = c;
    return wait_if_blocking(c, config);
}

API int ncclAllReduce(const void *send, void *recv, size_t count, int datatype, int redop, comm *c,
                      void *handle)
{
    if (c == NULL || datatype != 7 || redop != 0 || count > MAX_COUNT) return INVALID_ARGUMENT;
    if (!live(c)) return INVALID_USAGE;
    stream *s = resolve(handle);
    if (s == NULL) return INVALID_USAGE;
    pthread_mutex_lock(&s->lock);
    while (s->enqueued - s->completed == QUEUE) pthread_cond_wait(&s->cond, &s->lock);
    atomic_fetch_add(&c->refs, 1);
    s->queue[s->enqueued % QUEUE] =
        (op){ .c = c, .send = send, .recv = recv, .count = count, .seq = ++c->seq };
    s->enqueued++;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    return OK;
}

/* ---- CUDA runtime ------------------------------------------------------------------------- */

API int cudaGetDeviceCount(int *count)
{
    const char *forced = getenv("NCCL_DOUBLE_DEVICES");
    *count = forced != NULL ? atoi(forced) : 8;
    return *count > 0 ? 0 : 100; /* cudaErrorNoDevice */
}

API int cudaSetDevice(int device)
{
    return device >= 0 ? 0 : 101;
}
API int cudaRuntimeGetVersion(int *version)
{
    *version = 13000;
    return 0;
}

API const char *cudaGetErrorString(int error)
{
    return error == 0     ? "no error"
           : error == 600 ? "device not ready"
           : error == 100 ? "no CUDA-capable device"
                          : "CUDA error (test double)";
}

API int cudaStreamCreate(stream **out)
{
    *out = stream_new();
    return *out != NULL ? 0 : 2;
}

API int cudaStreamSynchronize(void *handle)
{
    stream *s = resolve(handle);
    pthread_mutex_lock(&s->lock);
    while (s->completed != s->enqueued) pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

API int cudaEventCreateWithFlags(event **out, unsigned flags)
{
    (void)flags;
    *out = calloc(1, sizeof **out);
    return *out != NULL ? 0 : 2;
}

API int cudaEventRecord(event *e, void *handle)
{
    stream *s = resolve(handle);
    pthread_mutex_lock(&s->lock);
    e->s = s;
    e->target = s->enqueued;
    pthread_mutex_unlock(&s->lock);
    return 0;
}

API int cudaEventQuery(event *e)
{
    if (e->s == NULL) return 0;
    pthread_mutex_lock(&e->s->lock);
    bool complete = e->s->completed >= e->target;
    pthread_mutex_unlock(&e->s->lock);
    return complete ? 0 : 600;
}

API int cudaEventDestroy(event *e)
{
    free(e);
    return 0;
}
