/*
 * HTTP transport to etcd's JSON gateway: one POST per call through libcurl,
 * trying the endpoints in turn (the one that answered last first), with a
 * deadline, a size bound on the reply, TLS and etcd's token auth.
 */
#include "etcd/etcd.h"

#include "common/clock.h"
#include "common/text.h"
#include "store/store.h"

#include "etcd/curl_loader.h"
#include "etcd/client_setup.h"
#include <stdio.h>
#include <stdlib.h>

struct etcd__client {
    char *endpoints[ETCD__MAX_ENDPOINTS]; /* "http(s)://host:port" */
    size_t n;
    char *ca_file, *cert_file, *key_file, *user, *password;
    int timeout_ms;
    pthread_mutex_t lock; /* guards everything below */
    size_t preferred;     /* the endpoint that answered last */
    char token[512];      /* etcd auth token; "" without auth */
    CURL *pool[ETCD__POOL];
    size_t pooled;
    uint64_t *wire_bytes; /* where HTTP bytes are counted; NULL: nowhere */
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static int global_rc = -1;
static char global_error[256];

/* libcurl is loaded here, by the first client (curl_loader.h), then set up. */
static void global_init(void)
{
    if (etcd__curl_load(global_error, sizeof global_error) != 0) return;
    store__crypto_init(); /* before libcurl's OpenSSL: no exit handler under our threads */
    CURLcode rc = etcd__curl.global_init(CURL_GLOBAL_DEFAULT);
    if (rc != CURLE_OK)
        snprintf(global_error, sizeof global_error, "curl_global_init failed: %s",
                 etcd__curl.easy_strerror(rc));
    else
        global_rc = 0;
}

/* ---- one HTTP exchange ------------------------------------------------------------ */

typedef struct exchange {
    elastic__text reply; /* the reply so far (unary calls) */
    bool too_large;
    json_tokener *tok; /* streaming calls: messages parsed as they come */
    etcd__message_fn on_message;
    void *user;
    int stop; /* what on_message returned to stop the stream */
    etcd__json_budget budget; /* the message being received (streams) */
    bool corrupt;
    int corrupt_rc; /* ELASTIC_EPROTO: not JSON; ELASTIC_ELIMIT: past a bound */
    char corrupt_detail[128];
    bool transient; /* the member ended the stream for now ("no leader"): try another */
    char transient_detail[200];
} exchange;

/* gRPC's UNAVAILABLE, what a member without a leader answers. */
#define GRPC_CODE_UNAVAILABLE 14

/* A stream message that says this member cannot serve the stream now, by
 * etcd's contract a transient state: a member that lost its leader (an
 * election, or cut off from the others) ends our watches with "etcdserver:
 * no leader" (require-leader, see etcd__client_setup), as an error message of the
 * stream or a watch cancelled without a compaction. Another member, or this
 * one after the election, serves it again. */
static bool stream_unavailable(json_object *message, char *detail, size_t cap)
{
    json_object *error = NULL, *field = NULL, *result = NULL;
    const char *text = NULL;
    int code = 0;
    if (json_object_object_get_ex(message, "error", &error) &&
        json_object_is_type(error, json_type_object)) {
        if (json_object_object_get_ex(error, "grpc_code", &field) &&
            json_object_is_type(field, json_type_int))
            code = json_object_get_int(field);
        if (json_object_object_get_ex(error, "message", &field) &&
            json_object_is_type(field, json_type_string))
            text = json_object_get_string(field);
    } else if (json_object_object_get_ex(message, "result", &result) &&
               json_object_is_type(result, json_type_object) &&
               json_object_object_get_ex(result, "canceled", &field) &&
               json_object_get_boolean(field)) {
        json_object *compacted = NULL;
        if (json_object_object_get_ex(result, "compact_revision", &compacted) &&
            json_object_get_int64(compacted) > 0)
            return false; /* a compaction: the caller's to handle */
        if (json_object_object_get_ex(result, "cancel_reason", &field) &&
            json_object_is_type(field, json_type_string))
            text = json_object_get_string(field);
        code = GRPC_CODE_UNAVAILABLE; /* cancelled by the member, not by us */
    } else {
        return false;
    }
    bool no_leader = text != NULL && strstr(text, "no leader") != NULL;
    if (code != GRPC_CODE_UNAVAILABLE && !no_leader) return false;
    snprintf(detail, cap, "%.150s", text != NULL ? text : "the stream was cancelled");
    return true;
}

static size_t on_stream_bytes(exchange *x, const char *data, size_t size)
{
    size_t offset = 0;
    while (offset < size) {
        /* Newlines between messages are not part of any JSON value. */
        while (offset < size &&
               (data[offset] == '\n' || data[offset] == '\r' || data[offset] == ' '))
            offset++;
        if (offset == size) break;
        /* Counted before json-c sees it: an endless message or one of
         * millions of values ends the stream instead of growing memory. */
        char why[96];
        if (etcd__json_budget_add(&x->budget, data + offset, size - offset, why, sizeof why)) {
            x->corrupt = true;
            x->corrupt_rc = ELASTIC_ELIMIT;
            snprintf(x->corrupt_detail, sizeof x->corrupt_detail, "watch stream: %s", why);
            return 0;
        }
        json_object *message = json_tokener_parse_ex(x->tok, data + offset, (int)(size - offset));
        enum json_tokener_error err = json_tokener_get_error(x->tok);
        if (err == json_tokener_continue) return size; /* the rest of the message comes later */
        if (message == NULL || !json_object_is_type(message, json_type_object)) {
            json_object_put(message);
            x->corrupt = true;
            x->corrupt_rc = ELASTIC_EPROTO;
            snprintf(x->corrupt_detail, sizeof x->corrupt_detail,
                     "bad JSON in the watch stream (%s)", json_tokener_error_desc(err));
            return 0;
        }
        offset += json_tokener_get_parse_end(x->tok);
        json_tokener_reset(x->tok);
        etcd__json_budget_reset(&x->budget); /* the rest is the next message's */
        if (stream_unavailable(message, x->transient_detail, sizeof x->transient_detail)) {
            json_object_put(message);
            x->transient = true;
            return 0; /* ends this attempt: the stream is re-opened elsewhere */
        }
        x->stop = x->on_message(x->user, message);
        json_object_put(message);
        if (x->stop != 0) return 0; /* aborts the transfer: we have what we wanted */
    }
    return size;
}

static size_t on_bytes(char *data, size_t one, size_t n, void *arg)
{
    exchange *x = arg;
    size_t size = one * n;
    if (x->tok != NULL) return on_stream_bytes(x, data, size);
    if (x->reply.len + size > x->reply.max) {
        x->too_large = true;
        return 0;
    }
    elastic__text_append(&x->reply, data, size);
    if (x->reply.overflow) return 0; /* out of memory: fails the transfer */
    return size;
}

static CURL *take_handle(etcd__client *c)
{
    pthread_mutex_lock(&c->lock);
    CURL *h = c->pooled > 0 ? c->pool[--c->pooled] : NULL;
    pthread_mutex_unlock(&c->lock);
    if (h == NULL) return etcd__curl.easy_init();
    etcd__curl.easy_reset(h);
    return h;
}

static void give_handle(etcd__client *c, CURL *h, bool reusable)
{
    if (h == NULL) return;
    pthread_mutex_lock(&c->lock);
    if (reusable && c->pooled < ETCD__POOL) {
        c->pool[c->pooled++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&c->lock);
    if (h != NULL) etcd__curl.easy_cleanup(h);
}

typedef enum attempt_result {
    ATTEMPT_DONE,   /* an HTTP answer (maybe etcd's error) */
    ATTEMPT_UNSENT, /* could not reach the endpoint: safe to try the next */
    ATTEMPT_LOST,   /* sent, then timed out or dropped: the request may have applied */
    ATTEMPT_FAILED  /* our own error (memory, a bad reply) */
} attempt_result;

/* What a gateway request and a gRPC stream to `endpoint` share. */
struct curl_slist *etcd__client_setup(etcd__client *c, CURL *h, size_t endpoint, const char *path,
                                      bool grpc, int timeout_ms, struct curl_slist *headers)
{
    char url[600], auth[600] = "";
    snprintf(url, sizeof url, "%s%s", c->endpoints[endpoint], path);
    /* etcd's require-leader metadata (what clientv3's WithRequireLeader
     * sends): a member that has lost its leader (mid-election, or cut off
     * from the others) answers "no leader" at once, and closes our watches,
     * instead of holding the request: we fail over to the next endpoint.
     * The gateway takes gRPC metadata as Grpc-Metadata-* headers, the token
     * as Authorization; gRPC itself as plain headers, the token as "token". */
    headers = etcd__curl.slist_append(headers, grpc ? "hasleader: true"
                                                    : "Grpc-Metadata-hasleader: true");
    pthread_mutex_lock(&c->lock);
    if (c->token[0] != '\0')
        snprintf(auth, sizeof auth, "%s: %s", grpc ? "token" : "Authorization", c->token);
    pthread_mutex_unlock(&c->lock);
    if (auth[0] != '\0') headers = etcd__curl.slist_append(headers, auth);
    etcd__curl.easy_setopt(h, CURLOPT_URL, url);
    etcd__curl.easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    etcd__curl.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    etcd__curl.easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    etcd__curl.easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                           (long)(timeout_ms < ETCD__CONNECT_TIMEOUT_MS
                                      ? (timeout_ms > 0 ? timeout_ms : 1)
                                      : ETCD__CONNECT_TIMEOUT_MS));
    etcd__curl.easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    if (c->ca_file != NULL) etcd__curl.easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
    if (c->cert_file != NULL) etcd__curl.easy_setopt(h, CURLOPT_SSLCERT, c->cert_file);
    if (c->key_file != NULL) etcd__curl.easy_setopt(h, CURLOPT_SSLKEY, c->key_file);
    return headers;
}

size_t etcd__client_preferred(etcd__client *c)
{
    pthread_mutex_lock(&c->lock);
    size_t endpoint = c->preferred;
    pthread_mutex_unlock(&c->lock);
    return endpoint;
}

const char *etcd__client_endpoint(const etcd__client *c, size_t endpoint)
{
    return c->endpoints[endpoint];
}

void etcd__client_add_wire(etcd__client *c, uint64_t bytes)
{
    if (c->wire_bytes != NULL) __atomic_fetch_add(c->wire_bytes, bytes, __ATOMIC_RELAXED);
}

/* One POST to one endpoint. */
static attempt_result post(etcd__client *c, size_t endpoint, const char *path, const char *body,
                           int timeout_ms, exchange *x, long *status, char *why, size_t why_cap)
{
    CURL *h = take_handle(c);
    if (h == NULL) {
        snprintf(why, why_cap, "curl_easy_init failed");
        return ATTEMPT_FAILED;
    }
    struct curl_slist *headers = etcd__curl.slist_append(NULL, "Content-Type: application/json");
    headers = etcd__curl.slist_append(headers,
                                      "Expect:"); /* no 100-continue round trip for larger bodies */
    headers = etcd__client_setup(c, h, endpoint, path, false, timeout_ms, headers);
    etcd__curl.easy_setopt(h, CURLOPT_POSTFIELDS, body);
    etcd__curl.easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(timeout_ms > 0 ? timeout_ms : 1));
    etcd__curl.easy_setopt(h, CURLOPT_WRITEFUNCTION, on_bytes);
    etcd__curl.easy_setopt(h, CURLOPT_WRITEDATA, x);
    CURLcode rc = etcd__curl.easy_perform(h);
    etcd__curl.slist_free_all(headers);
    *status = 0;
    etcd__curl.easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    curl_off_t uploaded = 0, downloaded = 0;
    long request_headers = 0, reply_headers = 0;
    etcd__curl.easy_getinfo(h, CURLINFO_SIZE_UPLOAD_T, &uploaded);
    etcd__curl.easy_getinfo(h, CURLINFO_SIZE_DOWNLOAD_T, &downloaded);
    etcd__curl.easy_getinfo(h, CURLINFO_REQUEST_SIZE, &request_headers);
    etcd__curl.easy_getinfo(h, CURLINFO_HEADER_SIZE, &reply_headers);
    /* REQUEST_SIZE already holds the body of a POST. */
    etcd__client_add_wire(c, (uint64_t)(downloaded + request_headers + reply_headers));
    give_handle(c, h, rc == CURLE_OK);
    if (rc == CURLE_OK) return ATTEMPT_DONE;
    snprintf(why, why_cap, "%s: %s", c->endpoints[endpoint], etcd__curl.easy_strerror(rc));
    if (rc == CURLE_WRITE_ERROR && (x->stop != 0 || x->too_large || x->corrupt))
        return ATTEMPT_DONE;
    if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
        rc == CURLE_COULDNT_RESOLVE_PROXY || (rc == CURLE_OPERATION_TIMEDOUT && uploaded <= 0))
        return ATTEMPT_UNSENT;
    if (rc == CURLE_SSL_CONNECT_ERROR || rc == CURLE_PEER_FAILED_VERIFICATION ||
        rc == CURLE_SSL_CERTPROBLEM || rc == CURLE_SSL_CACERT_BADFILE)
        return ATTEMPT_FAILED;
    return ATTEMPT_LOST;
}

