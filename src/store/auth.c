/*
 * The store's token: read from its file or the environment, and wiped when
 * freed. The proof made with it is common/conn_proof.c's, under the store's
 * label.
 */
#include "store/store.h"

#include <openssl/crypto.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

/* Reads a token file: its bytes, less one trailing newline ("\n" or "\r\n").
 * Never truncated: empty, longer than ELASTIC_STORE_TOKEN_MAX, or holding a
 * NUL byte is an error naming the file. */
int store__token_read_file(const char *path, char **token)
{
    *token = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return elastic__fail(elastic__from_errno(errno), "token file %s: %s", path,
                             strerror(errno));
    char *buf = malloc(ELASTIC_STORE_TOKEN_MAX + 3);
    size_t len = 0;
    ssize_t n = 1;
    while (buf != NULL && len < ELASTIC_STORE_TOKEN_MAX + 3 &&
           (n = read(fd, buf + len, ELASTIC_STORE_TOKEN_MAX + 3 - len)) > 0)
        len += (size_t)n;
    int saved = errno;
    close(fd);
    if (buf == NULL) return elastic__fail(ELASTIC_ENOMEM, "out of memory");
    int err = 0;
    if (n < 0)
        err = elastic__fail(elastic__from_errno(saved), "token file %s: %s", path, strerror(saved));
    if (err == 0 && len > 0 && buf[len - 1] == '\n') len--;
    if (err == 0 && len > 0 && buf[len - 1] == '\r') len--;
    if (err == 0 && len == 0) err = elastic__fail(ELASTIC_EINVAL, "token file %s is empty", path);
    if (err == 0 && len > ELASTIC_STORE_TOKEN_MAX)
        err = elastic__fail(ELASTIC_EINVAL, "token file %s: the token is longer than %d bytes",
                            path, ELASTIC_STORE_TOKEN_MAX);
    if (err == 0 && memchr(buf, '\0', len) != NULL)
        err = elastic__fail(ELASTIC_EINVAL, "token file %s holds a NUL byte", path);
    if (err == 0)
        buf[len] = '\0', *token = buf;
    else
        OPENSSL_cleanse(buf, ELASTIC_STORE_TOKEN_MAX + 3), free(buf);
    return err;
}

int store__token_resolve(const char *option, char **token)
{
    *token = NULL;
    if (option == NULL) {
        const char *file = getenv("ELASTIC_STORE_TOKEN_FILE");
        if (file != NULL && file[0] != '\0') return store__token_read_file(file, token);
    }
    const char *source = option != NULL ? option : getenv("ELASTIC_STORE_TOKEN");
    if (source == NULL || source[0] == '\0') return 0;
    if (strlen(source) > ELASTIC_STORE_TOKEN_MAX)
        return elastic__fail(ELASTIC_EINVAL, "store token longer than %d bytes (%s)",
                             ELASTIC_STORE_TOKEN_MAX,
                             option != NULL ? "opts.token" : "ELASTIC_STORE_TOKEN");
    *token = elastic__strdup(source);
    return *token != NULL ? 0 : ELASTIC_ENOMEM;
}

void store__token_free(char *token)
{
    if (token == NULL) return;
    OPENSSL_cleanse(token, strlen(token));
    free(token);
}
