/* The health checks on /metrics: every line parses as Prometheus text, each
 * GPU is labelled by index, UUID and PCI bus id, and what is not ok shows. */
#include "support/health_fixture.h"
#include "common/prom.h"
#include "common/text.h"

/* The value of the sample named `name` whose labels hold `label`="`want`"; -1: none. */
static double sample(const char *page, const char *name, const char *label, const char *want)
{
    char line[1024];
    for (const char *p = page; *p != '\0';) {
        size_t n = strcspn(p, "\n");
        ASSERT(n < sizeof line);
        memcpy(line, p, n);
        line[n] = '\0';
        p += n + (p[n] == '\n');
        elastic__prom_sample s;
        int rc = elastic__prom_parse_line(line, &s);
        if (rc < 0) FAIL("not a Prometheus line: %s", line);
        if (rc == 0 || strcmp(s.name, name) != 0) continue;
        char value[128];
        if (label == NULL ||
            (elastic__prom_label(s.labels, label, value, sizeof value) && strcmp(value, want) == 0))
            return s.value;
    }
    return -1;
}

TEST(health_metrics_label_each_gpu_and_show_what_is_not_ok)
{
    health_use_double();
    health_state("gpus 2\ntemp 1 95\npcie_width 0 8 16\n");
    health__monitor *m = health_gpu_monitor(2);
    health__report *r = health_new_report();
    health__round(m, r);
    health_state("gpus 2\ntemp 1 95\npcie_width 0 8 16\nlost 1\n");
    health__round(m, r);
    elastic__text page;
    elastic__text_init(&page, 1u << 20);
    health__render_metrics(r, &page);
    ASSERT(!page.overflow);
    ASSERT_EQ(sample(page.data, "elastic_node_health", NULL, NULL), 2);
    ASSERT_EQ(sample(page.data, "elastic_health_check_rounds_total", NULL, NULL), 2);
    ASSERT_EQ(sample(page.data, "elastic_gpu_health", "gpu", "0"), 1);
    ASSERT_EQ(sample(page.data, "elastic_gpu_health", "gpu", "1"), 2);
    ASSERT_EQ(sample(page.data, "elastic_gpu_health", "pci_bus_id", "00000000:11:00.0"), 2);
    ASSERT_EQ(
        sample(page.data, "elastic_gpu_health", "uuid", "GPU-d0b1e000-0000-4000-8000-000000000001"),
        2);
    ASSERT_EQ(sample(page.data, "elastic_gpu_pcie_link_width", "gpu", "0"), 8);
    ASSERT_EQ(sample(page.data, "elastic_gpu_temperature_celsius", "gpu", "0"), 40);
    ASSERT_EQ(sample(page.data, "elastic_gpu_temperature_celsius", "gpu", "1"),
              -1); /* lost: not read */
    ASSERT_EQ(sample(page.data, "elastic_health_check_verdict", "check", "gpu_lost"), 2);
    ASSERT_EQ(sample(page.data, "elastic_health_check_verdict", "check", "pcie_width"), 1);
    elastic__text_free(&page);
    health__close(m);
    free(r);
}