/* ---- etcd's errors ------------------------------------------------------------------ */

/* gRPC status codes the gateway returns in {"error","code","message"}. */
enum {
    GRPC_INVALID_ARGUMENT = 3,
    GRPC_NOT_FOUND = 5,
    GRPC_PERMISSION_DENIED = 7,
    GRPC_FAILED_PRECONDITION = 9,
    GRPC_UNAVAILABLE = GRPC_CODE_UNAVAILABLE,
    GRPC_UNAUTHENTICATED = 16
};

/* 0 when the reply is no error; else the code and etcd's message. A
 * temporarily leaderless member (UNAVAILABLE) sets *transient. */
static int reply_error(json_object *reply, long status, char *why, size_t why_cap, bool *transient,
                       bool *auth)
{
    *transient = *auth = false;
    json_object *error = NULL, *code_obj = NULL;
    if (!json_object_object_get_ex(reply, "error", &error) &&
        !json_object_object_get_ex(reply, "code", &code_obj)) {
        if (status >= 200 && status < 300) return 0;
        snprintf(why, why_cap, "HTTP %ld", status);
        *transient = status >= 500;
        return ELASTIC_EPROTO;
    }
    json_object *message = NULL;
    const char *text = NULL;
    if (json_object_object_get_ex(reply, "message", &message) &&
        json_object_is_type(message, json_type_string))
        text = json_object_get_string(message);
    else if (error != NULL && json_object_is_type(error, json_type_string))
        text = json_object_get_string(error);
    int64_t code = 0;
    if (etcd__json_i64(reply, "code", 0, &code) != 0) code = 0;
    snprintf(why, why_cap, "etcd: %.200s (code %d)", text != NULL ? text : "error", (int)code);
    /* etcd reports a bad login or a missing user as INVALID_ARGUMENT. */
    if (text != NULL && (strstr(text, "authentication failed") != NULL ||
                         strstr(text, "user name is empty") != NULL))
        return ELASTIC_EAUTH;
    switch (code) {
    case GRPC_NOT_FOUND: return ELASTIC_ENOTFOUND;
    case GRPC_INVALID_ARGUMENT: return ELASTIC_EINVAL;
    case GRPC_PERMISSION_DENIED: return ELASTIC_EPERM;
    case GRPC_UNAUTHENTICATED: *auth = true; return ELASTIC_EAUTH;
    case GRPC_UNAVAILABLE: *transient = true; return ELASTIC_ECONNECT;
    case GRPC_FAILED_PRECONDITION: return ELASTIC_ESTATE;
    default: *transient = status >= 500; return ELASTIC_EPROTO;
    }
}

