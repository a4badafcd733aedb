/*
 * One lease's keep-alives on one stream of etcd's native gRPC API
 * (etcdserverpb.Lease/LeaseKeepAlive over HTTP/2). The JSON gateway turns
 * every keep-alive into a gRPC stream of its own inside etcd: about 0.45 ms
 * of etcd's CPU here, against 0.02 ms for a message on a stream that stays
 * open. 1,024 nodes keeping 2 s leases alive every 500 ms are 2,048
 * keep-alives a second: most of a core of one etcd member through the
 * gateway, a few percent on streams.
 *
 * Only the keeper thread (backend_etcd_lease.c) uses a stream. A stream that
 * fails (its member went away, lost its leader, refused the token, or held
 * the answer past the deadline) is closed; the keeper then asks the gateway,
 * which fails over across the endpoints, and the next keep-alive opens a
 * stream again on the endpoint that answered last. A stream that ends before
 * its first reply (an endpoint behind a proxy that passes only HTTP/1.1, a
 * member starting) is tried again only after 1, 3, 7 ... up to 63 keep-alives
 * through the gateway: a path without gRPC costs one failed try every half
 * minute or so, and a passing failure a few keep-alives. Until a stream has
 * answered once it gets one endpoint's share of the deadline, never all of it.
 *
 * Why a stream and not unary gRPC calls: Debian 12's libcurl (7.88.1) fails a
 * second request on a reused HTTP/2 connection without TLS ("Error in the
 * HTTP2 framing layer", curl#10634, fixed in 8.0), so each unary call would
 * cost a connection. A stream is one request for the lease's whole life.
 *
 * The messages are protobuf, hand-encoded: LeaseKeepAliveRequest {ID = 1}
 * and LeaseKeepAliveResponse {header = 1, ID = 2, TTL = 3}, each in gRPC's
 * framing (a flag byte, 0 = not compressed, and a 4-byte big-endian length).
 */
#include "etcd/lease_stream.h"

#include "common/clock.h"
#include "etcd/client_setup.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#define FRAME_HEADER 5
#define MAX_REPLY    512 /* a keep-alive reply is ~40 bytes; more is not etcd */
#define GRPC_PATH    "/etcdserverpb.Lease/LeaseKeepAlive"

struct etcd__lease_stream {
    etcd__client *client;
    CURLM *multi;
    CURL *easy; /* NULL: no stream open */
    struct curl_slist *headers;
    size_t endpoint;
    bool paused;   /* the upload waits for the next keep-alive (CURL_READFUNC_PAUSE) */
    bool ended;    /* the transfer is over: the member ended the stream or it broke */
    CURLcode end;  /* ... and how */
    bool answered; /* this stream gave a reply */
    unsigned failed_opens; /* streams in a row that ended before their first reply */
    unsigned skip;         /* keep-alives left for the gateway before the next try */
    unsigned char out[FRAME_HEADER + 11];
    size_t out_len, out_sent;
    unsigned char in[MAX_REPLY];
    size_t in_len;
    bool in_overflow;
    long http_status;
    bool grpc_type;  /* the reply's content-type is application/grpc */
    int grpc_status; /* from the trailers; -1 while none came */
    char grpc_message[128];
};

/* ---- protobuf, the two messages only ---- */

static size_t put_varint(unsigned char *out, uint64_t value)
{
    size_t n = 0;
    do {
        unsigned char byte = value & 0x7f;
        value >>= 7;
        out[n++] = byte | (value != 0 ? 0x80 : 0);
    } while (value != 0);
    return n;
}

/* 0 and the value, or -1 at the end of the buffer or past 10 bytes. */
static int get_varint(const unsigned char *data, size_t len, size_t *at, uint64_t *value)
{
    *value = 0;
    for (unsigned shift = 0; shift < 70; shift += 7) {
        if (*at >= len) return -1;
        unsigned char byte = data[(*at)++];
        *value |= (uint64_t)(byte & 0x7f) << shift;
        if ((byte & 0x80) == 0) return 0;
    }
    return -1;
}

