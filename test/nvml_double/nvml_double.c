/* A TEST DOUBLE of NVML (libnvidia-ml.so): it serves libelastic's tests only and is never shipped. */
/*
 * Implements the NVML entry points src/health uses, for GPUs described by a
 * state file that a test writes (and may rewrite mid-run: the file is re-read
 * whenever it changes; write it to a temporary name and rename it over). The
 * file is named by NVML_DOUBLE_STATE; without one (or while it cannot be
 * read) the node has 8 healthy GPUs. One setting a line, '#' starts a comment:
 *   gpus N                  the GPU count (default 8)
 *   init_error CODE         nvmlInit_v2 returns CODE (9: driver not loaded)
 *   lost I                  GPU I has fallen off the bus (its calls: GPU_IS_LOST)
 *   ecc I COUNT             volatile uncorrected ECC errors of GPU I
 *   remap I pending|failed  row remapping state of GPU I
 *   no_remap I              GPU I has no row remapping (page retirement instead)
 *   retired I pending       a page retirement pending on GPU I
 *   recovery I ACTION       NVML_FI_DEV_GET_GPU_RECOVERY_ACTION of GPU I
 *   no_recovery             the driver predates the recovery action field
 *   nvlinks N               NVLink links per GPU (default 18; 0: none)
 *   nvlink_down I LINK      that link is inactive
 *   nvlink_errors I LINK N  the link's replay counter
 *   pcie_width I CUR MAX    (default 16 16)
 *   pcie_gen I CUR MAX      (default 5 5)
 *   throttle I MASK         clocks event reasons (default 0: busy, unthrottled)
 *   temp I C                (default 40)
 *   slowdown I C            the slowdown temperature threshold (default 90)
 *   xid I CODE              an Xid on GPU I; each xid line is delivered once,
 *                           in file order, to a process's event set
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define API      __attribute__((visibility("default")))
#define MAX_GPUS 64
#define MAX_XIDS 256
#define LINKS    18

enum {
    OK = 0,
    UNINITIALIZED = 1,
    INVALID_ARGUMENT = 2,
    NOT_SUPPORTED = 3,
    INSUFFICIENT_SIZE = 7,
    TIMEOUT = 10,
    GPU_IS_LOST = 15
};

typedef struct gpu {
    bool lost, no_remap, retired_pending;
    int remap; /* 0 ok, 1 pending, 2 failed */
    unsigned long long ecc, link_errors[LINKS];
    unsigned recovery, width, width_max, gen, gen_max, temp, slowdown;
    unsigned long long throttle;
    unsigned links_down; /* bit per link */
} gpu;

typedef struct state {
    int gpus, init_error, nvlinks;
    bool no_recovery;
    gpu gpu[MAX_GPUS];
    int xid_gpu[MAX_XIDS];
    unsigned xid_code[MAX_XIDS];
    int xids;
} state;

typedef struct pci_info {
    char bus_id_legacy[16];
    unsigned domain, bus, device, pci_device_id, pci_sub_system_id;
    char bus_id[32];
} pci_info;

typedef struct event_data {
    void *device;
    unsigned long long event_type, event_data;
    unsigned gpu_instance_id, compute_instance_id;
} event_data;

typedef union nvml_value {
    double d;
    unsigned ui;
    unsigned long long ull;
} nvml_value;

typedef struct field_value {
    unsigned field_id, scope_id;
    long long timestamp, latency_usec;
    int value_type, nvml_return;
    nvml_value v;
} field_value;

typedef struct event_set {
    unsigned long long registered; /* bit per GPU */
} event_set;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static state current;
static bool loaded;
static struct stat loaded_stat;
static int delivered; /* xid lines handed out so far (this process) */
static bool initialized;
static char handles[MAX_GPUS]; /* a device handle is &handles[i] */

static void defaults(state *s)
{
    memset(s, 0, sizeof *s);
    s->gpus = 8;
    s->nvlinks = LINKS;
    for (int i = 0; i < MAX_GPUS; i++)
        s->gpu[i] = (gpu){
            .width = 16, .width_max = 16, .gen = 5, .gen_max = 5, .temp = 40, .slowdown = 90
        };
}

static bool index_ok(long i)
{
    return i >= 0 && i < MAX_GPUS;
}

