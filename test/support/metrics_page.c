/*
 * Reading an agent's /metrics in the tests (metrics_page.h).
 */
#include "support/metrics_page.h"

#include "common/prom.h"
#include "support/agent_harness.h"
#include "test.h"

#include <stdio.h>

void metrics_endpoint_from(const char *err_path, int timeout_ms, char *out, size_t cap)
{
    const char *announced[] = { "metrics on http://", NULL };
    char line[512], format[32];
    if (agent_harness_wait_lines(err_path, announced, 1, timeout_ms) != 1 ||
        !agent_harness_nth_line(err_path, announced, 0, line, sizeof line))
        FAIL("%s never said where its metrics are", err_path);
    snprintf(format, sizeof format, "%%%zu[^/]", cap - 1);
    if (sscanf(strstr(line, "http://") + 7, format, out) != 1) FAIL("no endpoint in: %s", line);
}

double metrics_sample(const char *page, const char *name, const char *label, const char *value)
{
    char line[2048];
    for (const char *p = page; *p != '\0';) {
        size_t len = strcspn(p, "\n");
        snprintf(line, sizeof line, "%.*s", (int)len, p);
        p += len + (p[len] == '\n');
        elastic__prom_sample s;
        if (elastic__prom_parse_line(line, &s) < 0) FAIL("malformed metrics line: %s", line);
        char found[32];
        if (strcmp(s.name, name) == 0 &&
            (value == NULL || (elastic__prom_label(s.labels, label, found, sizeof found) &&
                               strcmp(found, value) == 0)))
            return s.value;
    }
    return -1;
}
