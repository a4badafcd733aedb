/* libFuzzer target: the Prometheus text parser elasticctl runs on an agent's
 * /metrics page, line by line, and the label lookup on what it returns. */
#include "common/prom.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (text == NULL) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    for (char *line = text, *next; line != NULL; line = next) {
        next = strchr(line, '\n');
        if (next != NULL) *next++ = '\0';
        elastic__prom_sample sample;
        if (elastic__prom_parse_line(line, &sample) != 1) continue;
        if (memchr(sample.name, '\0', sizeof sample.name) == NULL) abort();
        char value[64];
        (void)elastic__prom_label(sample.labels, "rank", value, sizeof value);
        (void)elastic__prom_label(sample.labels, "", value, sizeof value);
    }
    free(text);
    return 0;
}
