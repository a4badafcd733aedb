/*
 * The NVML checks of every GPU in one round. Each check reads one thing and
 * adds one finding per GPU (ok, warning or fatal; docs/HEALTH.md); a call the
 * driver does not support (NOT_SUPPORTED, or an entry point this NVML lacks)
 * adds nothing. The first round takes the baselines that later rounds compare
 * against: counters that rise, links that were up.
 */
#include "health/health.h"
#include "health/nvml.h"

#include <stdio.h>
#include <stdlib.h>

#define DEFAULT_TEMPERATURE_MAX_C 85
#define NVLINK_COUNTERS           4

typedef struct gpu_baseline {
    nvml__device device; /* NULL: the handle could not be had at open */
    char uuid[96], pci_bus_id[32];
    int temperature_max_c;
    bool taken;
    unsigned long long ecc_uncorrected;
    unsigned long long nvlink_active;  /* bit per link, at the first round */
    unsigned long long nvlink_present; /* links the driver answers for */
    unsigned long long nvlink_errors[NVML__NVLINK_MAX_LINKS];
} gpu_baseline;

struct health__gpus {
    const nvml__api *api;
    unsigned count; /* at open */
    int expected;   /* the config's, or the first round's count */
    gpu_baseline gpus[HEALTH__MAX_GPUS];
    health__xid_watch *xids;
};

static void identify(const nvml__api *api, gpu_baseline *g)
{
    if (api->device_get_uuid(g->device, g->uuid, sizeof g->uuid) != NVML__SUCCESS)
        g->uuid[0] = '\0';
    g->uuid[sizeof g->uuid - 1] = '\0';
    nvml__pci_info pci;
    memset(&pci, 0, sizeof pci);
    if (api->device_get_pci_info(g->device, &pci) == NVML__SUCCESS) {
        pci.bus_id[sizeof pci.bus_id - 1] = '\0';
        snprintf(g->pci_bus_id, sizeof g->pci_bus_id, "%s", pci.bus_id);
    }
}

static int temperature_limit(const nvml__api *api, const health__config *config,
                             nvml__device device)
{
    if (config->temperature_max_c > 0) return config->temperature_max_c;
    unsigned slowdown = 0;
    if (api->device_get_temperature_threshold != NULL &&
        api->device_get_temperature_threshold(device, NVML__TEMPERATURE_THRESHOLD_SLOWDOWN,
                                              &slowdown) == NVML__SUCCESS &&
        slowdown > 20 && slowdown < 150)
        return (int)slowdown - 5; /* before the hardware slows itself down */
    return DEFAULT_TEMPERATURE_MAX_C;
}

health__gpus *health__gpus_open(const health__config *config, char *why, size_t why_size)
{
    const nvml__api *api = NULL;
    if (nvml__load(&api) != 0) {
        snprintf(why, why_size, "%s", elastic_last_error());
        return NULL;
    }
    health__gpus *gpus = calloc(1, sizeof *gpus);
    if (gpus == NULL) {
        snprintf(why, why_size, "out of memory");
        return NULL;
    }
    gpus->api = api;
    unsigned count = 0;
    int rc = api->device_get_count(&count);
    if (rc != NVML__SUCCESS) {
        snprintf(why, why_size, "NVML not available (nvmlDeviceGetCount: %s)",
                 nvml__error(api, rc));
        free(gpus);
        return NULL;
    }
    if (count > HEALTH__MAX_GPUS) count = HEALTH__MAX_GPUS;
    gpus->count = count;
    gpus->expected = config->expected_gpus;
    void *devices[HEALTH__MAX_GPUS] = { 0 };
    for (unsigned i = 0; i < count; i++) {
        gpu_baseline *g = &gpus->gpus[i];
        if (api->device_get_handle_by_index(i, &g->device) != NVML__SUCCESS) {
            g->device = NULL;
            continue;
        }
        identify(api, g);
        g->temperature_max_c = temperature_limit(api, config, g->device);
        devices[i] = g->device;
    }
    gpus->xids = health__xid_watch_start(api, devices, (int)count, config);
    return gpus;
}

void health__gpus_close(health__gpus *gpus)
{
    if (gpus == NULL) return;
    health__xid_watch_stop(gpus->xids);
    free(gpus); /* NVML stays initialised: other monitors of the process share it */
}