static int authenticate(etcd__client *c, int timeout_ms);

/* ---- calls ----------------------------------------------------------------------------- */

/* One call's progress over its endpoints: the path for messages, the last
 * failure's text and code (the call's error if no endpoint answers), and
 * whether etcd refused our credentials (the caller logs in again). */
typedef struct call_state {
    etcd__client *c;
    const char *path;
    char why[512];
    int rc;
    bool auth_failed;
} call_state;

/* What one step of an attempt leaves the call to do. */
typedef enum call_step {
    STEP_ON,   /* this endpoint's answer so far is good: go on with it */
    STEP_NEXT, /* this endpoint failed in a way another may not: ask the next */
    STEP_OVER  /* the call ends with s->rc (the error already recorded) */
} call_step;

/* Every endpoint failed this lap: back off (50 ms doubling to 500 ms) so a
 * cluster with no leader is not asked in a tight loop while it elects one. */
static void lap_pause(unsigned round)
{
    struct timespec pause = { 0, (long)(round < 4 ? 50 << round : 500) * 1000000L };
    nanosleep(&pause, NULL);
}

/* Posts the request; a transport failure either ends the call (our own
 * error, or a request that may have applied when only unsent ones may be
 * retried) or moves on to the next endpoint. */
static call_step send_request(call_state *s, size_t endpoint, const char *text, int cap,
                              bool retry_unsent_only, exchange *x, long *status)
{
    attempt_result result =
        post(s->c, endpoint, s->path, text, cap, x, status, s->why, sizeof s->why);
    if (result == ATTEMPT_FAILED) {
        s->rc = elastic__fail(ELASTIC_EIO, "etcd %s: %s", s->path, s->why);
        return STEP_OVER;
    }
    if (result == ATTEMPT_LOST && retry_unsent_only) {
        s->rc = elastic__fail(ELASTIC_ECONNECT, "etcd %s: %s (the request may have applied)",
                              s->path, s->why);
        return STEP_OVER;
    }
    if (result != ATTEMPT_DONE) {
        s->rc = ELASTIC_ECONNECT;
        ELASTIC_LOG_I("rdzv", "etcd %s: %s%s; trying again", s->path, s->why,
                      result == ATTEMPT_LOST ? " (after sending)" : "");
        return STEP_NEXT;
    }
    return STEP_ON;
}