static void parse_line(state *s, char *line)
{
    char *hash = strchr(line, '#');
    if (hash != NULL) *hash = '\0';
    char key[32], word[32];
    long a = 0, b = 0, c = 0;
    unsigned long long mask = 0;
    if (sscanf(line, "%31s", key) != 1) return;
    if (strcmp(key, "gpus") == 0) {
        if (sscanf(line, "%*s %ld", &a) == 1 && a >= 0 && a <= MAX_GPUS) s->gpus = (int)a;
        return;
    }
    if (strcmp(key, "init_error") == 0) {
        if (sscanf(line, "%*s %ld", &a) == 1) s->init_error = (int)a;
        return;
    }
    if (strcmp(key, "no_recovery") == 0) {
        s->no_recovery = true;
        return;
    }
    if (strcmp(key, "nvlinks") == 0) {
        if (sscanf(line, "%*s %ld", &a) == 1 && a >= 0 && a <= LINKS) s->nvlinks = (int)a;
        return;
    }
    if (sscanf(line, "%*s %ld", &a) != 1 || !index_ok(a)) return;
    gpu *g = &s->gpu[a];
    if (strcmp(key, "lost") == 0)
        g->lost = true;
    else if (strcmp(key, "no_remap") == 0)
        g->no_remap = true;
    else if (strcmp(key, "ecc") == 0 && sscanf(line, "%*s %*d %llu", &g->ecc) == 1) {
    } else if (strcmp(key, "remap") == 0 && sscanf(line, "%*s %*d %31s", word) == 1)
        g->remap = strcmp(word, "failed") == 0 ? 2 : strcmp(word, "pending") == 0 ? 1 : 0;
    else if (strcmp(key, "retired") == 0 && sscanf(line, "%*s %*d %31s", word) == 1)
        g->retired_pending = strcmp(word, "pending") == 0;
    else if (strcmp(key, "recovery") == 0 && sscanf(line, "%*s %*d %ld", &b) == 1)
        g->recovery = (unsigned)b;
    else if (strcmp(key, "nvlink_down") == 0 && sscanf(line, "%*s %*d %ld", &b) == 1 && b >= 0 &&
             b < LINKS)
        g->links_down |= 1u << b;
    else if (strcmp(key, "nvlink_errors") == 0 && sscanf(line, "%*s %*d %ld %ld", &b, &c) == 2 &&
             b >= 0 && b < LINKS)
        g->link_errors[b] = (unsigned long long)c;
    else if (strcmp(key, "pcie_width") == 0 && sscanf(line, "%*s %*d %ld %ld", &b, &c) == 2) {
        g->width = (unsigned)b;
        g->width_max = (unsigned)c;
    } else if (strcmp(key, "pcie_gen") == 0 && sscanf(line, "%*s %*d %ld %ld", &b, &c) == 2) {
        g->gen = (unsigned)b;
        g->gen_max = (unsigned)c;
    } else if (strcmp(key, "throttle") == 0 &&
               sscanf(line, "%*s %*d %lli", (long long *)&mask) == 1)
        g->throttle = mask;
    else if (strcmp(key, "temp") == 0 && sscanf(line, "%*s %*d %ld", &b) == 1)
        g->temp = (unsigned)b;
    else if (strcmp(key, "slowdown") == 0 && sscanf(line, "%*s %*d %ld", &b) == 1)
        g->slowdown = (unsigned)b;
    else if (strcmp(key, "xid") == 0 && sscanf(line, "%*s %*d %ld", &b) == 1 &&
             s->xids < MAX_XIDS) {
        s->xid_gpu[s->xids] = (int)a;
        s->xid_code[s->xids++] = (unsigned)b;
    }
}

/* Under `lock`: the state file's settings, re-read when the file changed. */
static const state *refresh(void)
{
    const char *path = getenv("NVML_DOUBLE_STATE");
    struct stat st;
    if (path == NULL || stat(path, &st) != 0) {
        if (!loaded) defaults(&current);
        loaded = true;
        return &current;
    }
    if (loaded && st.st_ino == loaded_stat.st_ino && st.st_size == loaded_stat.st_size &&
        st.st_mtim.tv_sec == loaded_stat.st_mtim.tv_sec &&
        st.st_mtim.tv_nsec == loaded_stat.st_mtim.tv_nsec)
        return &current;
    FILE *f = fopen(path, "r");
    if (f == NULL) return &current;
    defaults(&current);
    char line[256];
    while (fgets(line, sizeof line, f) != NULL) parse_line(&current, line);
    fclose(f);
    loaded = true;
    loaded_stat = st;
    return &current;
}

