/*
 * Finds NVML at first use with dlopen, so libelastic has no link-time or
 * run-time dependency on the NVIDIA driver: ELASTIC_NVML_LIBRARY when set (the
 * tests' double; a wrong override is an error, not a reason to pick up another
 * copy), else libnvidia-ml.so.1 where the loader finds it. nvmlInit runs once;
 * the result, or the one line saying why NVML is not available, is kept for
 * the life of the process (the driver's handles stay valid as long).
 */
#include "common/common.h"
#include "health/nvml.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static nvml__api loaded;
static int load_rc;
static char load_error[512];

static void *open_nvml(void)
{
    const char *override = getenv("ELASTIC_NVML_LIBRARY");
    if (override != NULL && *override != '\0') {
        void *handle = dlopen(override, RTLD_NOW | RTLD_LOCAL);
        if (handle == NULL)
            snprintf(load_error, sizeof load_error,
                     "NVML not available (ELASTIC_NVML_LIBRARY=%s: %s)", override, dlerror());
        return handle;
    }
    static const char *const names[] = { "libnvidia-ml.so.1", "libnvidia-ml.so", NULL };
    for (const char *const *name = names; *name != NULL; name++) {
        void *handle = dlopen(*name, RTLD_NOW | RTLD_LOCAL);
        if (handle != NULL) return handle;
    }
    snprintf(load_error, sizeof load_error,
             "NVML not available (libnvidia-ml.so.1 not found: no NVIDIA driver on this node)");
    return NULL;
}

/* The first of `names` the library has (a newer name first, its older alias after). */
static void *symbol(void *lib, const char *const *names)
{
    for (; *names != NULL; names++) {
        void *fn = dlsym(lib, *names);
        if (fn != NULL) return fn;
    }
    return NULL;
}

#define BIND(field, required, ...)                                                               \
    do {                                                                                         \
        static const char *const names_[] = { __VA_ARGS__, NULL };                               \
        *(void **)&loaded.field = symbol(lib, names_);                                           \
        if (loaded.field == NULL && (required)) {                                                \
            snprintf(load_error, sizeof load_error, "NVML not available (the library lacks %s)", \
                     names_[0]);                                                                 \
            return ELASTIC_EUNSUPPORTED;                                                         \
        }                                                                                        \
    } while (0)

static int bind(void *lib)
{
    BIND(init, true, "nvmlInit_v2");
    BIND(shutdown, true, "nvmlShutdown");
    BIND(error_string, true, "nvmlErrorString");
    BIND(system_get_driver_version, true, "nvmlSystemGetDriverVersion");
    BIND(device_get_count, true, "nvmlDeviceGetCount_v2");
    BIND(device_get_handle_by_index, true, "nvmlDeviceGetHandleByIndex_v2");
    BIND(device_get_uuid, true, "nvmlDeviceGetUUID");
    BIND(device_get_pci_info, true, "nvmlDeviceGetPciInfo_v3");
    BIND(device_get_total_ecc_errors, false, "nvmlDeviceGetTotalEccErrors");
    BIND(device_get_remapped_rows, false, "nvmlDeviceGetRemappedRows");
    BIND(device_get_retired_pages_pending_status, false, "nvmlDeviceGetRetiredPagesPendingStatus");
    BIND(device_get_field_values, false, "nvmlDeviceGetFieldValues");
    BIND(device_get_nvlink_state, false, "nvmlDeviceGetNvLinkState");
    BIND(device_get_nvlink_error_counter, false, "nvmlDeviceGetNvLinkErrorCounter");
    BIND(device_get_curr_pcie_link_width, false, "nvmlDeviceGetCurrPcieLinkWidth");
    BIND(device_get_max_pcie_link_width, false, "nvmlDeviceGetMaxPcieLinkWidth");
    BIND(device_get_curr_pcie_link_generation, false, "nvmlDeviceGetCurrPcieLinkGeneration");
    /* The GPU's own maximum (not the slot's, which the other call reports on newer drivers). */
    BIND(device_get_max_pcie_link_generation, false, "nvmlDeviceGetGpuMaxPcieLinkGeneration",
         "nvmlDeviceGetMaxPcieLinkGeneration");
    BIND(device_get_clocks_event_reasons, false, "nvmlDeviceGetCurrentClocksEventReasons",
         "nvmlDeviceGetCurrentClocksThrottleReasons");
    BIND(device_get_temperature, false, "nvmlDeviceGetTemperature");
    BIND(device_get_temperature_threshold, false, "nvmlDeviceGetTemperatureThreshold");
    BIND(event_set_create, false, "nvmlEventSetCreate");
    BIND(device_register_events, false, "nvmlDeviceRegisterEvents");
    BIND(event_set_wait, false, "nvmlEventSetWait_v2");
    BIND(event_set_free, false, "nvmlEventSetFree");
    return 0;
}

static void load(void)
{
    void *lib = open_nvml();
    if (lib == NULL) {
        load_rc = ELASTIC_EUNSUPPORTED;
        return;
    }
    load_rc = bind(lib);
    if (load_rc != 0) return;
    int rc = loaded.init();
    if (rc != NVML__SUCCESS) {
        const char *text = loaded.error_string(rc);
        snprintf(load_error, sizeof load_error, "NVML not available (nvmlInit: %s, %d)",
                 text != NULL ? text : "error", rc);
        load_rc = ELASTIC_EUNSUPPORTED;
        return;
    }
    char driver[96] = "";
    if (loaded.system_get_driver_version(driver, sizeof driver) != NVML__SUCCESS)
        snprintf(driver, sizeof driver, "of unknown version");
    ELASTIC_LOG_I("health", "NVML loaded (driver %s)", driver);
}

int nvml__load(const nvml__api **api)
{
    pthread_once(&load_once, load);
    if (load_rc != 0) return elastic__fail(load_rc, "%s", load_error);
    *api = &loaded;
    return 0;
}

const char *nvml__error(const nvml__api *api, int result)
{
    const char *text = api != NULL && api->error_string != NULL ? api->error_string(result) : NULL;
    return text != NULL ? text : "NVML error";
}
