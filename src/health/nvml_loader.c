/*
 * Finds NVML at first use with dlopen, so libelastic has no link-time or
 * run-time dependency on the NVIDIA driver: ELASTIC_NVML_LIBRARY when set (the
 * tests' double; a wrong override is an error, not a reason to pick up another
 * copy), else libnvidia-ml.so.1 where the loader finds it. nvmlInit runs once;
 * the result, or the one line saying why NVML is not available, is kept for
 * the life of the process (the driver's handles stay valid as long).
 */
#include "common/common.h"
#include "common/dynlib.h"
#include "health/nvml.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static nvml__api loaded;
static int load_rc;
static char load_error[512];

static int open_nvml(elastic__dynlib *lib)
{
    static const char *const names[] = { "libnvidia-ml.so.1", "libnvidia-ml.so", NULL };
    char why[384];
    if (elastic__dynlib_open(lib, "ELASTIC_NVML_LIBRARY", names, RTLD_NOW | RTLD_LOCAL, why,
                             sizeof why) == 0)
        return 0;
    const char *override = getenv("ELASTIC_NVML_LIBRARY");
    bool overridden = override != NULL && *override != '\0';
    snprintf(load_error, sizeof load_error, "NVML not available (%s%s)",
             overridden ? "" : "no NVIDIA driver on this node: ", why);
    return ELASTIC_EUNSUPPORTED;
}

/* The newer name first, its older alias after where NVML renamed a call. */
#define SYM(field, required, ...) ELASTIC__DYNSYM(&loaded.field, required, __VA_ARGS__)

static int bind(const elastic__dynlib *lib)
{
    const elastic__dynsym syms[] = {
        SYM(init, true, "nvmlInit_v2"),
        SYM(shutdown, true, "nvmlShutdown"),
        SYM(error_string, true, "nvmlErrorString"),
        SYM(system_get_driver_version, true, "nvmlSystemGetDriverVersion"),
        SYM(device_get_count, true, "nvmlDeviceGetCount_v2"),
        SYM(device_get_handle_by_index, true, "nvmlDeviceGetHandleByIndex_v2"),
        SYM(device_get_uuid, true, "nvmlDeviceGetUUID"),
        SYM(device_get_pci_info, true, "nvmlDeviceGetPciInfo_v3"),
        SYM(device_get_total_ecc_errors, false, "nvmlDeviceGetTotalEccErrors"),
        SYM(device_get_remapped_rows, false, "nvmlDeviceGetRemappedRows"),
        SYM(device_get_retired_pages_pending_status, false,
            "nvmlDeviceGetRetiredPagesPendingStatus"),
        SYM(device_get_field_values, false, "nvmlDeviceGetFieldValues"),
        SYM(device_get_nvlink_state, false, "nvmlDeviceGetNvLinkState"),
        SYM(device_get_nvlink_error_counter, false, "nvmlDeviceGetNvLinkErrorCounter"),
        SYM(device_get_curr_pcie_link_width, false, "nvmlDeviceGetCurrPcieLinkWidth"),
        SYM(device_get_max_pcie_link_width, false, "nvmlDeviceGetMaxPcieLinkWidth"),
        SYM(device_get_curr_pcie_link_generation, false, "nvmlDeviceGetCurrPcieLinkGeneration"),
        /* The GPU's own maximum (not the slot's, which the other call reports on newer drivers). */
        SYM(device_get_max_pcie_link_generation, false, "nvmlDeviceGetGpuMaxPcieLinkGeneration",
            "nvmlDeviceGetMaxPcieLinkGeneration"),
        SYM(device_get_clocks_event_reasons, false, "nvmlDeviceGetCurrentClocksEventReasons",
            "nvmlDeviceGetCurrentClocksThrottleReasons"),
        SYM(device_get_temperature, false, "nvmlDeviceGetTemperature"),
        SYM(device_get_temperature_threshold, false, "nvmlDeviceGetTemperatureThreshold"),
        SYM(event_set_create, false, "nvmlEventSetCreate"),
        SYM(device_register_events, false, "nvmlDeviceRegisterEvents"),
        SYM(event_set_wait, false, "nvmlEventSetWait_v2"),
        SYM(event_set_free, false, "nvmlEventSetFree"),
    };
    char why[384];
    if (elastic__dynlib_bind(lib, syms, ELASTIC__ARRAY_LEN(syms), why, sizeof why) == 0) return 0;
    snprintf(load_error, sizeof load_error, "NVML not available (%s)", why);
    return ELASTIC_EUNSUPPORTED;
}

static void load(void)
{
    elastic__dynlib lib;
    load_rc = open_nvml(&lib);
    if (load_rc != 0) return;
    load_rc = bind(&lib);
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