/* The GPU a handle names, or NULL (with *rc set) when it is not one or is lost. */
static const gpu *device(void *handle, int *rc)
{
    char *h = handle;
    if (h < handles || h >= handles + MAX_GPUS) {
        *rc = INVALID_ARGUMENT;
        return NULL;
    }
    const state *s = refresh();
    int i = (int)(h - handles);
    if (!initialized) {
        *rc = UNINITIALIZED;
        return NULL;
    }
    if (i >= s->gpus || s->gpu[i].lost) {
        *rc = GPU_IS_LOST;
        return NULL;
    }
    *rc = OK;
    return &s->gpu[i];
}

#define WITH_GPU(handle)                   \
    int rc_;                               \
    pthread_mutex_lock(&lock);             \
    const gpu *g = device((handle), &rc_); \
    if (g == NULL) {                       \
        pthread_mutex_unlock(&lock);       \
        return rc_;                        \
    }

#define DONE(result)                 \
    do {                             \
        pthread_mutex_unlock(&lock); \
        return (result);             \
    } while (0)

/* ---- the API ------------------------------------------------------------------- */

API int nvmlInit_v2(void)
{
    pthread_mutex_lock(&lock);
    int rc = refresh()->init_error;
    if (rc == 0) initialized = true;
    DONE(rc);
}

API int nvmlShutdown(void)
{
    return OK;
}

API const char *nvmlErrorString(int result)
{
    switch (result) {
    case OK: return "Success";
    case UNINITIALIZED: return "Uninitialized";
    case INVALID_ARGUMENT: return "Invalid Argument";
    case NOT_SUPPORTED: return "Not Supported";
    case 9: return "Driver Not Loaded";
    case TIMEOUT: return "Timeout";
    case GPU_IS_LOST: return "GPU is lost";
    default: return "Unknown Error";
    }
}

API int nvmlSystemGetDriverVersion(char *out, unsigned size)
{
    if (size < 16) return INSUFFICIENT_SIZE;
    snprintf(out, size, "570.00-double");
    return OK;
}

API int nvmlDeviceGetCount_v2(unsigned *count)
{
    pthread_mutex_lock(&lock);
    const state *s = refresh();
    if (!initialized) DONE(UNINITIALIZED);
    *count = (unsigned)s->gpus;
    DONE(OK);
}

API int nvmlDeviceGetHandleByIndex_v2(unsigned index, void **handle)
{
    pthread_mutex_lock(&lock);
    const state *s = refresh();
    if (!initialized) DONE(UNINITIALIZED);
    if (index >= (unsigned)s->gpus) DONE(INVALID_ARGUMENT);
    if (s->gpu[index].lost) DONE(GPU_IS_LOST);
    *handle = &handles[index];
    DONE(OK);
}

API int nvmlDeviceGetUUID(void *handle, char *uuid, unsigned size)
{
    WITH_GPU(handle);
    (void)g;
    if (size < 48) DONE(INSUFFICIENT_SIZE);
    snprintf(uuid, size, "GPU-d0b1e000-0000-4000-8000-%012d", (int)((char *)handle - handles));
    DONE(OK);
}

API int nvmlDeviceGetPciInfo_v3(void *handle, pci_info *pci)
{
    WITH_GPU(handle);
    (void)g;
    int i = (int)((char *)handle - handles);
    memset(pci, 0, sizeof *pci);
    pci->bus = (unsigned)(0x10 + i);
    snprintf(pci->bus_id, sizeof pci->bus_id, "00000000:%02X:00.0", pci->bus);
    snprintf(pci->bus_id_legacy, sizeof pci->bus_id_legacy, "0000:%02X:00.0", pci->bus);
    DONE(OK);
}

API int nvmlDeviceGetTotalEccErrors(void *handle, int error_type, int counter_type,
                                    unsigned long long *count)
{
    WITH_GPU(handle);
    *count = error_type == 1 && counter_type == 0 ? g->ecc : 0;
    DONE(OK);
}

API int nvmlDeviceGetRemappedRows(void *handle, unsigned *corr, unsigned *unc, unsigned *pending,
                                  unsigned *failure)
{
    WITH_GPU(handle);
    if (g->no_remap) DONE(NOT_SUPPORTED);
    *corr = 0;
    *unc = g->remap ? 1 : 0;
    *pending = g->remap == 1;
    *failure = g->remap == 2;
    DONE(OK);
}

API int nvmlDeviceGetRetiredPagesPendingStatus(void *handle, int *pending)
{
    WITH_GPU(handle);
    *pending = g->retired_pending ? 1 : 0;
    DONE(OK);
}

