/* The metrics endpoint's request parser and the Prometheus text reader. */
#include "test.h"
#include "common/http.h"
#include "common/prom.h"
#include "probe/probe.h" /* probe__prom_escape: the writer side */

static int parse(const char *text, elastic__http_request *req)
{
    return elastic__http_parse(text, strlen(text), req);
}

TEST(common_http_parses_get_and_head)
{
    elastic__http_request req;
    const char *get = "GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n";
    ASSERT_EQ(parse(get, &req), (int)strlen(get));
    ASSERT_STR_EQ(req.method, "GET");
    ASSERT_STR_EQ(req.path, "/metrics");
    ASSERT(parse("HEAD /healthz HTTP/1.0\r\n\r\n", &req) > 0);
    ASSERT_STR_EQ(req.method, "HEAD");
    ASSERT(parse("GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n", &req) > 0);
}

TEST(common_http_waits_for_a_whole_head)
{
    elastic__http_request req;
    ASSERT_EQ(parse("GET /metrics HTTP/1.1\r\nHost: a\r\n", &req), 0);
    ASSERT_EQ(parse("", &req), 0);
}

TEST(common_http_rejects_what_it_does_not_serve)
{
    elastic__http_request req;
    ASSERT_ERR(parse("POST /metrics HTTP/1.1\r\n\r\n", &req), ELASTIC_EPROTO);
    ASSERT_EQ(req.status, 405);
    ASSERT_ERR(parse("GET /metrics HTTP/2.0\r\n\r\n", &req), ELASTIC_EPROTO);
    ASSERT_EQ(req.status, 505);
    ASSERT_ERR(parse("GET metrics HTTP/1.1\r\n\r\n", &req), ELASTIC_EPROTO);
    ASSERT_ERR(parse("GET /m HTTP/1.1\r\nContent-Length: 5\r\n\r\n", &req), ELASTIC_EPROTO);
    ASSERT_ERR(parse("GET /m HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &req),
               ELASTIC_EPROTO);
    ASSERT_ERR(parse("GET /m HTTP/1.1\r\nno colon\r\n\r\n", &req), ELASTIC_EPROTO);
    ASSERT_ERR(parse("\r\n\r\n", &req), ELASTIC_EPROTO);
    ASSERT_ERR(elastic__http_parse("GET /\0 HTTP/1.1\r\n\r\n", 20, &req), ELASTIC_EPROTO);
}

TEST(common_http_bounds_head_and_target)
{
    elastic__http_request req;
    static char big[ELASTIC__HTTP_MAX_HEAD + 16];
    memset(big, 'a', sizeof big);
    memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
    ASSERT_ERR(elastic__http_parse(big, sizeof big, &req), ELASTIC_ELIMIT);
    ASSERT_EQ(req.status, 431);
    char target[ELASTIC__HTTP_MAX_TARGET + 64];
    int n =
        snprintf(target, sizeof target, "GET /%0*d HTTP/1.1\r\n\r\n", ELASTIC__HTTP_MAX_TARGET, 7);
    ASSERT_ERR(elastic__http_parse(target, (size_t)n, &req), ELASTIC_ELIMIT);
    ASSERT_EQ(req.status, 414);
}

TEST(common_prom_lines_parse)
{
    elastic__prom_sample s;
    ASSERT_EQ(elastic__prom_parse_line("# HELP x y", &s), 0);
    ASSERT_EQ(elastic__prom_parse_line("", &s), 0);
    ASSERT_EQ(elastic__prom_parse_line("elastic_generation 3", &s), 1);
    ASSERT_STR_EQ(s.name, "elastic_generation");
    ASSERT(s.value == 3);
    ASSERT_EQ(
        elastic__prom_parse_line("elastic_worker_step{rank=\"2\",local_rank=\"0\"} 1.5e3\n", &s),
        1);
    ASSERT(s.value == 1500);
    char value[32];
    ASSERT(elastic__prom_label(s.labels, "local_rank", value, sizeof value));
    ASSERT_STR_EQ(value, "0");
    ASSERT(elastic__prom_label(s.labels, "rank", value, sizeof value));
    ASSERT_STR_EQ(value, "2");
    ASSERT(!elastic__prom_label(s.labels, "node", value, sizeof value));
    ASSERT(elastic__prom_parse_line("bad{x=\"1\" 3", &s) < 0);
    ASSERT(elastic__prom_parse_line("x 3 junk", &s) < 0);
    ASSERT(elastic__prom_parse_line("x", &s) < 0);
}

TEST(probe_prometheus_escapes_round_trip)
{
    char escaped[64], line[128], back[64];
    probe__prom_escape("a\"b\\c\nd}", escaped, sizeof escaped);
    ASSERT_STR_EQ(escaped, "a\\\"b\\\\c\\nd}");
    snprintf(line, sizeof line, "m{run_id=\"%s\"} 1", escaped);
    elastic__prom_sample s;
    ASSERT_EQ(elastic__prom_parse_line(line, &s), 1);
    ASSERT(elastic__prom_label(s.labels, "run_id", back, sizeof back));
    ASSERT_STR_EQ(back, "a\"b\\c\nd}");
}