/* ---- the checks, one per function ---------------------------------------------- */

static void check_ecc(const nvml__api *api, gpu_baseline *g, int i, health__report *r)
{
    unsigned long long count = 0;
    if (api->device_get_total_ecc_errors == NULL ||
        api->device_get_total_ecc_errors(g->device, NVML__MEMORY_ERROR_TYPE_UNCORRECTED,
                                         NVML__VOLATILE_ECC, &count) != NVML__SUCCESS)
        return; /* ECC off or not supported */
    r->gpus[i].ecc_uncorrected = (long long)count;
    if (g->taken && count > g->ecc_uncorrected)
        health__add(r, "ecc_uncorrected", i, HEALTH__FATAL, (long long)count,
                    "%llu new uncorrected ECC errors in GPU memory (%llu since the driver loaded)",
                    count - g->ecc_uncorrected, count);
    else if (count > 0)
        health__add(r, "ecc_uncorrected", i, HEALTH__WARNING, (long long)count,
                    "%llu uncorrected ECC errors since the driver loaded (none new)", count);
    else
        health__add(r, "ecc_uncorrected", i, HEALTH__OK, 0, "no uncorrected ECC errors");
    if (!g->taken || count > g->ecc_uncorrected) g->ecc_uncorrected = count;
}

static void check_memory_repair(const nvml__api *api, gpu_baseline *g, int i, health__report *r)
{
    unsigned corrected = 0, uncorrected = 0, pending = 0, failure = 0;
    if (api->device_get_remapped_rows != NULL &&
        api->device_get_remapped_rows(g->device, &corrected, &uncorrected, &pending, &failure) ==
            NVML__SUCCESS) {
        if (failure)
            health__add(r, "row_remap", i, HEALTH__FATAL, (long long)uncorrected,
                        "row remapping failed: a bad memory row could not be replaced");
        else if (pending)
            health__add(r, "row_remap", i, HEALTH__FATAL, (long long)uncorrected,
                        "a row remap is pending: the GPU needs a reset before it is trusted");
        else
            health__add(r, "row_remap", i, HEALTH__OK, (long long)uncorrected,
                        "%u rows remapped (uncorrectable errors), none pending", uncorrected);
        return;
    }
    /* Before Ampere: page retirement instead of row remapping. */
    int retired_pending = 0;
    if (api->device_get_retired_pages_pending_status == NULL ||
        api->device_get_retired_pages_pending_status(g->device, &retired_pending) != NVML__SUCCESS)
        return;
    if (retired_pending == NVML__FEATURE_ENABLED)
        health__add(r, "retired_pages", i, HEALTH__FATAL, 1,
                    "a page retirement is pending: the GPU needs a reset before it is trusted");
    else
        health__add(r, "retired_pages", i, HEALTH__OK, 0, "no page retirement pending");
}

static const char *recovery_text(long long action)
{
    switch (action) {
    case NVML__GPU_RECOVERY_ACTION_GPU_RESET: return "the driver asks for a GPU reset";
    case NVML__GPU_RECOVERY_ACTION_NODE_REBOOT: return "the driver asks for a node reboot";
    case NVML__GPU_RECOVERY_ACTION_DRAIN_P2P:
        return "the driver asks to drain peer-to-peer traffic";
    case NVML__GPU_RECOVERY_ACTION_DRAIN_AND_RESET:
        return "reduced capacity: the driver asks to drain and reset the GPU";
    default: return "the driver asks for a recovery action this library does not know";
    }
}

static void check_recovery_action(const nvml__api *api, gpu_baseline *g, int i, health__report *r)
{
    if (api->device_get_field_values == NULL) return;
    nvml__field_value field;
    memset(&field, 0, sizeof field);
    field.field_id = NVML__FI_DEV_GET_GPU_RECOVERY_ACTION;
    if (api->device_get_field_values(g->device, 1, &field) != NVML__SUCCESS ||
        field.nvml_return != NVML__SUCCESS)
        return; /* a driver before r570 */
    long long action = field.value.ui;
    r->gpus[i].recovery_action = action;
    if (action == NVML__GPU_RECOVERY_ACTION_NONE)
        health__add(r, "recovery_action", i, HEALTH__OK, 0, "no recovery action needed");
    else
        health__add(r, "recovery_action", i, HEALTH__FATAL, action, "%s", recovery_text(action));
}