API int nvmlDeviceGetFieldValues(void *handle, int count, field_value *values)
{
    WITH_GPU(handle);
    if (count <= 0 || values == NULL) DONE(INVALID_ARGUMENT);
    for (int k = 0; k < count; k++) {
        if (values[k].field_id == 230 && !current.no_recovery) {
            values[k].value_type = 1;
            values[k].nvml_return = OK;
            values[k].v.ui = g->recovery;
        } else {
            values[k].nvml_return = NOT_SUPPORTED;
        }
    }
    DONE(OK);
}

API int nvmlDeviceGetNvLinkState(void *handle, unsigned link, int *active)
{
    WITH_GPU(handle);
    if (link >= (unsigned)current.nvlinks) DONE(INVALID_ARGUMENT);
    *active = (g->links_down >> link) & 1u ? 0 : 1;
    DONE(OK);
}

API int nvmlDeviceGetNvLinkErrorCounter(void *handle, unsigned link, int counter,
                                        unsigned long long *value)
{
    WITH_GPU(handle);
    if (link >= (unsigned)current.nvlinks) DONE(INVALID_ARGUMENT);
    *value = counter == 0 ? g->link_errors[link] : 0;
    DONE(OK);
}

API int nvmlDeviceGetCurrPcieLinkWidth(void *handle, unsigned *v)
{
    WITH_GPU(handle);
    *v = g->width;
    DONE(OK);
}

API int nvmlDeviceGetMaxPcieLinkWidth(void *handle, unsigned *v)
{
    WITH_GPU(handle);
    *v = g->width_max;
    DONE(OK);
}

API int nvmlDeviceGetCurrPcieLinkGeneration(void *handle, unsigned *v)
{
    WITH_GPU(handle);
    *v = g->gen;
    DONE(OK);
}

API int nvmlDeviceGetGpuMaxPcieLinkGeneration(void *handle, unsigned *v)
{
    WITH_GPU(handle);
    *v = g->gen_max;
    DONE(OK);
}

API int nvmlDeviceGetCurrentClocksEventReasons(void *handle, unsigned long long *reasons)
{
    WITH_GPU(handle);
    *reasons = g->throttle;
    DONE(OK);
}

API int nvmlDeviceGetTemperature(void *handle, int sensor, unsigned *celsius)
{
    WITH_GPU(handle);
    if (sensor != 0) DONE(INVALID_ARGUMENT);
    *celsius = g->temp;
    DONE(OK);
}

API int nvmlDeviceGetTemperatureThreshold(void *handle, int threshold, unsigned *celsius)
{
    WITH_GPU(handle);
    if (threshold != 1) DONE(NOT_SUPPORTED);
    *celsius = g->slowdown;
    DONE(OK);
}

API int nvmlEventSetCreate(event_set **set)
{
    *set = calloc(1, sizeof **set);
    return *set != NULL ? OK : 999;
}

API int nvmlDeviceRegisterEvents(void *handle, unsigned long long types, event_set *set)
{
    WITH_GPU(handle);
    (void)g;
    if (set == NULL || (types & 0x8ull) == 0) DONE(NOT_SUPPORTED);
    set->registered |= 1ull << ((char *)handle - handles);
    DONE(OK);
}

/* Hands out the next xid line of the state file (once per process), polling
 * the file every 5 ms until timeout_ms. */
API int nvmlEventSetWait_v2(event_set *set, event_data *data, unsigned timeout_ms)
{
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        pthread_mutex_lock(&lock);
        const state *s = refresh();
        while (delivered < s->xids) {
            int k = delivered++;
            int i = s->xid_gpu[k];
            if (!((set->registered >> i) & 1ull)) continue;
            memset(data, 0, sizeof *data);
            data->device = &handles[i];
            data->event_type = 0x8ull;
            data->event_data = s->xid_code[k];
            DONE(OK);
        }
        pthread_mutex_unlock(&lock);
        clock_gettime(CLOCK_MONOTONIC, &now);
        long long waited =
            (now.tv_sec - start.tv_sec) * 1000LL + (now.tv_nsec - start.tv_nsec) / 1000000;
        if (waited >= timeout_ms) return TIMEOUT;
        struct timespec tick = { 0, 5 * 1000000L };
        nanosleep(&tick, NULL);
    }
}

API int nvmlEventSetFree(event_set *set)
{
    free(set);
    return OK;
}
