/*
 * dlopen/dlsym behind one error format (see dynlib.h).
 */
#include "common/dynlib.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Appends to a bounded line; a full line stays NUL-terminated (an error text
 * cut short is still one honest line, and its start names the library). */
static void append(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t cap, const char *fmt, ...)
{
    size_t used = strnlen(buf, cap);
    if (cap == 0 || used + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, cap - used, fmt, ap);
    va_end(ap);
}

/* dlerror's text without the "<name>: " it starts with (the caller names it). */
static const char *cause_of(const char *name)
{
    const char *err = dlerror();
    if (err == NULL) return "unknown dlopen error";
    size_t len = strlen(name);
    if (strncmp(err, name, len) == 0 && strncmp(err + len, ": ", 2) == 0) return err + len + 2;
    return err;
}

static void set_name(elastic__dynlib *lib, const char *name)
{
    snprintf(lib->name, sizeof lib->name, "%s", name);
}

static int open_override(elastic__dynlib *lib, const char *var, const char *path, int flags,
                         char *why, size_t cap)
{
    lib->handle = dlopen(path, flags);
    if (lib->handle != NULL) {
        set_name(lib, path);
        return 0;
    }
    snprintf(why, cap, "%s=%s: %s", var, path, cause_of(path));
    return -1;
}

int elastic__dynlib_open(elastic__dynlib *lib, const char *override_var, const char *const *names,
                         int flags, char *why, size_t why_cap)
{
    *lib = (elastic__dynlib){ 0 };
    const char *override = override_var != NULL ? getenv(override_var) : NULL;
    if (override != NULL && *override != '\0')
        return open_override(lib, override_var, override, flags, why, why_cap);
    /* Two renderings built side by side: the plain list with one shared
     * cause, or each name with its own when the causes differ. */
    char plain[512] = "", each[1024] = "", first[256] = "";
    bool same = true;
    for (const char *const *name = names; *name != NULL; name++) {
        lib->handle = dlopen(*name, flags);
        if (lib->handle != NULL) {
            set_name(lib, *name);
            return 0;
        }
        const char *cause = cause_of(*name);
        if (name == names)
            snprintf(first, sizeof first, "%s", cause);
        else if (strcmp(first, cause) != 0)
            same = false;
        append(plain, sizeof plain, "%s%s", name == names ? "" : ", ", *name);
        append(each, sizeof each, "%s%s (%s)", name == names ? "" : ", ", *name, cause);
    }
    if (names[0] == NULL)
        snprintf(why, why_cap, "no library names to try");
    else if (same)
        snprintf(why, why_cap, "tried %s: %s", plain, first);
    else
        snprintf(why, why_cap, "tried %s", each);
    return -1;
}

int elastic__dynlib_bind(const elastic__dynlib *lib, const elastic__dynsym *syms, size_t count,
                         char *why, size_t why_cap)
{
    for (size_t i = 0; i < count; i++) {
        const elastic__dynsym *s = &syms[i];
        *s->slot = NULL;
        for (const char *const *name = s->names; *name != NULL && *s->slot == NULL; name++)
            *s->slot = dlsym(lib->handle, *name);
        if (*s->slot == NULL && s->required) {
            snprintf(why, why_cap, "%s lacks %s", lib->name, s->names[0]);
            return -1;
        }
    }
    return 0;
}

bool elastic__dynlib_loadable(const char *const *names)
{
    for (; *names != NULL; names++) {
        void *handle = dlopen(*names, RTLD_LAZY | RTLD_LOCAL);
        if (handle != NULL) {
            dlclose(handle);
            return true;
        }
    }
    return false;
}