static void check_nvlink(const nvml__api *api, gpu_baseline *g, int i, health__report *r)
{
    if (api->device_get_nvlink_state == NULL) return;
    unsigned long long present = 0, active = 0;
    for (unsigned link = 0; link < NVML__NVLINK_MAX_LINKS; link++) {
        if (g->taken && !(g->nvlink_present & (1ull << link))) continue;
        int state = 0;
        if (api->device_get_nvlink_state(g->device, link, &state) != NVML__SUCCESS) continue;
        present |= 1ull << link;
        if (state == NVML__FEATURE_ENABLED) active |= 1ull << link;
    }
    if (!g->taken) {
        g->nvlink_present = present;
        g->nvlink_active = active;
    }
    if (present == 0) return; /* no NVLink on this GPU */
    unsigned long long lost = g->nvlink_active & ~active, down = present & ~active;
    r->gpus[i].nvlink_down = __builtin_popcountll(down);
    if (lost)
        health__add(r, "nvlink_state", i, HEALTH__FATAL, __builtin_popcountll(down),
                    "%d NVLink links went down (mask 0x%llx), %d of %d up",
                    __builtin_popcountll(lost), lost, __builtin_popcountll(active),
                    __builtin_popcountll(present));
    else if (down)
        health__add(r, "nvlink_state", i, HEALTH__WARNING, __builtin_popcountll(down),
                    "%d NVLink links down since the first check (mask 0x%llx)",
                    __builtin_popcountll(down), down);
    else
        health__add(r, "nvlink_state", i, HEALTH__OK, 0, "all %d NVLink links up",
                    __builtin_popcountll(present));

    if (api->device_get_nvlink_error_counter == NULL) return;
    static const int counters[NVLINK_COUNTERS] = { NVML__NVLINK_ERROR_DL_REPLAY,
                                                   NVML__NVLINK_ERROR_DL_RECOVERY,
                                                   NVML__NVLINK_ERROR_DL_CRC_FLIT,
                                                   NVML__NVLINK_ERROR_DL_CRC_DATA };
    unsigned long long growth = 0;
    unsigned long long growing = 0;
    for (unsigned link = 0; link < NVML__NVLINK_MAX_LINKS; link++) {
        if (!(present & (1ull << link))) continue;
        unsigned long long sum = 0;
        bool read = false;
        for (int c = 0; c < NVLINK_COUNTERS; c++) {
            unsigned long long value = 0;
            if (api->device_get_nvlink_error_counter(g->device, link, counters[c], &value) ==
                NVML__SUCCESS) {
                sum += value;
                read = true;
            }
        }
        if (!read) continue;
        if (g->taken && sum > g->nvlink_errors[link]) {
            growth += sum - g->nvlink_errors[link];
            growing |= 1ull << link;
        }
        g->nvlink_errors[link] = sum;
    }
    if (growth)
        health__add(r, "nvlink_errors", i, HEALTH__WARNING, (long long)growth,
                    "%llu NVLink replays/recoveries/CRC errors since the last check (links 0x%llx)",
                    growth, growing);
    else
        health__add(r, "nvlink_errors", i, HEALTH__OK, 0, "NVLink error counters steady");
}

static bool read_uint(int (*fn)(nvml__device, unsigned *), nvml__device device, unsigned *value)
{
    return fn != NULL && fn(device, value) == NVML__SUCCESS;
}

