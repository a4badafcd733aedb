/*
 * Loads libcurl on first use (see curl_loader.h). The library is found by
 * its SONAME, libcurl.so.4 (the ABI every libcurl 7.x/8.x keeps), through
 * the normal search path, and is never unloaded: handles may outlive any
 * one client.
 */
#include "etcd/curl_loader.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

etcd__curl_api etcd__curl;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[256];

/* dlsym returns void *: stored through a void ** view of the function
 * pointer, the conversion POSIX (dlsym's own example) sanctions. */
#define BIND(field, name)                                                               \
    do {                                                                                \
        *(void **)(&etcd__curl.field) = dlsym(lib, name);                               \
        if (etcd__curl.field == NULL) {                                                 \
            snprintf(load_error, sizeof load_error, "libcurl.so.4 has no %s: %s", name, \
                     dlerror());                                                        \
            return;                                                                     \
        }                                                                               \
    } while (0)

static void load(void)
{
    void *lib = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        snprintf(load_error, sizeof load_error,
                 "cannot load libcurl.so.4 (install libcurl4 for the etcd backend): %s", dlerror());
        return;
    }
    BIND(global_init, "curl_global_init");
    BIND(easy_init, "curl_easy_init");
    BIND(easy_reset, "curl_easy_reset");
    BIND(easy_cleanup, "curl_easy_cleanup");
    BIND(easy_setopt, "curl_easy_setopt");
    BIND(easy_perform, "curl_easy_perform");
    BIND(easy_getinfo, "curl_easy_getinfo");
    BIND(easy_strerror, "curl_easy_strerror");
    BIND(slist_append, "curl_slist_append");
    BIND(slist_free_all, "curl_slist_free_all");
    BIND(multi_init, "curl_multi_init");
    BIND(multi_add_handle, "curl_multi_add_handle");
    BIND(multi_remove_handle, "curl_multi_remove_handle");
    BIND(multi_perform, "curl_multi_perform");
    BIND(multi_poll, "curl_multi_poll");
    BIND(multi_info_read, "curl_multi_info_read");
    BIND(multi_cleanup, "curl_multi_cleanup");
    BIND(easy_pause, "curl_easy_pause");
}

int etcd__curl_load(char *why, size_t why_cap)
{
    pthread_once(&load_once, load);
    if (load_error[0] == '\0') return 0;
    snprintf(why, why_cap, "%s", load_error);
    return -1;
}
