/* Tests of src/common/endpoint.c: the one endpoint grammar (store client,
 * --rdzv-endpoint, elasticctl --endpoint). What torchrun's --rdzv_endpoint
 * accepts in the normal cases, and the ambiguous or broken texts refused
 * with one line naming the field. */
#include "common/common.h"
#include "common/endpoint.h"
#include "test.h"

static void accepts(const char *text, int default_port, const char *want_host, int want_port)
{
    char host[ELASTIC__HOST_MAX + 1];
    int port = -1;
    if (elastic__endpoint_parse("ep", text, default_port, host, sizeof host, &port) != 0)
        FAIL("\"%s\" refused: %s", text, elastic_last_error());
    ASSERT_STR_EQ(host, want_host);
    ASSERT_EQ(port, want_port);
}

static void refuses(const char *text, int default_port)
{
    char host[64] = "untouched";
    int port = -1;
    if (elastic__endpoint_parse("ep", text, default_port, host, sizeof host, &port) !=
        ELASTIC_EINVAL)
        FAIL("\"%s\" accepted as %s port %d", text ? text : "(null)", host, port);
    ASSERT_STR_EQ(host, "untouched");
    ASSERT_EQ(port, -1);
}

TEST(common_endpoint_accepts_host_port_and_bracketed_ipv6)
{
    accepts("node1:1234", ELASTIC__PORT_REQUIRED, "node1", 1234);
    accepts("10.0.0.7:29400", ELASTIC__PORT_REQUIRED, "10.0.0.7", 29400);
    accepts("a-b_c.example.com:1", ELASTIC__PORT_REQUIRED, "a-b_c.example.com", 1);
    accepts("h:65535", ELASTIC__PORT_REQUIRED, "h", 65535);
    accepts("[::1]:80", ELASTIC__PORT_REQUIRED, "::1", 80);
    accepts("[fe80::1%eth0]:80", ELASTIC__PORT_REQUIRED, "fe80::1%eth0", 80);
    accepts("[::ffff:10.1.2.3]:5", ELASTIC__PORT_REQUIRED, "::ffff:10.1.2.3", 5);
}

TEST(common_endpoint_port_may_default_when_the_caller_has_one)
{
    accepts("node1", 29400, "node1", 29400);
    accepts("[::1]", 29400, "::1", 29400);
    accepts("node1:7", 29400, "node1", 7);
    refuses("node1", ELASTIC__PORT_REQUIRED);
    refuses("[::1]", ELASTIC__PORT_REQUIRED);
}

TEST(common_endpoint_refuses_bad_ports)
{
    static const char *const bad[] = { "host:",      "host:0",    "host:65536", "host:99999",
                                       "host:+80",   "host:-1",   "host: 80",   "host:80 ",
                                       "host:8o",    "host:0x50", "[::1]:",     "[::1]:0",
                                       "[::1]:65536" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        refuses(bad[i], ELASTIC__PORT_REQUIRED);
        refuses(bad[i], 29400); /* a default never excuses a bad explicit port */
    }
}

TEST(common_endpoint_refuses_ambiguous_ipv6_and_bad_hosts)
{
    static const char *const bad[] = { NULL,         "",         ":80",       "::1:80",
                                       "::1",        "fe80::1",  "[::1",      "[::1]80",
                                       "[::1]:80:1", "[]:80",    "[host]:80", "[1.2.3.4]:80",
                                       "[::1%]:80",  " host:80", "host :80",  "ho st:80",
                                       "host/x:80",  "höst:80",  "[::1]x",    "a:b:c" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) refuses(bad[i], 29400);
}

TEST(common_endpoint_host_length_is_bounded)
{
    char text[ELASTIC__HOST_MAX + 16], host[ELASTIC__HOST_MAX + 1];
    int port = 0;
    memset(text, 'a', ELASTIC__HOST_MAX);
    snprintf(text + ELASTIC__HOST_MAX, sizeof text - ELASTIC__HOST_MAX, ":80");
    ASSERT_OK(elastic__endpoint_parse("ep", text, 0, host, sizeof host, &port));
    ASSERT_EQ(strlen(host), ELASTIC__HOST_MAX);
    memset(text, 'a', ELASTIC__HOST_MAX + 1); /* one more */
    snprintf(text + ELASTIC__HOST_MAX + 1, sizeof text - ELASTIC__HOST_MAX - 1, ":80");
    ASSERT_ERR(elastic__endpoint_parse("ep", text, 0, host, sizeof host, &port), ELASTIC_EINVAL);
    char small[8];
    ASSERT_ERR(elastic__endpoint_parse("ep", "longer-than-8:80", 0, small, sizeof small, &port),
               ELASTIC_EINVAL);
    ASSERT_OK(elastic__endpoint_parse("ep", "seven77:80", 0, small, sizeof small, &port));
    ASSERT_STR_EQ(small, "seven77");
}

TEST(common_endpoint_error_is_one_line_naming_field_text_and_rule)
{
    char host[64];
    int port;
    ASSERT_ERR(
        elastic__endpoint_parse("--rdzv-endpoint", "::1:80", 29400, host, sizeof host, &port),
        ELASTIC_EINVAL);
    ASSERT_STR_EQ(
        elastic_last_error(),
        "--rdzv-endpoint: \"::1:80\" is ambiguous: write an IPv6 address in brackets, [addr]:port");
    ASSERT_ERR(elastic__endpoint_parse("store endpoint", "h:0", 0, host, sizeof host, &port),
               ELASTIC_EINVAL);
    ASSERT_STR_EQ(elastic_last_error(), "store endpoint: \"h:0\" has a port outside 1..65535");
    ASSERT_ERR(elastic__endpoint_parse("store endpoint", "h", 0, host, sizeof host, &port),
               ELASTIC_EINVAL);
    ASSERT(strchr(elastic_last_error(), '\n') == NULL);
    ASSERT(strstr(elastic_last_error(), "has no port") != NULL);
    ASSERT_ERR(elastic__endpoint_parse("ep", "h:", 29400, host, sizeof host, &port),
               ELASTIC_EINVAL);
    ASSERT(strstr(elastic_last_error(), "has nothing after ':'") != NULL);
}
