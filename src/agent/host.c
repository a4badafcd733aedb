/*
 * Where the job's store lives: whether an endpoint's host (parsed by
 * common/endpoint.c) names this machine (then this agent hosts the store,
 * as torchrun's c10d backend does).
 */
#include "agent/agent.h"

#include "common/common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static bool same_address(const struct sockaddr *a, const struct sockaddr *b)
{
    if (a == NULL || b == NULL || a->sa_family != b->sa_family) return false;
    if (a->sa_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (a->sa_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                      &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr)) == 0;
    return false;
}

static bool is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
    return false;
}

bool agent__address_is_local(const char *host)
{
    char hostname[256];
    if (strcmp(host, "localhost") == 0) return true;
    if (gethostname(hostname, sizeof hostname) == 0 && strcmp(host, hostname) == 0) return true;
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *found = NULL;
    if (getaddrinfo(host, NULL, &hints, &found) != 0) return false;
    struct ifaddrs *interfaces = NULL;
    bool local = false;
    getifaddrs(&interfaces);
    for (struct addrinfo *ai = found; ai != NULL && !local; ai = ai->ai_next) {
        if (is_loopback(ai->ai_addr)) local = true;
        for (struct ifaddrs *ifa = interfaces; ifa != NULL && !local; ifa = ifa->ifa_next)
            local = same_address(ai->ai_addr, ifa->ifa_addr);
    }
    freeifaddrs(interfaces);
    freeaddrinfo(found);
    return local;
}

bool agent__name_is_loopback_alias(const char *host)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC,
                              .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_NUMERICHOST };
    struct addrinfo *found = NULL;
    if (getaddrinfo(host, NULL, &hints, &found) == 0) { /* a literal address means what it says */
        freeaddrinfo(found);
        return false;
    }
    if (strcmp(host, "localhost") == 0) return false;
    hints.ai_flags =
        AI_PASSIVE; /* as the store's listener resolves it: the first answer is bound */
    if (getaddrinfo(host, NULL, &hints, &found) != 0) return false;
    bool loopback = is_loopback(found->ai_addr);
    freeaddrinfo(found);
    return loopback;
}

int agent__route_source(const char *host, int port, char *out, size_t cap)
{
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM }, *found = NULL;
    int gai = getaddrinfo(host, service, &hints, &found);
    if (gai != 0)
        return elastic__fail(ELASTIC_ECONNECT, "no route source for %s: %s", host,
                             gai_strerror(gai));
    int err = ENETUNREACH;
    bool done = false;
    for (struct addrinfo *ai = found; ai != NULL && !done; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct sockaddr_storage self;
        socklen_t len = sizeof self;
        if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
            getsockname(fd, (struct sockaddr *)&self, &len) == 0)
            done = getnameinfo((struct sockaddr *)&self, len, out, (socklen_t)cap, NULL, 0,
                               NI_NUMERICHOST) == 0;
        else
            err = errno;
        if (fd >= 0) close(fd);
    }
    freeaddrinfo(found);
    if (!done)
        return elastic__fail(ELASTIC_ECONNECT, "no route source for %s: %s", host, strerror(err));
    return 0;
}
