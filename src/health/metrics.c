/*
 * The health checks on /metrics: per GPU (labelled by index, UUID and PCI bus
 * id) what the last round read, the node's worst verdict, and each check that
 * is not ok. Verdicts are numbers: 0 ok, 1 warning, 2 fatal.
 */
#include "common/text.h"
#include "health/health.h"

static void head(elastic__text *out, const char *name, const char *type, const char *help)
{
    elastic__text_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Label values come from NVML and sysfs: only characters a label may hold plainly. */
static void label_safe(const char *in, char *out, size_t size)
{
    size_t n = 0;
    for (; *in != '\0' && n + 1 < size; in++) {
        char c = *in;
        bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     c == '-' || c == ':' || c == '.' || c == '_' || c == '/';
        out[n++] = plain ? c : '_';
    }
    out[n] = '\0';
}

static void gauge(elastic__text *out, const health__report *r, const char *name, const char *help,
                  size_t field)
{
    bool any = false;
    for (int i = 0; i < r->gpu_count && i < HEALTH__MAX_GPUS; i++) {
        const health__gpu *g = &r->gpus[i];
        long long value = *(const long long *)((const char *)g + field);
        if (!g->present || value < 0) continue;
        if (!any) head(out, name, "gauge", help);
        any = true;
        char uuid[96], bus[32];
        label_safe(g->uuid, uuid, sizeof uuid);
        label_safe(g->pci_bus_id, bus, sizeof bus);
        elastic__text_printf(out, "%s{gpu=\"%d\",uuid=\"%s\",pci_bus_id=\"%s\"} %lld\n", name, i,
                             uuid, bus, value);
    }
}

void health__render_metrics(const health__report *r, elastic__text *out)
{
    head(out, "elastic_node_health", "gauge",
         "The last health check round's worst verdict (0 ok, 1 warning, 2 fatal).");
    elastic__text_printf(out, "elastic_node_health %d\n", (int)r->worst);
    head(out, "elastic_health_check_rounds_total", "counter", "Health check rounds run.");
    elastic__text_printf(out, "elastic_health_check_rounds_total %llu\n",
                         (unsigned long long)r->round);
    head(out, "elastic_health_check_cpu_seconds", "gauge",
         "CPU time of the last health check round (this process).");
    elastic__text_printf(out, "elastic_health_check_cpu_seconds %.6f\n", r->cpu_ns / 1e9);
    if (r->gpu_count > 0) {
        head(out, "elastic_gpu_health", "gauge",
             "The GPU's worst verdict in the last round (0 ok, 1 warning, 2 fatal).");
        for (int i = 0; i < r->gpu_count && i < HEALTH__MAX_GPUS; i++) {
            char uuid[96], bus[32];
            label_safe(r->gpus[i].uuid, uuid, sizeof uuid);
            label_safe(r->gpus[i].pci_bus_id, bus, sizeof bus);
            elastic__text_printf(
                out, "elastic_gpu_health{gpu=\"%d\",uuid=\"%s\",pci_bus_id=\"%s\"} %d\n", i, uuid,
                bus, r->gpus[i].present ? (int)r->gpus[i].verdict : 2);
        }
    }
    gauge(out, r, "elastic_gpu_temperature_celsius", "GPU temperature.",
          offsetof(health__gpu, temperature_c));
    gauge(out, r, "elastic_gpu_ecc_uncorrected_volatile",
          "Uncorrected ECC errors since the driver loaded.",
          offsetof(health__gpu, ecc_uncorrected));
    gauge(out, r, "elastic_gpu_recovery_action",
          "NVML's GPU recovery action (0 none, 1 reset, 2 reboot, 3 drain P2P, 4 drain and reset).",
          offsetof(health__gpu, recovery_action));
    gauge(out, r, "elastic_gpu_clocks_event_reasons", "NVML clocks event (throttle) reason bits.",
          offsetof(health__gpu, throttle_reasons));
    gauge(out, r, "elastic_gpu_pcie_link_width", "Current PCIe link width (lanes).",
          offsetof(health__gpu, pcie_width));
    gauge(out, r, "elastic_gpu_pcie_link_generation", "Current PCIe link generation.",
          offsetof(health__gpu, pcie_gen));
    gauge(out, r, "elastic_gpu_nvlink_down", "NVLink links down.",
          offsetof(health__gpu, nvlink_down));
    gauge(out, r, "elastic_gpu_last_xid", "The last Xid seen (in the last round).",
          offsetof(health__gpu, last_xid));
    bool any = false;
    for (int i = 0; i < r->count; i++) {
        const health__finding *f = &r->findings[i];
        if (f->verdict == HEALTH__OK) continue;
        if (!any)
            head(out, "elastic_health_check_verdict", "gauge",
                 "Checks not ok in the last round, by check and GPU or port (1 warning, 2 fatal).");
        any = true;
        char port[48];
        label_safe(f->port, port, sizeof port);
        elastic__text_printf(
            out, "elastic_health_check_verdict{check=\"%s\",gpu=\"%d\",port=\"%s\"} %d\n", f->check,
            f->gpu, port, (int)f->verdict);
    }
}
