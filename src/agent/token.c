/*
 * The job's store token as the agent sees it: where it comes from (a file or
 * the environment, never cut short), whether a multi-node job may run
 * without one, and the private file through which workers receive it.
 */
#include "common/tsan_fd.h"
#include "agent/agent.h"
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static bool token_required(const agent_rdzv_conf *conf)
{
    if (conf->require_token >= 0) return conf->require_token == 1;
    int required = 0;
    const char *env = getenv("ELASTIC_REQUIRE_TOKEN");
    return env != NULL && agent__parse_bool(env, &required) == 0 && required == 1;
}

int agent__token_load(const agent_rdzv_conf *conf, bool multi_node, char **token)
{
    *token = NULL;
    int rc = conf->token_file[0] != '\0' ? store__token_read_file(conf->token_file, token)
                                         : store__token_resolve(NULL, token);
    if (rc != 0 || *token != NULL || !multi_node) return rc;
    if (token_required(conf))
        return elastic__fail(
            ELASTIC_EAUTH,
            "no store token (require_token is set): give --rdzv-conf token_file=PATH, "
            "ELASTIC_STORE_TOKEN_FILE or ELASTIC_STORE_TOKEN");
    ELASTIC_LOG_W(
        "agent",
        "the job's store has no token: anyone who reaches its port can join or disturb the "
        "job (set ELASTIC_STORE_TOKEN_FILE, or require_token=1 to refuse)");
    return 0;
}

void agent__token_free(char *token)
{
    store__token_free(token);
}

int agent__token_publish(const char *dir, const char *token, char *path, size_t size)
{
    if ((size_t)snprintf(path, size, "%s/store_token", dir) >= size)
        return elastic__fail(ELASTIC_EINVAL, "token file path too long");
    int dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int fd = dir_fd < 0 ? -1
                        : elastic__tsan_fd_made(
                              openat(dir_fd, "store_token",
                                     O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    int saved = errno;
    if (dir_fd >= 0) close(dir_fd);
    if (fd < 0) return elastic__fail(elastic__from_errno(saved), "%s: %s", path, strerror(saved));
    size_t len = strlen(token), done = 0;
    while (done < len) {
        ssize_t n = write(fd, token + done, len - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            saved = errno;
            close(fd);
            unlink(path);
            return elastic__fail(elastic__from_errno(saved), "%s: %s", path, strerror(saved));
        }
        done += (size_t)n;
    }
    close(fd);
    return 0;
}