/* The reply's ID and TTL; -1 on anything malformed. Fields it does not
 * know (the header, and any a later etcd adds) are skipped by wire type. */
static int decode_reply(const unsigned char *data, size_t len, int64_t *id, int64_t *ttl)
{
    size_t at = 0;
    *id = *ttl = 0;
    while (at < len) {
        uint64_t tag = 0, value = 0;
        if (get_varint(data, len, &at, &tag) != 0) return -1;
        switch (tag & 7) {
        case 0: /* varint */
            if (get_varint(data, len, &at, &value) != 0) return -1;
            if (tag >> 3 == 2) *id = (int64_t)value;
            if (tag >> 3 == 3) *ttl = (int64_t)value;
            break;
        case 2: /* length-delimited: the header */
            if (get_varint(data, len, &at, &value) != 0 || value > len - at) return -1;
            at += (size_t)value;
            break;
        case 1: at += 8; break;
        case 5: at += 4; break;
        default: return -1;
        }
        if (at > len) return -1;
    }
    return 0;
}

/* ---- libcurl's callbacks ---- */

static size_t on_send(char *buffer, size_t size, size_t n, void *arg)
{
    etcd__lease_stream *s = arg;
    size_t left = s->out_len - s->out_sent, cap = size * n;
    if (left == 0) {
        s->paused = true; /* resumed by the next keep-alive */
        return CURL_READFUNC_PAUSE;
    }
    size_t take = left < cap ? left : cap;
    memcpy(buffer, s->out + s->out_sent, take);
    s->out_sent += take;
    etcd__client_add_wire(s->client, take);
    return take;
}

static size_t on_receive(char *data, size_t size, size_t n, void *arg)
{
    etcd__lease_stream *s = arg;
    size_t len = size * n;
    if (len > sizeof s->in - s->in_len) {
        s->in_overflow = true;
        return 0; /* ends the transfer */
    }
    memcpy(s->in + s->in_len, data, len);
    s->in_len += len;
    etcd__client_add_wire(s->client, len);
    return len;
}

/* "name: value" when line is that header (any case), else NULL. */
static const char *header_value(const char *line, size_t len, const char *name)
{
    size_t name_len = strlen(name);
    if (len <= name_len || strncasecmp(line, name, name_len) != 0 || line[name_len] != ':')
        return NULL;
    const char *value = line + name_len + 1;
    while (*value == ' ') value++;
    return value;
}

/* Headers and, in HTTP/2, the trailers where gRPC puts its status. */
static size_t on_header(char *data, size_t size, size_t n, void *arg)
{
    etcd__lease_stream *s = arg;
    size_t len = size * n;
    char line[256];
    size_t keep = len < sizeof line - 1 ? len : sizeof line - 1;
    memcpy(line, data, keep);
    line[keep] = '\0';
    line[strcspn(line, "\r\n")] = '\0';
    etcd__client_add_wire(s->client, len);
    const char *value;
    if (strncmp(line, "HTTP/", 5) == 0) {
        const char *code = strchr(line, ' ');
        s->http_status = code != NULL ? strtol(code + 1, NULL, 10) : 0;
    } else if ((value = header_value(line, keep, "content-type")) != NULL) {
        s->grpc_type = strncasecmp(value, "application/grpc", 16) == 0;
    } else if ((value = header_value(line, keep, "grpc-status")) != NULL) {
        s->grpc_status = (int)strtol(value, NULL, 10);
    } else if ((value = header_value(line, keep, "grpc-message")) != NULL) {
        snprintf(s->grpc_message, sizeof s->grpc_message, "%s", value);
    }
    return len;
}

/* ---- the stream ---- */

static void close_stream(etcd__lease_stream *s)
{
    if (s->easy == NULL) return;
    if (!s->answered) {
        if (s->failed_opens < 6) s->failed_opens++;
        s->skip = (1u << s->failed_opens) - 1;
    }
    etcd__curl.multi_remove_handle(s->multi, s->easy);
    etcd__curl.easy_cleanup(s->easy);
    etcd__curl.slist_free_all(s->headers);
    s->easy = NULL;
    s->headers = NULL;
}

