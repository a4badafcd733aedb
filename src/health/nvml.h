/*
 * What the health module uses of NVML (libnvidia-ml.so.1), declared by hand so
 * that no NVML header is needed to build and no NVML library to run: the
 * library is loaded with dlopen (nvml_loader.c). Names, values and struct
 * layouts are NVML's (nvml.h, driver r535..r580); test/header/nvml_layout.c
 * checks them against the real header where one is installed.
 */
#ifndef ELASTIC_HEALTH_NVML_H
#define ELASTIC_HEALTH_NVML_H

#include <stdint.h>

/* nvmlReturn_t values we tell apart */
#define NVML__SUCCESS                  0
#define NVML__ERROR_UNINITIALIZED      1
#define NVML__ERROR_INVALID_ARG        2
#define NVML__ERROR_NOT_SUPPORTED      3
#define NVML__ERROR_NO_PERMISSION      4
#define NVML__ERROR_NOT_FOUND          6
#define NVML__ERROR_DRIVER_NOT_LOADED  9
#define NVML__ERROR_TIMEOUT            10
#define NVML__ERROR_FUNCTION_NOT_FOUND 13
#define NVML__ERROR_GPU_IS_LOST        15
#define NVML__ERROR_RESET_REQUIRED     16
#define NVML__ERROR_UNKNOWN            999

#define NVML__DEVICE_UUID_V2_BUFFER_SIZE 96 /* NVML_DEVICE_UUID_V2_BUFFER_SIZE */
#define NVML__PCI_BUS_ID_BUFFER_SIZE     32 /* NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE */
#define NVML__NVLINK_MAX_LINKS           36 /* NVML_NVLINK_MAX_LINKS (18 before r570) */

/* nvmlMemoryErrorType_t / nvmlEccCounterType_t */
#define NVML__MEMORY_ERROR_TYPE_UNCORRECTED 1
#define NVML__VOLATILE_ECC                  0
/* nvmlEnableState_t */
#define NVML__FEATURE_DISABLED 0
#define NVML__FEATURE_ENABLED  1
/* nvmlTemperatureSensors_t / nvmlTemperatureThresholds_t */
#define NVML__TEMPERATURE_GPU                0
#define NVML__TEMPERATURE_THRESHOLD_SLOWDOWN 1
/* nvmlNvLinkErrorCounter_t */
#define NVML__NVLINK_ERROR_DL_REPLAY   0
#define NVML__NVLINK_ERROR_DL_RECOVERY 1
#define NVML__NVLINK_ERROR_DL_CRC_FLIT 2
#define NVML__NVLINK_ERROR_DL_CRC_DATA 3
/* nvmlEventType: every Xid the driver reports (critical or not) */
#define NVML__EVENT_TYPE_XID_CRITICAL_ERROR 0x0000000000000008ull
/* nvmlClocksEventReasons (formerly ...ThrottleReasons) bits */
#define NVML__CLOCKS_EVENT_SW_THERMAL     0x0000000000000020ull
#define NVML__CLOCKS_EVENT_HW_SLOWDOWN    0x0000000000000008ull
#define NVML__CLOCKS_EVENT_HW_THERMAL     0x0000000000000040ull
#define NVML__CLOCKS_EVENT_HW_POWER_BRAKE 0x0000000000000080ull
/* nvmlFieldValue_t field ids (driver r570+ for the recovery action) */
#define NVML__FI_DEV_GET_GPU_RECOVERY_ACTION 230
/* nvmlDeviceGpuRecoveryAction_t */
#define NVML__GPU_RECOVERY_ACTION_NONE            0
#define NVML__GPU_RECOVERY_ACTION_GPU_RESET       1
#define NVML__GPU_RECOVERY_ACTION_NODE_REBOOT     2
#define NVML__GPU_RECOVERY_ACTION_DRAIN_P2P       3
#define NVML__GPU_RECOVERY_ACTION_DRAIN_AND_RESET 4
/* nvmlValueType_t */
#define NVML__VALUE_TYPE_UNSIGNED_INT 1