/* The reply's JSON object, within the response budget. A reply over the
 * bounds ends the call (another member would send the same); one that is
 * not a JSON object is that member's fault, so the next is asked. */
static call_step parse_reply(call_state *s, size_t endpoint, const exchange *x, long status,
                             json_object **parsed)
{
    if (x->too_large) {
        s->rc = elastic__fail(ELASTIC_ELIMIT, "etcd %s: reply larger than %u bytes", s->path,
                              ETCD__MAX_RESPONSE);
        return STEP_OVER;
    }
    etcd__json_budget budget;
    etcd__json_budget_reset(&budget);
    if (x->reply.data != NULL &&
        etcd__json_budget_add(&budget, x->reply.data, x->reply.len, s->why, sizeof s->why) != 0) {
        s->rc = elastic__fail(ELASTIC_ELIMIT, "etcd %s: reply of %s", s->path, s->why);
        return STEP_OVER;
    }
    *parsed = x->reply.data != NULL ? etcd__json_parse(x->reply.data, x->reply.len) : NULL;
    if (*parsed == NULL || !json_object_is_type(*parsed, json_type_object)) {
        json_object_put(*parsed);
        *parsed = NULL;
        snprintf(s->why, sizeof s->why, "%s: HTTP %ld with no JSON object",
                 s->c->endpoints[endpoint], status);
        s->rc = ELASTIC_EPROTO;
        return STEP_NEXT;
    }
    return STEP_ON;
}

