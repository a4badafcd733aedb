/*
 * The one grammar for "where is it" text: store endpoints, --rdzv-endpoint,
 * elasticctl's --endpoint. host:port, [ipv6]:port, and (when the caller has a
 * default port) host or [ipv6] alone. docs/OPERATIONS.md, "Endpoints".
 */
#ifndef ELASTIC_COMMON_ENDPOINT_H
#define ELASTIC_COMMON_ENDPOINT_H

#include <stddef.h>

/* A DNS name is at most 253 characters; an IPv6 literal with a zone fits. */
#define ELASTIC__HOST_MAX 253
/* default_port for callers that need the port written out. */
#define ELASTIC__PORT_REQUIRED 0

/* Splits `text` into host (without brackets) and port. The host is
 * [A-Za-z0-9._-] (a name or IPv4 address), or an IPv6 address in brackets
 * (hex digits, ':', '.', and a %zone); the port 1..65535 in strict decimal.
 * Without a port: *port = default_port, or an error when it is
 * ELASTIC__PORT_REQUIRED. An unbracketed text with several ':' is refused
 * ("::1:80" could be either). 0, or ELASTIC_EINVAL with one line naming
 * `what` (e.g. "--rdzv-endpoint"), the text and the rule it breaks; host
 * and port are written only on success. */
int elastic__endpoint_parse(const char *what, const char *text, int default_port, char *host,
                            size_t host_size, int *port);

#endif /* ELASTIC_COMMON_ENDPOINT_H */
