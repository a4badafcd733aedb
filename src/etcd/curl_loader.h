/*
 * libcurl, loaded with dlopen when the first etcd client opens: a process
 * that rendezvous on the embedded store (most jobs) never maps libcurl and
 * the two dozen libraries it pulls in (GnuTLS, Kerberos, LDAP, SSH, ...:
 * 3.8 MB of an agent's resident memory). Only the calls the etcd client
 * makes are bound; curl.h still supplies the types and constants.
 */
#ifndef ELASTIC_ETCD_CURL_LOADER_H
#define ELASTIC_ETCD_CURL_LOADER_H

#include <curl/curl.h>
#include <stddef.h>

typedef struct etcd__curl_api {
    CURLcode (*global_init)(long flags);
    CURL *(*easy_init)(void);
    void (*easy_reset)(CURL *handle);
    void (*easy_cleanup)(CURL *handle);
    CURLcode (*easy_setopt)(CURL *handle, CURLoption option, ...);
    CURLcode (*easy_perform)(CURL *handle);
    CURLcode (*easy_getinfo)(CURL *handle, CURLINFO info, ...);
    const char *(*easy_strerror)(CURLcode code);
    struct curl_slist *(*slist_append)(struct curl_slist *list, const char *text);
    void (*slist_free_all)(struct curl_slist *list);
    /* the multi interface, for the gRPC streams (lease_stream.c) */
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_add_handle)(CURLM *multi, CURL *handle);
    CURLMcode (*multi_remove_handle)(CURLM *multi, CURL *handle);
    CURLMcode (*multi_perform)(CURLM *multi, int *running);
    CURLMcode (*multi_poll)(CURLM *multi, struct curl_waitfd extra[], unsigned n, int timeout_ms,
                            int *numfds);
    CURLMsg *(*multi_info_read)(CURLM *multi, int *queued);
    CURLMcode (*multi_cleanup)(CURLM *multi);
    CURLcode (*easy_pause)(CURL *handle, int bitmask);
} etcd__curl_api;

/* Filled by etcd__curl_load; read-only afterwards. */
extern etcd__curl_api etcd__curl;

/* Loads libcurl once and binds its calls (thread-safe); 0, or -1 with the
 * reason (library or symbol missing) in why. */
int etcd__curl_load(char *why, size_t why_cap);

#endif /* ELASTIC_ETCD_CURL_LOADER_H */