/* One endpoint asked once, for at most cap ms: STEP_ON with *reply set
 * when it answered without error. */
static call_step ask_endpoint(call_state *s, size_t endpoint, const char *text, int cap,
                              bool retry_unsent_only, json_object **reply)
{
    exchange x = { 0 };
    elastic__text_init(&x.reply, ETCD__MAX_RESPONSE - 1);
    long status = 0;
    json_object *parsed = NULL;
    call_step step = send_request(s, endpoint, text, cap, retry_unsent_only, &x, &status);
    if (step == STEP_ON) step = parse_reply(s, endpoint, &x, status, &parsed);
    elastic__text_free(&x.reply);
    if (step != STEP_ON) return step;
    bool transient, auth;
    s->rc = reply_error(parsed, status, s->why, sizeof s->why, &transient, &auth);
    if (s->rc == 0) {
        *reply = parsed;
        return STEP_ON;
    }
    json_object_put(parsed);
    if (transient) return STEP_NEXT; /* that member has no leader right now: ask another */
    s->auth_failed = auth;
    s->rc = elastic__fail(s->rc, "etcd %s: %s", s->path, s->why);
    return STEP_OVER;
}

/* Tries every endpoint, starting with the preferred one, until the deadline,
 * none for longer than attempt_ms. */
