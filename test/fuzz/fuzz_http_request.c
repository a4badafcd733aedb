/* libFuzzer target: the metrics endpoint's request parser and the Prometheus
 * line reader must accept or reject any bytes without reading out of bounds. */
#include "probe/probe.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    probe__http_request req;
    int rc = probe__http_parse((const char *)data, size, &req);
    if (rc > 0 && ((size_t)rc > size || req.path[0] != '/')) abort();
    if (rc < 0 && req.status < 400) abort();
    char *line = malloc(size + 1);
    if (line == NULL) return 0;
    memcpy(line, data, size);
    line[size] = '\0';
    probe__prom_sample sample;
    if (probe__prom_parse_line(line, &sample) == 1) {
        char value[64];
        probe__prom_label(sample.labels, "rank", value, sizeof value);
    }
    free(line);
    return 0;
}