static void check_pcie(const nvml__api *api, gpu_baseline *g, int i, bool idle, health__report *r)
{
    unsigned width = 0, width_max = 0, gen = 0, gen_max = 0;
    if (read_uint(api->device_get_curr_pcie_link_width, g->device, &width) &&
        read_uint(api->device_get_max_pcie_link_width, g->device, &width_max)) {
        r->gpus[i].pcie_width = width;
        r->gpus[i].pcie_width_max = width_max;
        if (width < width_max)
            health__add(r, "pcie_width", i, HEALTH__WARNING, width,
                        "PCIe link at x%u, below the GPU's x%u", width, width_max);
        else
            health__add(r, "pcie_width", i, HEALTH__OK, width, "PCIe link at x%u", width);
    }
    if (read_uint(api->device_get_curr_pcie_link_generation, g->device, &gen) &&
        read_uint(api->device_get_max_pcie_link_generation, g->device, &gen_max)) {
        r->gpus[i].pcie_gen = gen;
        r->gpus[i].pcie_gen_max = gen_max;
        /* An idle GPU lowers its link generation to save power: only a busy one is judged. */
        if (gen < gen_max && !idle)
            health__add(r, "pcie_gen", i, HEALTH__WARNING, gen,
                        "PCIe link at gen %u while busy, below the GPU's gen %u", gen, gen_max);
        else
            health__add(r, "pcie_gen", i, HEALTH__OK, gen, "PCIe link at gen %u%s", gen,
                        gen < gen_max ? " (idle)" : "");
    }
}

#define CLOCKS_EVENT_GPU_IDLE 0x1ull
#define THROTTLE_BAD                                                  \
    (NVML__CLOCKS_EVENT_HW_SLOWDOWN | NVML__CLOCKS_EVENT_HW_THERMAL | \
     NVML__CLOCKS_EVENT_HW_POWER_BRAKE | NVML__CLOCKS_EVENT_SW_THERMAL)

/* Returns whether the GPU is idle (for the PCIe generation check). */
static bool check_throttle(const nvml__api *api, gpu_baseline *g, int i, health__report *r)
{
    unsigned long long reasons = 0;
    if (api->device_get_clocks_event_reasons == NULL ||
        api->device_get_clocks_event_reasons(g->device, &reasons) != NVML__SUCCESS)
        return true; /* unknown: do not judge the link generation */
    r->gpus[i].throttle_reasons = (long long)reasons;
    unsigned long long bad = reasons & THROTTLE_BAD;
    if (bad) {
        char why[128] = "";
        size_t used = 0;
        static const struct {
            unsigned long long bit;
            const char *name;
        } names[] = { { NVML__CLOCKS_EVENT_HW_SLOWDOWN, "hardware slowdown" },
                      { NVML__CLOCKS_EVENT_HW_THERMAL, "hardware thermal slowdown" },
                      { NVML__CLOCKS_EVENT_HW_POWER_BRAKE, "power brake" },
                      { NVML__CLOCKS_EVENT_SW_THERMAL, "software thermal slowdown" } };
        for (size_t n = 0; n < ELASTIC__ARRAY_LEN(names); n++)
            if (bad & names[n].bit && used < sizeof why)
                used += (size_t)snprintf(why + used, sizeof why - used, "%s%s", used ? ", " : "",
                                         names[n].name);
        health__add(r, "throttle", i, HEALTH__WARNING, (long long)bad, "clocks throttled: %s", why);
    } else {
        health__add(r, "throttle", i, HEALTH__OK, 0, "clocks not throttled by hardware");
    }
    return (reasons & CLOCKS_EVENT_GPU_IDLE) != 0;
}

static void check_temperature(const nvml__api *api, gpu_baseline *g, int i, health__report *r)
{
    unsigned celsius = 0;
    if (api->device_get_temperature == NULL ||
        api->device_get_temperature(g->device, NVML__TEMPERATURE_GPU, &celsius) != NVML__SUCCESS)
        return;
    r->gpus[i].temperature_c = celsius;
    if ((int)celsius >= g->temperature_max_c)
        health__add(r, "temperature", i, HEALTH__WARNING, celsius, "%u C, at or over %d C", celsius,
                    g->temperature_max_c);
    else
        health__add(r, "temperature", i, HEALTH__OK, celsius, "%u C (limit %d C)", celsius,
                    g->temperature_max_c);
}

