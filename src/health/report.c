/* Findings: appending one to a round's report, verdict names. */
#include "health/health.h"

#include <stdio.h>

const char *health__verdict_name(health__verdict verdict)
{
    switch (verdict) {
    case HEALTH__OK: return "ok";
    case HEALTH__WARNING: return "warning";
    case HEALTH__FATAL: return "fatal";
    }
    return "unknown";
}

health__finding *health__add(health__report *report, const char *check, int gpu,
                             health__verdict verdict, long long value, const char *fmt, ...)
{
    if (verdict > report->worst) report->worst = verdict;
    if (report->count >= HEALTH__MAX_FINDINGS) {
        report->dropped++;
        return NULL;
    }
    health__finding *finding = &report->findings[report->count++];
    memset(finding, 0, sizeof *finding);
    snprintf(finding->check, sizeof finding->check, "%s", check);
    finding->gpu = gpu;
    finding->verdict = verdict;
    finding->value = value;
    if (gpu >= 0 && gpu < HEALTH__MAX_GPUS) {
        const health__gpu *g = &report->gpus[gpu];
        _Static_assert(sizeof finding->uuid == sizeof g->uuid, "uuid sizes");
        _Static_assert(sizeof finding->pci_bus_id == sizeof g->pci_bus_id, "bus id sizes");
        memcpy(finding->uuid, g->uuid, sizeof g->uuid); /* both NUL-terminated buffers */
        memcpy(finding->pci_bus_id, g->pci_bus_id, sizeof g->pci_bus_id);
        if (verdict > report->gpus[gpu].verdict) report->gpus[gpu].verdict = verdict;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(finding->text, sizeof finding->text, fmt, ap);
    va_end(ap);
    return finding;
}

void health__report_copy(health__report *dst, const health__report *src)
{
    int count = src->count < HEALTH__MAX_FINDINGS ? src->count : HEALTH__MAX_FINDINGS;
    memcpy(dst->findings, src->findings, (size_t)count * sizeof *src->findings);
    dst->count = count;
    dst->dropped = src->dropped;
    dst->worst = src->worst;
    dst->gpu_count = src->gpu_count;
    memcpy(dst->gpus, src->gpus, sizeof dst->gpus);
    memcpy(dst->nvml_status, src->nvml_status, sizeof dst->nvml_status);
    dst->cpu_ns = src->cpu_ns;
    dst->wall_ns = src->wall_ns;
    dst->round = src->round;
}
