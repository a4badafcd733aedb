/* libFuzzer target for src/common/endpoint.c: whatever is accepted has a
 * bounded host of allowed characters and a port in range, and writing it
 * back as host:port ([host]:port for IPv6) parses to the same host and port;
 * a refused text leaves host and port untouched. */
#include "common/common.h"
#include "common/endpoint.h"

#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    int default_port = data[0] & 1 ? 29400 : ELASTIC__PORT_REQUIRED;
    size_t host_size = data[0] & 2 ? 16 : ELASTIC__HOST_MAX + 1;
    char *text = malloc(size);
    if (text == NULL) return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    char host[ELASTIC__HOST_MAX + 1] = "-", again_host[ELASTIC__HOST_MAX + 1];
    int port = -5, again_port = -5;
    int rc = elastic__endpoint_parse("fuzz", text, default_port, host, host_size, &port);
    if (rc != 0) {
        if (rc != ELASTIC_EINVAL || strcmp(host, "-") != 0 || port != -5) abort();
        free(text);
        return 0;
    }
    size_t len = strlen(host);
    if (len == 0 || len >= host_size || len > ELASTIC__HOST_MAX || port < 1 || port > 65535)
        abort();
    if (strpbrk(host, " []/\\\t\n") != NULL) abort();
    char back[ELASTIC__HOST_MAX + 16];
    snprintf(back, sizeof back, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
    if (elastic__endpoint_parse("fuzz", back, ELASTIC__PORT_REQUIRED, again_host, sizeof again_host,
                                &again_port) != 0 ||
        strcmp(again_host, host) != 0 || again_port != port)
        abort();
    free(text);
    return 0;
}