static void check_xids(health__gpus *gpus, health__report *r)
{
    if (gpus->xids == NULL) return;
    health__xid xids[64];
    int lost = 0;
    int n = health__xid_drain(gpus->xids, xids, (int)ELASTIC__ARRAY_LEN(xids), &lost);
    for (int k = 0; k < n; k++) {
        health__verdict verdict;
        const char *meaning = health__xid_meaning(xids[k].xid, &verdict);
        int gpu = xids[k].gpu;
        if (gpu >= 0 && gpu < HEALTH__MAX_GPUS) r->gpus[gpu].last_xid = xids[k].xid;
        health__add(r, "xid", gpu, verdict, xids[k].xid, "Xid %u: %s", xids[k].xid, meaning);
    }
    if (lost > 0)
        health__add(r, "xid", -1, HEALTH__FATAL, lost,
                    "%d Xids arrived faster than they were read and were not kept", lost);
}

/* One GPU: whether it answers at all (a GPU that fell off the bus does not). */
static bool check_present(const nvml__api *api, health__gpus *gpus, unsigned i, health__report *r)
{
    gpu_baseline *g = &gpus->gpus[i];
    if (g->device == NULL && api->device_get_handle_by_index(i, &g->device) == NVML__SUCCESS)
        identify(api, g);
    int rc = NVML__ERROR_NOT_FOUND;
    if (g->device != NULL) {
        unsigned celsius;
        /* The cheapest call every GPU answers; GPU_IS_LOST when it fell off the bus. */
        rc = api->device_get_temperature != NULL
                 ? api->device_get_temperature(g->device, NVML__TEMPERATURE_GPU, &celsius)
                 : NVML__SUCCESS;
        if (rc == NVML__ERROR_NOT_SUPPORTED) rc = NVML__SUCCESS;
    }
    snprintf(r->gpus[i].uuid, sizeof r->gpus[i].uuid, "%s", g->uuid);
    snprintf(r->gpus[i].pci_bus_id, sizeof r->gpus[i].pci_bus_id, "%s", g->pci_bus_id);
    if (rc == NVML__SUCCESS) {
        r->gpus[i].present = true;
        return true;
    }
    health__add(r, "gpu_lost", (int)i, HEALTH__FATAL, rc, "the GPU does not answer: %s",
                nvml__error(api, rc));
    return false;
}

void health__gpus_check(health__gpus *gpus, const health__config *config, health__report *r)
{
    const nvml__api *api = gpus->api;
    unsigned count = 0;
    int rc = api->device_get_count(&count);
    if (rc != NVML__SUCCESS) {
        health__add(r, "gpu_count", -1, HEALTH__FATAL, -1, "nvmlDeviceGetCount: %s",
                    nvml__error(api, rc));
        return;
    }
    if (count > HEALTH__MAX_GPUS) count = HEALTH__MAX_GPUS;
    r->gpu_count = (int)count;
    if (gpus->expected <= 0) gpus->expected = (int)gpus->count; /* the baseline */
    if ((int)count < gpus->expected)
        health__add(r, "gpu_count", -1, HEALTH__FATAL, count, "%u GPUs present, %d expected%s",
                    count, gpus->expected,
                    config->expected_gpus > 0 ? "" : " (as many as at the first check)");
    else
        health__add(r, "gpu_count", -1, HEALTH__OK, count, "%u GPUs present (%d expected)", count,
                    gpus->expected);
    unsigned known = count < gpus->count ? count : gpus->count;
    for (unsigned i = 0; i < HEALTH__MAX_GPUS; i++) {
        health__gpu *out = &r->gpus[i];
        *out = (health__gpu){ .temperature_c = -1,
                              .ecc_uncorrected = -1,
                              .recovery_action = -1,
                              .throttle_reasons = -1,
                              .pcie_width = -1,
                              .pcie_width_max = -1,
                              .pcie_gen = -1,
                              .pcie_gen_max = -1,
                              .nvlink_down = -1,
                              .last_xid = -1 };
    }
    for (unsigned i = 0; i < known; i++) {
        gpu_baseline *g = &gpus->gpus[i];
        if (!check_present(api, gpus, i, r)) continue;
        check_ecc(api, g, (int)i, r);
        check_memory_repair(api, g, (int)i, r);
        check_recovery_action(api, g, (int)i, r);
        check_nvlink(api, g, (int)i, r);
        bool idle = check_throttle(api, g, (int)i, r);
        check_pcie(api, g, (int)i, idle, r);
        check_temperature(api, g, (int)i, r);
        g->taken = true;
    }
    check_xids(gpus, r);
}
