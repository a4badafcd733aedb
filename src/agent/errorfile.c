/*
 * A worker's error file (torchrun's JSON: {"message": {"message": ...,
 * "extraInfo": {"py_callstack": ...}}}) rendered for a person: the error and
 * its traceback as indented lines, the way torchrun prints a root cause.
 */
#include "agent/console.h"

#include "common/json.h"

#include <stdio.h>

/* Appends `text` with every line indented; returns the new length. */
static size_t append_indented(char *out, size_t size, size_t used, const char *text,
                              const char *indent)
{
    const char *line = text;
    while (*line != '\0' && used + 1 < size) {
        const char *nl = strchr(line, '\n');
        size_t len = nl != NULL ? (size_t)(nl - line) : strlen(line);
        int n = snprintf(out + used, size - used, "%s%.*s\n", indent, (int)len, line);
        if (n < 0) break;
        used += (size_t)n < size - used ? (size_t)n : size - used - 1;
        line += len + (nl != NULL);
    }
    return used;
}

size_t agent__error_file_render(const char *json, char *out, size_t size)
{
    if (size == 0) return 0;
    out[0] = '\0';
    json_object *root = NULL;
    if (json__parse(json, strlen(json), &root) != 0) return 0;
    json_object *message = json__get(root, "message");
    const char *text = json__get_string(root, "message"); /* {"message": "text"} */
    if (text == NULL) text = json__get_string(message, "message");
    const char *stack = json__get_string(json__get(message, "extraInfo"), "py_callstack");
    size_t used = 0;
    if (stack != NULL && *stack != '\0') {
        used = append_indented(out, size, used, stack, "  ");
        /* A Python traceback ends with the error itself: print it once. */
        if (text != NULL && strstr(stack, text) == NULL)
            used = append_indented(out, size, used, text, "  ");
    } else if (text != NULL) {
        used = append_indented(out, size, used, text, "  ");
    }
    json_object_put(root);
    return used;
}