static int call_once(etcd__client *c, const char *path, const char *text, uint64_t deadline,
                     int attempt_ms, bool retry_unsent_only, json_object **reply, bool *auth_failed)
{
    call_state s = { .c = c, .path = path, .why = "no endpoint answered", .rc = ELASTIC_ECONNECT };
    pthread_mutex_lock(&c->lock);
    size_t first = c->preferred;
    pthread_mutex_unlock(&c->lock);
    *auth_failed = false;
    unsigned round = 0;
    for (size_t i = 0;; i++) {
        int left = elastic__ms_left(deadline);
        if (left <= 0) break;
        if (i > 0 && i % c->n == 0) {
            lap_pause(round++);
            if ((left = elastic__ms_left(deadline)) <= 0) break;
        }
        size_t endpoint = (first + i) % c->n;
        /* The cap is for failing over; with one endpoint there is nowhere to
         * go, and abandoning a loaded member's reply to ask it again only adds
         * to its load (1,024 nodes' keep-alives did that to a member until
         * their leases lapsed): the one attempt gets the whole deadline. */
        int cap = c->n > 1 && attempt_ms < left ? attempt_ms : left;
        json_object *parsed = NULL;
        call_step step = ask_endpoint(&s, endpoint, text, cap, retry_unsent_only, &parsed);
        if (step == STEP_NEXT) continue;
        if (step == STEP_OVER) {
            *auth_failed = s.auth_failed;
            return s.rc;
        }
        pthread_mutex_lock(&c->lock);
        c->preferred = endpoint;
        pthread_mutex_unlock(&c->lock);
        *reply = parsed;
        return 0;
    }
    return elastic__fail(s.rc == 0 ? ELASTIC_ECONNECT : s.rc,
                         "etcd %s: no endpoint answered within the deadline (%s)", path, s.why);
}

static int call_within(etcd__client *c, const char *path, json_object *body, int timeout_ms,
                       int attempt_ms, bool retry_unsent_only, json_object **reply)
{
    *reply = NULL;
    if (body == NULL) return elastic__fail(ELASTIC_ENOMEM, "etcd %s: out of memory", path);
    char *text = elastic__strdup(json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN));
    json_object_put(body);
    if (text == NULL) return elastic__fail(ELASTIC_ENOMEM, "etcd %s: out of memory", path);
    if (timeout_ms <= 0) timeout_ms = c->timeout_ms;
    uint64_t deadline = elastic__deadline_ms(timeout_ms);
    if (attempt_ms <= 0) /* a member that holds a request (no leader yet) costs a third */
        attempt_ms =
            timeout_ms / 3 > ETCD__CONNECT_TIMEOUT_MS ? timeout_ms / 3 : ETCD__CONNECT_TIMEOUT_MS;
    bool auth_failed;
    int rc = call_once(c, path, text, deadline, attempt_ms, retry_unsent_only, reply, &auth_failed);
    /* An expired auth token: log in again once and repeat. */
    if (rc == ELASTIC_EAUTH && auth_failed && c->user != NULL &&
        authenticate(c, elastic__ms_left(deadline)) == 0)
        rc = call_once(c, path, text, deadline, attempt_ms, retry_unsent_only, reply, &auth_failed);
    free(text);
    return rc;
}

int etcd__call(etcd__client *c, const char *path, json_object *body, int timeout_ms,
               bool retry_unsent_only, json_object **reply)
{
    return call_within(c, path, body, timeout_ms, 0, retry_unsent_only, reply);
}

int etcd__call_each(etcd__client *c, const char *path, json_object *body, int timeout_ms,
                    int attempt_ms, json_object **reply)
{
    return call_within(c, path, body, timeout_ms, attempt_ms, false, reply);
}

