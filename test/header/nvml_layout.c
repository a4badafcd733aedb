/* Compiled (syntax only) by `make header-check` where the CUDA toolkit's
 * nvml.h exists: the NVML ABI that src/health/nvml.h declares by hand must
 * match the real header's values and layouts. */
#include "health/nvml.h"

#include <nvml.h>
#include <stddef.h>

_Static_assert(sizeof(nvml__pci_info) == sizeof(nvmlPciInfo_t), "nvmlPciInfo_t size");
_Static_assert(offsetof(nvml__pci_info, bus_id) == offsetof(nvmlPciInfo_t, busId), "busId");
_Static_assert(sizeof(nvml__event_data) == sizeof(nvmlEventData_t), "nvmlEventData_t size");
_Static_assert(offsetof(nvml__event_data, event_data) == offsetof(nvmlEventData_t, eventData),
               "eventData");
_Static_assert(sizeof(nvml__field_value) == sizeof(nvmlFieldValue_t), "nvmlFieldValue_t size");
_Static_assert(offsetof(nvml__field_value, nvml_return) == offsetof(nvmlFieldValue_t, nvmlReturn),
               "nvmlReturn");
_Static_assert(offsetof(nvml__field_value, value) == offsetof(nvmlFieldValue_t, value), "value");
_Static_assert(sizeof(nvml__value) == sizeof(nvmlValue_t), "nvmlValue_t size");
_Static_assert(NVML__ERROR_TIMEOUT == NVML_ERROR_TIMEOUT &&
                   NVML__ERROR_GPU_IS_LOST == NVML_ERROR_GPU_IS_LOST &&
                   NVML__ERROR_NOT_SUPPORTED == NVML_ERROR_NOT_SUPPORTED,
               "return codes");
_Static_assert(NVML__EVENT_TYPE_XID_CRITICAL_ERROR == nvmlEventTypeXidCriticalError, "Xid event");
_Static_assert(NVML__FI_DEV_GET_GPU_RECOVERY_ACTION == NVML_FI_DEV_GET_GPU_RECOVERY_ACTION,
               "recovery field");
_Static_assert(NVML__GPU_RECOVERY_ACTION_DRAIN_AND_RESET ==
                   NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET,
               "recovery actions");
_Static_assert(NVML__CLOCKS_EVENT_HW_SLOWDOWN == nvmlClocksThrottleReasonHwSlowdown &&
                   NVML__CLOCKS_EVENT_HW_THERMAL == nvmlClocksThrottleReasonHwThermalSlowdown &&
                   NVML__CLOCKS_EVENT_HW_POWER_BRAKE ==
                       nvmlClocksThrottleReasonHwPowerBrakeSlowdown &&
                   NVML__CLOCKS_EVENT_SW_THERMAL == nvmlClocksThrottleReasonSwThermalSlowdown,
               "throttle reasons");
_Static_assert(NVML__NVLINK_MAX_LINKS >= NVML_NVLINK_MAX_LINKS, "NVLink links");
_Static_assert(NVML__DEVICE_UUID_V2_BUFFER_SIZE == NVML_DEVICE_UUID_V2_BUFFER_SIZE, "UUID size");
_Static_assert(NVML__NVLINK_ERROR_DL_CRC_DATA == NVML_NVLINK_ERROR_DL_CRC_DATA, "NVLink counters");
_Static_assert(NVML__TEMPERATURE_THRESHOLD_SLOWDOWN == NVML_TEMPERATURE_THRESHOLD_SLOWDOWN,
               "slowdown threshold");
_Static_assert(NVML__MEMORY_ERROR_TYPE_UNCORRECTED == NVML_MEMORY_ERROR_TYPE_UNCORRECTED &&
                   NVML__VOLATILE_ECC == NVML_VOLATILE_ECC,
               "ECC counters");
