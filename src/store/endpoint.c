/*
 * Parsing of store endpoints as people write them: "host:port",
 * "[::1]:port". Shared by the client and elasticctl.
 */
#include "store/store.h"

#include <stdlib.h>

static int parse_port(const char *text, int *port)
{
    char *end = NULL;
    long value = strtol(text, &end, 10);
    if (text[0] == '\0' || *end != '\0' || value < 1 || value > 65535) return ELASTIC_EINVAL;
    *port = (int)value;
    return 0;
}

int store__parse_endpoint(const char *endpoint, char *host, size_t host_size, int *port)
{
    if (endpoint == NULL) return elastic__fail(ELASTIC_EINVAL, "endpoint is NULL");
    const char *host_start = endpoint, *host_end, *port_text;
    if (endpoint[0] == '[') {
        host_start = endpoint + 1;
        host_end = strchr(host_start, ']');
        if (host_end == NULL || host_end[1] != ':')
            return elastic__fail(ELASTIC_EINVAL, "endpoint \"%s\": expected [v6-address]:port", endpoint);
        port_text = host_end + 2;
    } else {
        host_end = strrchr(endpoint, ':');
        if (host_end == NULL || memchr(endpoint, ':', (size_t)(host_end - endpoint)) != NULL)
            return elastic__fail(ELASTIC_EINVAL, "endpoint \"%s\": expected host:port ([v6]:port for IPv6)",
                                 endpoint);
        port_text = host_end + 1;
    }
    size_t host_len = (size_t)(host_end - host_start);
    if (host_len == 0 || host_len >= host_size)
        return elastic__fail(ELASTIC_EINVAL, "endpoint \"%s\": empty or overlong host", endpoint);
    if (parse_port(port_text, port) != 0)
        return elastic__fail(ELASTIC_EINVAL, "endpoint \"%s\": port must be 1..65535", endpoint);
    memcpy(host, host_start, host_len);
    host[host_len] = '\0';
    return 0;
}