int etcd__stream(etcd__client *c, const char *path, etcd__body_fn make_body, int timeout_ms,
                 etcd__message_fn on_message, void *user)
{
    uint64_t deadline = elastic__deadline_ms(timeout_ms);
    char why[512] = "no endpoint answered";
    pthread_mutex_lock(&c->lock);
    size_t first = c->preferred;
    pthread_mutex_unlock(&c->lock);
    for (size_t i = 0;; i++) {
        int left = elastic__ms_left(deadline);
        if (left <= 0)
            return elastic__fail(ELASTIC_ETIMEDOUT, "etcd %s: nothing within %d ms", path,
                                 timeout_ms);
        if (i > 0 && i % c->n == 0) {
            struct timespec pause = { 0, 100 * 1000000L };
            nanosleep(&pause, NULL);
        }
        json_object *body = make_body(user);
        char *text =
            body != NULL
                ? elastic__strdup(json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN))
                : NULL;
        json_object_put(body);
        if (text == NULL) return elastic__fail(ELASTIC_ENOMEM, "etcd %s: out of memory", path);
        size_t endpoint = (first + i) % c->n;
        exchange x = { .tok = etcd__json_tokener(), .on_message = on_message, .user = user };
        long status = 0;
        attempt_result result =
            x.tok != NULL ? post(c, endpoint, path, text, left, &x, &status, why, sizeof why)
                          : ATTEMPT_FAILED;
        free(text);
        if (x.tok != NULL) json_tokener_free(x.tok);
        if (x.stop != 0) return x.stop < 0 ? x.stop : 0;
        if (x.corrupt) return elastic__fail(x.corrupt_rc, "etcd %s: %s", path, x.corrupt_detail);
        if (result == ATTEMPT_FAILED) return elastic__fail(ELASTIC_EIO, "etcd %s: %s", path, why);
        if (x.transient) { /* that member has no leader now: the next one, same revision */
            snprintf(why, sizeof why, "%s: %s", c->endpoints[endpoint], x.transient_detail);
            ELASTIC_LOG_I("rdzv", "etcd %s: %s; trying again", path, why);
            if (elastic__ms_left(deadline) <= 0) /* no change seen, as a watch that timed out */
                return elastic__fail(ELASTIC_ETIMEDOUT,
                                     "etcd %s: nothing within %d ms (the last member: %s)", path,
                                     timeout_ms, why);
            continue;
        }
        /* Timed out with the stream open: nothing happened. */
        if (result == ATTEMPT_LOST && elastic__ms_left(deadline) <= 0)
            return elastic__fail(ELASTIC_ETIMEDOUT, "etcd %s: nothing within %d ms", path,
                                 timeout_ms);
        /* The endpoint dropped the stream (or refused it): the next one,
         * from the same revision, so no event is missed. */
    }
}

/* ---- auth ---------------------------------------------------------------------------------- */

static int authenticate(etcd__client *c, int timeout_ms)
{
    json_object *body = json_object_new_object();
    json_object_object_add(body, "name", json_object_new_string(c->user));
    json_object_object_add(body, "password",
                           json_object_new_string(c->password != NULL ? c->password : ""));
    pthread_mutex_lock(&c->lock);
    c->token[0] = '\0';
    pthread_mutex_unlock(&c->lock);
    json_object *reply = NULL, *token = NULL;
    int rc = etcd__call(c, "/v3/auth/authenticate", body, timeout_ms, false, &reply);
    if (rc != 0) return rc;
    if (!json_object_object_get_ex(reply, "token", &token) ||
        !json_object_is_type(token, json_type_string) || json_object_get_string_len(token) <= 0 ||
        json_object_get_string_len(token) >= 500 ||
        strpbrk(json_object_get_string(token), "\r\n") != NULL) {
        json_object_put(reply);
        return elastic__fail(ELASTIC_EPROTO, "etcd auth: the reply carries no valid token");
    }
    pthread_mutex_lock(&c->lock);
    snprintf(c->token, sizeof c->token, "%s", json_object_get_string(token));
    pthread_mutex_unlock(&c->lock);
    json_object_put(reply);
    return 0;
}

/* ---- life cycle -------------------------------------------------------------------------- */