static int open_stream(etcd__lease_stream *s, int timeout_ms)
{
    s->endpoint = etcd__client_preferred(s->client);
    s->easy = etcd__curl.easy_init();
    if (s->easy == NULL) return elastic__fail(ELASTIC_ENOMEM, "etcd keep-alive stream: out of memory");
    s->paused = s->ended = s->in_overflow = s->grpc_type = s->answered = false;
    s->in_len = s->out_len = s->out_sent = 0;
    s->http_status = 0;
    s->grpc_status = -1;
    s->grpc_message[0] = '\0';
    CURL *h = s->easy;
    struct curl_slist *headers = etcd__curl.slist_append(NULL, "Content-Type: application/grpc");
    headers = etcd__curl.slist_append(headers, "TE: trailers");
    headers = etcd__curl.slist_append(headers, "Expect:");
    s->headers = etcd__client_setup(s->client, h, s->endpoint, GRPC_PATH, true, timeout_ms, headers);
    bool tls = strncmp(etcd__client_endpoint(s->client, s->endpoint), "https:", 6) == 0;
    /* Without TLS there is no ALPN to agree on HTTP/2: gRPC servers take it
     * from the first bytes. */
    etcd__curl.easy_setopt(h, CURLOPT_HTTP_VERSION,
                           tls ? (long)CURL_HTTP_VERSION_2TLS
                               : (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
    etcd__curl.easy_setopt(h, CURLOPT_POST, 1L);
    etcd__curl.easy_setopt(h, CURLOPT_READFUNCTION, on_send);
    etcd__curl.easy_setopt(h, CURLOPT_READDATA, s);
    etcd__curl.easy_setopt(h, CURLOPT_WRITEFUNCTION, on_receive);
    etcd__curl.easy_setopt(h, CURLOPT_WRITEDATA, s);
    etcd__curl.easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    etcd__curl.easy_setopt(h, CURLOPT_HEADERDATA, s);
    if (etcd__curl.multi_add_handle(s->multi, h) != CURLM_OK) {
        close_stream(s);
        return elastic__fail(ELASTIC_ENOMEM, "etcd keep-alive stream: curl_multi_add_handle failed");
    }
    return 0;
}

/* Why the stream ended, as the error to return (the stream is closed). */
static int stream_ended(etcd__lease_stream *s)
{
    const char *where = etcd__client_endpoint(s->client, s->endpoint);
    int rc;
    if (s->in_overflow)
        rc = elastic__fail(ELASTIC_EPROTO, "etcd keep-alive stream at %s: a reply over %d bytes",
                           where, MAX_REPLY);
    else if (s->http_status != 0 && (s->http_status != 200 || !s->grpc_type))
        rc = elastic__fail(ELASTIC_EUNSUPPORTED, "etcd keep-alive stream at %s: HTTP %ld, not gRPC",
                           where, s->http_status);
    else if (s->grpc_status > 0)
        rc = elastic__fail(s->grpc_status == 16 ? ELASTIC_EAUTH : ELASTIC_ECONNECT,
                           "etcd keep-alive stream at %s: gRPC status %d (%s)", where,
                           s->grpc_status, s->grpc_message);
    else
        rc = elastic__fail(ELASTIC_ECONNECT, "etcd keep-alive stream at %s ended: %s", where,
                           s->end != CURLE_OK ? etcd__curl.easy_strerror(s->end)
                                              : "closed by the member");
    close_stream(s);
    return rc;
}

int etcd__lease_reply_take(const unsigned char *in, size_t len, size_t *used, int64_t *id,
                           int64_t *ttl)
{
    *used = 0;
    if (len < FRAME_HEADER) return 0;
    uint32_t size = (uint32_t)in[1] << 24 | (uint32_t)in[2] << 16 | (uint32_t)in[3] << 8 |
                    (uint32_t)in[4];
    if (in[0] != 0 || size > MAX_REPLY - FRAME_HEADER) return -1; /* compressed, or too long */
    if (len < FRAME_HEADER + size) return 0;
    *used = FRAME_HEADER + size;
    return decode_reply(in + FRAME_HEADER, size, id, ttl) == 0 ? 1 : -1;
}

/* The next reply when a whole one is in; 1 (taken), 0 (not yet), -1 bad. */
static int take_reply(etcd__lease_stream *s, int64_t *id, int64_t *ttl)
{
    size_t used = 0;
    int rc = etcd__lease_reply_take(s->in, s->in_len, &used, id, ttl);
    s->in_len -= used;
    memmove(s->in, s->in + used, s->in_len);
    return rc;
}

etcd__lease_stream *etcd__lease_stream_new(etcd__client *client)
{
    etcd__lease_stream *s = calloc(1, sizeof *s);
    if (s == NULL) return NULL;
    s->client = client;
    s->multi = etcd__curl.multi_init();
    if (s->multi == NULL) {
        free(s);
        return NULL;
    }
    return s;
}

int etcd__lease_stream_keep_alive(etcd__lease_stream *s, int64_t lease, int timeout_ms,
                                  int first_ms, int64_t *ttl_s)
{
    if (s->easy == NULL && s->skip > 0) {
        s->skip--;
        return elastic__fail(ELASTIC_EUNSUPPORTED,
                             "etcd keep-alive stream: off for %u more keep-alives after %u failed",
                             s->skip + 1, s->failed_opens);
    }
    if (s->easy == NULL && timeout_ms > first_ms) timeout_ms = first_ms;
    uint64_t deadline = elastic__deadline_ms(timeout_ms);
    if (s->easy == NULL && open_stream(s, timeout_ms) != 0) return ELASTIC_ENOMEM;
    unsigned char message[11];
    message[0] = 0x08; /* field 1 (ID), varint */
    size_t len = 1 + put_varint(message + 1, (uint64_t)lease);
    memset(s->out, 0, FRAME_HEADER);
    s->out[4] = (unsigned char)len;
    memcpy(s->out + FRAME_HEADER, message, len);
    s->out_len = FRAME_HEADER + len;
    s->out_sent = 0;
    if (s->paused) {
        s->paused = false;
        etcd__curl.easy_pause(s->easy, CURLPAUSE_CONT);
    }
    for (;;) {
        int running = 0;
        etcd__curl.multi_perform(s->multi, &running);
        CURLMsg *done;
        int queued;
        while ((done = etcd__curl.multi_info_read(s->multi, &queued)) != NULL)
            if (done->msg == CURLMSG_DONE && done->easy_handle == s->easy) {
                s->ended = true;
                s->end = done->data.result;
            }
        int64_t id = 0, ttl = 0;
        int got = take_reply(s, &id, &ttl);
        if (got < 0 || (got == 1 && id != lease)) {
            close_stream(s);
            return elastic__fail(ELASTIC_EPROTO,
                                 got < 0 ? "etcd keep-alive stream: a malformed reply"
                                         : "etcd keep-alive stream: a reply for another lease");
        }
        if (got == 1) {
            if (ttl < 0 || ttl > ETCD__MAX_TTL_S) {
                close_stream(s);
                return elastic__fail(ELASTIC_EPROTO,
                                     "etcd keep-alive stream: TTL %" PRId64 " s is not plausible",
                                     ttl);
            }
            *ttl_s = ttl;
            s->answered = true;
            s->failed_opens = 0;
            return ttl > 0 ? 1 : 0; /* etcd answers TTL 0 for a lease it no longer has */
        }
        if (s->ended) return stream_ended(s);
        int left = elastic__ms_left(deadline);
        if (left <= 0) {
            close_stream(s); /* a late reply must not answer the next keep-alive */
            return elastic__fail(ELASTIC_ETIMEDOUT,
                                 "etcd keep-alive stream at %s: no reply within %d ms",
                                 etcd__client_endpoint(s->client, s->endpoint), timeout_ms);
        }
        etcd__curl.multi_poll(s->multi, NULL, 0, left, NULL);
    }
}

void etcd__lease_stream_free(etcd__lease_stream *s)
{
    if (s == NULL) return;
    close_stream(s);
    etcd__curl.multi_cleanup(s->multi);
    free(s);
}
