/*
 * The endpoint grammar of common/endpoint.h: bracket or colon split, then
 * the host's characters and the port through the strict integer parser
 * (fuzzed by test/fuzz/fuzz_endpoint.c).
 */
#include "common/endpoint.h"

#include "common/common.h"
#include "common/parse_int.h"

/* The longest text worth reading: "[" host "]:" 5 digits. */
#define ENDPOINT_MAX_TEXT (ELASTIC__HOST_MAX + 8)

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '-' || c == '_';
}

/* A host name or IPv4 address: name characters only. */
static bool valid_name(const char *host, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!name_char(host[i])) return false;
    return true;
}

/* What may sit between brackets: an IPv6 address (at least one ':'), maybe
 * an IPv4 tail, maybe a %zone naming an interface. */
static bool valid_v6(const char *host, size_t len)
{
    bool colon = false, zone = false;
    for (size_t i = 0; i < len; i++) {
        char c = host[i];
        if (zone) {
            if (!name_char(c)) return false;
        } else if (c == '%') {
            if (i + 1 == len) return false;
            zone = true;
        } else if (c == ':') {
            colon = true;
        } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
                     c == '.')) {
            return false;
        }
    }
    return colon;
}

static int refuse(const char *what, const char *text, const char *rule)
{
    size_t len = strlen(text);
    return elastic__fail(ELASTIC_EINVAL, "%s: \"%.*s%s\" %s", what, len > 80 ? 80 : (int)len, text,
                         len > 80 ? "..." : "", rule);
}

int elastic__endpoint_parse(const char *what, const char *text, int default_port, char *host,
                            size_t host_size, int *port)
{
    if (what == NULL) what = "endpoint";
    if (text == NULL || text[0] == '\0')
        return elastic__fail(ELASTIC_EINVAL, "%s: empty endpoint", what);
    if (strnlen(text, ENDPOINT_MAX_TEXT + 1) > ENDPOINT_MAX_TEXT)
        return refuse(what, text, "is too long");
    const char *host_start = text, *port_text = NULL;
    size_t host_len;
    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (close == NULL) return refuse(what, text, "has no closing ]");
        host_start = text + 1;
        host_len = (size_t)(close - host_start);
        if (close[1] == ':')
            port_text = close + 2;
        else if (close[1] != '\0')
            return refuse(what, text, "is not [ipv6-address]:port");
        if (!valid_v6(host_start, host_len))
            return refuse(what, text, "has no IPv6 address between [ ]");
    } else {
        const char *colon = strchr(text, ':');
        if (colon != NULL && strchr(colon + 1, ':') != NULL)
            return refuse(what, text,
                          "is ambiguous: write an IPv6 address in brackets, [addr]:port");
        host_len = colon != NULL ? (size_t)(colon - text) : strlen(text);
        if (colon != NULL) port_text = colon + 1;
        if (host_len == 0) return refuse(what, text, "has no host before the port");
        if (!valid_name(text, host_len))
            return refuse(what, text, "has a host outside [A-Za-z0-9._-]");
    }
    if (host_len > ELASTIC__HOST_MAX || host_len >= host_size)
        return refuse(what, text, "has an overlong host");
    int parsed = default_port;
    if (port_text != NULL && port_text[0] == '\0')
        return refuse(what, text, "has nothing after ':'");
    if (port_text != NULL && elastic__parse_int(NULL, port_text, 1, 65535, &parsed) != 0)
        return refuse(what, text, "has a port outside 1..65535");
    if (port_text == NULL && default_port == ELASTIC__PORT_REQUIRED)
        return refuse(what, text, "has no port (host:port or [ipv6-address]:port)");
    memcpy(host, host_start, host_len);
    host[host_len] = '\0';
    *port = parsed;
    return 0;
}
