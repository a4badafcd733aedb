/*
 * The metrics endpoint's request parser: just enough HTTP/1.x for a scraper.
 * The head is bounded (ELASTIC__HTTP_MAX_HEAD), the target too; only GET and
 * HEAD without a body are accepted. Pure and allocation-free, so it is fuzzed.
 */
#include "common/http.h"

#include <strings.h>

static int reject(elastic__http_request *req, int status, int code, const char *what)
{
    req->status = status;
    return elastic__fail(code, "http: %s", what);
}

static const char *find_head_end(const char *buf, size_t len)
{
    for (size_t i = 0; i + 3 < len; i++)
        if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' && buf[i + 3] == '\n')
            return buf + i + 4;
    return NULL;
}

/* "METHOD SP target SP HTTP/1.x" */
static int parse_request_line(const char *line, size_t len, elastic__http_request *req)
{
    const char *sp1 = memchr(line, ' ', len);
    if (sp1 == NULL || sp1 == line) return reject(req, 400, ELASTIC_EPROTO, "bad request line");
    size_t method_len = (size_t)(sp1 - line);
    const char *target = sp1 + 1;
    const char *sp2 = memchr(target, ' ', len - method_len - 1);
    if (sp2 == NULL || sp2 == target) return reject(req, 400, ELASTIC_EPROTO, "bad request line");
    size_t version_len = len - (size_t)(sp2 + 1 - line);
    if (version_len != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0 || (sp2[8] != '0' && sp2[8] != '1'))
        return reject(req, 505, ELASTIC_EPROTO, "unsupported version");
    if (method_len >= sizeof req->method)
        return reject(req, 405, ELASTIC_EPROTO, "method not allowed");
    memcpy(req->method, line, method_len);
    req->method[method_len] = '\0';
    if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0)
        return reject(req, 405, ELASTIC_EPROTO, "method not allowed");
    size_t target_len = 0;
    while (target + target_len < sp2 && target[target_len] != '?') target_len++;
    if (target[0] != '/') return reject(req, 400, ELASTIC_EPROTO, "target is not a path");
    if (target_len >= sizeof req->path) return reject(req, 414, ELASTIC_ELIMIT, "target too long");
    for (size_t i = 0; i < target_len; i++)
        if ((unsigned char)target[i] <= 0x20 || (unsigned char)target[i] >= 0x7f)
            return reject(req, 400, ELASTIC_EPROTO, "bad byte in target");
    memcpy(req->path, target, target_len);
    req->path[target_len] = '\0';
    return 0;
}

/* A body on GET/HEAD is refused rather than skipped: nothing here needs one. */
static int check_header_line(const char *line, size_t len, elastic__http_request *req)
{
    const char *colon = memchr(line, ':', len);
    if (colon == NULL || colon == line) return reject(req, 400, ELASTIC_EPROTO, "bad header line");
    size_t name_len = (size_t)(colon - line);
    for (size_t i = 0; i < len; i++)
        if (line[i] == '\r' || line[i] == '\n')
            return reject(req, 400, ELASTIC_EPROTO, "bad byte in header");
    bool content_length = name_len == 14 && strncasecmp(line, "content-length", 14) == 0;
    bool chunked = name_len == 17 && strncasecmp(line, "transfer-encoding", 17) == 0;
    if (chunked) return reject(req, 400, ELASTIC_EPROTO, "request body not accepted");
    if (content_length) {
        const char *value = colon + 1;
        const char *end = line + len;
        while (value < end && (*value == ' ' || *value == '\t')) value++;
        while (end > value && (end[-1] == ' ' || end[-1] == '\t')) end--;
        if (end - value != 1 || *value != '0')
            return reject(req, 400, ELASTIC_EPROTO, "request body not accepted");
    }
    return 0;
}

int elastic__http_parse(const char *buf, size_t len, elastic__http_request *req)
{
    memset(req, 0, sizeof *req);
    const char *end =
        find_head_end(buf, len < ELASTIC__HTTP_MAX_HEAD ? len : ELASTIC__HTTP_MAX_HEAD);
    if (end == NULL) {
        if (len >= ELASTIC__HTTP_MAX_HEAD)
            return reject(req, 431, ELASTIC_ELIMIT, "request head too large");
        return 0;
    }
    if (memchr(buf, '\0', (size_t)(end - buf)) != NULL)
        return reject(req, 400, ELASTIC_EPROTO, "NUL byte in head");
    const char *line = buf;
    bool first = true;
    while (line < end - 2) { /* the head's last line is the empty one */
        const char *eol = line;
        while (!(eol[0] == '\r' && eol[1] == '\n')) eol++;
        size_t line_len = (size_t)(eol - line);
        int rc = first ? parse_request_line(line, line_len, req)
                       : check_header_line(line, line_len, req);
        if (rc != 0) return rc;
        first = false;
        line = eol + 2;
    }
    if (first) return reject(req, 400, ELASTIC_EPROTO, "empty request");
    return (int)(end - buf);
}
