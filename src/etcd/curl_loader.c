/*
 * Loads libcurl on first use (see curl_loader.h). The library is found by
 * its SONAME, libcurl.so.4 (the ABI every libcurl 7.x/8.x keeps), through
 * the normal search path, and is never unloaded: handles may outlive any
 * one client.
 */
#include "etcd/curl_loader.h"
#include "common/common.h"
#include "common/dynlib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

etcd__curl_api etcd__curl;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[512];

#define SYM(field, name) ELASTIC__DYNSYM(&etcd__curl.field, true, name)

static void load(void)
{
    static const char *const names[] = { "libcurl.so.4", NULL };
    elastic__dynlib lib;
    char why[200];
    if (elastic__dynlib_open(&lib, NULL, names, RTLD_NOW | RTLD_LOCAL, why, sizeof why) != 0) {
        snprintf(load_error, sizeof load_error,
                 "cannot load libcurl (install libcurl4 for the etcd backend): %s", why);
        return;
    }
    const elastic__dynsym syms[] = {
        SYM(global_init, "curl_global_init"),
        SYM(easy_init, "curl_easy_init"),
        SYM(easy_reset, "curl_easy_reset"),
        SYM(easy_cleanup, "curl_easy_cleanup"),
        SYM(easy_setopt, "curl_easy_setopt"),
        SYM(easy_perform, "curl_easy_perform"),
        SYM(easy_getinfo, "curl_easy_getinfo"),
        SYM(easy_strerror, "curl_easy_strerror"),
        SYM(slist_append, "curl_slist_append"),
        SYM(slist_free_all, "curl_slist_free_all"),
        SYM(multi_init, "curl_multi_init"),
        SYM(multi_add_handle, "curl_multi_add_handle"),
        SYM(multi_remove_handle, "curl_multi_remove_handle"),
        SYM(multi_perform, "curl_multi_perform"),
        SYM(multi_poll, "curl_multi_poll"),
        SYM(multi_info_read, "curl_multi_info_read"),
        SYM(multi_cleanup, "curl_multi_cleanup"),
        SYM(easy_pause, "curl_easy_pause"),
    };
    if (elastic__dynlib_bind(&lib, syms, ELASTIC__ARRAY_LEN(syms), why, sizeof why) != 0)
        snprintf(load_error, sizeof load_error, "%s", why);
}

int etcd__curl_load(char *why, size_t why_cap)
{
    pthread_once(&load_once, load);
    if (load_error[0] == '\0') return 0;
    snprintf(why, why_cap, "%s", load_error);
    return -1;
}