typedef struct nvml__device_st *nvml__device;       /* nvmlDevice_t */
typedef struct nvml__event_set_st *nvml__event_set; /* nvmlEventSet_t */

/* nvmlPciInfo_t (the _v3 layout) */
typedef struct nvml__pci_info {
    char bus_id_legacy[16];
    unsigned int domain, bus, device, pci_device_id, pci_sub_system_id;
    char bus_id[NVML__PCI_BUS_ID_BUFFER_SIZE];
} nvml__pci_info;

/* nvmlEventData_t */
typedef struct nvml__event_data {
    nvml__device device;
    unsigned long long event_type;
    unsigned long long event_data; /* the Xid for XID_CRITICAL_ERROR */
    unsigned int gpu_instance_id, compute_instance_id;
} nvml__event_data;

/* nvmlValue_t and nvmlFieldValue_t */
typedef union nvml__value {
    double d;
    unsigned int ui;
    unsigned long ul;
    unsigned long long ull;
    signed long long sll;
} nvml__value;

typedef struct nvml__field_value {
    unsigned int field_id, scope_id;
    long long timestamp, latency_usec;
    int value_type;  /* nvmlValueType_t */
    int nvml_return; /* nvmlReturn_t of this field */
    nvml__value value;
} nvml__field_value;

/* The entry points. Required ones are bound at load; the rest may be NULL
 * (an older driver): the check that needs one then reports nothing. */
typedef struct nvml__api {
    int (*init)(void);     /* nvmlInit_v2 */
    int (*shutdown)(void); /* nvmlShutdown */
    const char *(*error_string)(int);
    int (*system_get_driver_version)(char *, unsigned int);
    int (*device_get_count)(unsigned int *);                         /* _v2 */
    int (*device_get_handle_by_index)(unsigned int, nvml__device *); /* _v2 */
    int (*device_get_uuid)(nvml__device, char *, unsigned int);
    int (*device_get_pci_info)(nvml__device, nvml__pci_info *); /* _v3 */
    /* optional */
    int (*device_get_total_ecc_errors)(nvml__device, int error_type, int counter_type,
                                       unsigned long long *);
    int (*device_get_remapped_rows)(nvml__device, unsigned int *corr, unsigned int *unc,
                                    unsigned int *pending, unsigned int *failure);
    int (*device_get_retired_pages_pending_status)(nvml__device, int *pending);
    int (*device_get_field_values)(nvml__device, int count, nvml__field_value *values);
    int (*device_get_nvlink_state)(nvml__device, unsigned int link, int *active);
    int (*device_get_nvlink_error_counter)(nvml__device, unsigned int link, int counter,
                                           unsigned long long *);
    int (*device_get_curr_pcie_link_width)(nvml__device, unsigned int *);
    int (*device_get_max_pcie_link_width)(nvml__device, unsigned int *);
    int (*device_get_curr_pcie_link_generation)(nvml__device, unsigned int *);
    int (*device_get_max_pcie_link_generation)(nvml__device, unsigned int *);
    int (*device_get_clocks_event_reasons)(nvml__device, unsigned long long *);
    int (*device_get_temperature)(nvml__device, int sensor, unsigned int *);
    int (*device_get_temperature_threshold)(nvml__device, int threshold, unsigned int *);
    int (*event_set_create)(nvml__event_set *);
    int (*device_register_events)(nvml__device, unsigned long long types, nvml__event_set);
    int (*event_set_wait)(nvml__event_set, nvml__event_data *, unsigned int timeout_ms); /* _v2 */
    int (*event_set_free)(nvml__event_set);
} nvml__api;

/* nvml_loader.c: loads NVML and runs nvmlInit once per process (later calls
 * return the first result). ELASTIC_EUNSUPPORTED with one line "NVML not
 * available (why)" where the library or the driver is missing.
 * ELASTIC_NVML_LIBRARY names the library to load instead (the tests' double). */
int nvml__load(const nvml__api **api);
/* The text of an nvmlReturn_t (NVML's own when loaded). */
const char *nvml__error(const nvml__api *api, int result);

#endif /* ELASTIC_HEALTH_NVML_H */
