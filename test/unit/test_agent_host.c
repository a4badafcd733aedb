/* Where a hosted store listens: a host name that resolves to a loopback
 * address here (Debian's 127.0.1.1 for the hostname) is flagged, so the
 * agent can warn that other hosts cannot reach the store; literal addresses
 * and "localhost" mean what they say. */
#include "agent/agent.h"
#include "test.h"

#include <netdb.h>
#include <string.h>

TEST(agent_flags_host_names_that_resolve_to_loopback)
{
    ASSERT(!agent__name_is_loopback_alias("127.0.0.1"));
    ASSERT(!agent__name_is_loopback_alias("::1"));
    ASSERT(!agent__name_is_loopback_alias("localhost"));
    ASSERT(!agent__name_is_loopback_alias("10.1.2.3"));
    char name[256];
    ASSERT_EQ(gethostname(name, sizeof name), 0);
    struct addrinfo hints = { .ai_family = AF_UNSPEC,
                              .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_PASSIVE },
                    *found;
    if (getaddrinfo(name, NULL, &hints, &found) != 0) SKIP("the host name does not resolve here");
    const struct sockaddr *sa = found->ai_addr;
    bool loopback = sa->sa_family == AF_INET
                        ? (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127
                        : IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
    freeaddrinfo(found);
    ASSERT_EQ(agent__name_is_loopback_alias(name), loopback);
}

/* Without --local-addr a node is reached at its interface on the route to
 * the rendezvous endpoint: to loopback that is loopback; a name that does
 * not resolve is an error naming it (the agent then warns and says
 * 127.0.0.1). The multi-host case: netns_memckpt_spare_* without
 * --local-addr. */
TEST(agent_route_source_is_the_interface_toward_the_endpoint)
{
    char addr[64];
    ASSERT_OK(agent__route_source("127.0.0.1", 29400, addr, sizeof addr));
    ASSERT_STR_EQ(addr, "127.0.0.1");
    ASSERT_OK(agent__route_source("127.0.0.5", 29400, addr, sizeof addr));
    ASSERT_STR_EQ(addr, "127.0.0.1");
    ASSERT_EQ(agent__route_source("no-such-host.invalid", 29400, addr, sizeof addr),
              ELASTIC_ECONNECT);
    ASSERT(strstr(elastic_last_error(), "no-such-host.invalid") != NULL);
}