static int parse_endpoints(etcd__client *c, const char *list)
{
    const char *scheme = c->ca_file != NULL ? "https://" : "http://";
    const char *p = list;
    while (*p != '\0') {
        size_t len = strcspn(p, ",");
        while (len > 0 && p[0] == ' ') p++, len--;
        size_t trimmed = len;
        while (trimmed > 0 && p[trimmed - 1] == ' ') trimmed--;
        if (trimmed == 0 || trimmed > 255)
            return elastic__fail(ELASTIC_EINVAL, "etcd: empty or overlong endpoint in \"%.100s\"",
                                 list);
        if (c->n == ETCD__MAX_ENDPOINTS)
            return elastic__fail(ELASTIC_ELIMIT, "etcd: more than %d endpoints",
                                 ETCD__MAX_ENDPOINTS);
        for (size_t i = 0; i < trimmed; i++)
            if (p[i] <= ' ' || p[i] > '~' || p[i] == '/' || p[i] == '@' || p[i] == '?' ||
                p[i] == '#')
                return elastic__fail(ELASTIC_EINVAL, "etcd: endpoint \"%.*s\" is not host:port",
                                     (int)trimmed, p);
        /* An explicit scheme is accepted too: http://h:p, https://h:p. */
        char *url = malloc(trimmed + 16);
        if (url == NULL) return elastic__fail(ELASTIC_ENOMEM, "etcd: out of memory");
        snprintf(url, trimmed + 16, "%s%.*s", scheme, (int)trimmed, p);
        c->endpoints[c->n++] = url;
        p += len;
        if (*p == ',') p++;
    }
    if (c->n == 0)
        return elastic__fail(ELASTIC_EINVAL, "etcd: no endpoint given (host:port[,host:port...])");
    return 0;
}

static char *copy(const char *text)
{
    return text != NULL && *text != '\0' ? elastic__strdup(text) : NULL;
}

int etcd__client_open(const etcd__opts *opts, etcd__client **out)
{
    *out = NULL;
    pthread_once(&global_once, global_init);
    if (global_rc != 0) return elastic__fail(ELASTIC_ESYS, "etcd: %s", global_error);
    if (opts->endpoints == NULL) return elastic__fail(ELASTIC_EINVAL, "etcd: no endpoint given");
    const char *list = opts->endpoints;
    for (const char *s = list; (s = strstr(s, "://")) != NULL; s += 3)
        return elastic__fail(
            ELASTIC_EINVAL, "etcd: give endpoints as host:port (TLS comes from ca_file), not URLs");
    etcd__client *c = calloc(1, sizeof *c);
    if (c == NULL || pthread_mutex_init(&c->lock, NULL) != 0) {
        free(c);
        return elastic__fail(ELASTIC_ENOMEM, "etcd: out of memory");
    }
    c->timeout_ms = opts->timeout_ms > 0 ? opts->timeout_ms : ETCD__DEFAULT_TIMEOUT_MS;
    c->ca_file = copy(opts->ca_file);
    c->cert_file = copy(opts->cert_file);
    c->key_file = copy(opts->key_file);
    c->user = copy(opts->user);
    c->password = copy(opts->password);
    int rc = 0;
    if ((c->cert_file == NULL) != (c->key_file == NULL))
        rc = elastic__fail(ELASTIC_EINVAL, "etcd: a client certificate needs both cert and key");
    if (rc == 0) rc = parse_endpoints(c, list);
    if (rc == 0 && c->user != NULL) rc = authenticate(c, c->timeout_ms);
    if (rc != 0) {
        etcd__client_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

size_t etcd__client_endpoint_count(const etcd__client *c)
{
    return c->n;
}

int etcd__client_timeout_ms(const etcd__client *c)
{
    return c->timeout_ms;
}

void etcd__client_count_wire(etcd__client *c, uint64_t *counter)
{
    c->wire_bytes = counter;
}

void etcd__client_close(etcd__client *c)
{
    if (c == NULL) return;
    for (size_t i = 0; i < c->pooled; i++) etcd__curl.easy_cleanup(c->pool[i]);
    for (size_t i = 0; i < c->n; i++) free(c->endpoints[i]);
    free(c->ca_file);
    free(c->cert_file);
    free(c->key_file);
    free(c->user);
    if (c->password != NULL) memset(c->password, 0, strlen(c->password));
    free(c->password);
    pthread_mutex_destroy(&c->lock);
    free(c);
}
