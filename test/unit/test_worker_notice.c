/* Stop notices in the worker API (src/worker/notice.c): from the agent's
 * CHANNEL__MSG_NOTICE (with the grace it gives) through a stand-in agent
 * socket, and from a SIGTERM to the worker once the trainer asked for that
 * (Slurm signals every process of a step); a trainer's own SIGTERM handler
 * is left in charge. */
#include "channel/channel.h"
#include "common/clock.h"
#include "test.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>

static void alone(void)
{
    static const char *const names[] = { "RANK", "WORLD_SIZE", "ELASTIC_STORE_ENDPOINT",
                                         "ELASTIC_STORE_PREFIX", "ELASTIC_GENERATION",
                                         "ELASTIC_AGENT_SOCKET", "ELASTIC_HEARTBEAT_SHM",
                                         "ELASTIC_HEARTBEAT_SLOT", "LOCAL_RANK", "GROUP_RANK",
                                         "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) unsetenv(names[i]);
}

TEST(worker_sigterm_becomes_a_notice_when_asked)
{
    alone();
    elastic_worker *w = NULL;
    ASSERT_OK(elastic_worker_init(NULL, &w));
    ASSERT_EQ(elastic_worker_stop_notice(w, NULL), 0);
    ASSERT_OK(elastic_worker_notice_on_sigterm(w));
    ASSERT_OK(elastic_worker_notice_on_sigterm(w)); /* twice is once */
    ASSERT_EQ(elastic_worker_stop_notice(w, NULL), 0);
    ASSERT_EQ(raise(SIGTERM), 0); /* would end the process without the handler */
    int grace = 123;
    ASSERT_EQ(elastic_worker_stop_notice(w, &grace), 1);
    ASSERT_EQ(grace, -1); /* a bare signal says nothing of the grace */
    elastic_worker_close(w);
    ASSERT_EQ(elastic_worker_stop_notice(NULL, NULL), 0);
}

static void own_handler(int signum)
{
    (void)signum;
}

TEST(worker_notice_leaves_the_trainers_sigterm_handler_alone)
{
    alone();
    signal(SIGTERM, own_handler);
    elastic_worker *w = NULL;
    ASSERT_OK(elastic_worker_init(NULL, &w));
    ASSERT_ERR(elastic_worker_notice_on_sigterm(w), ELASTIC_EBUSY);
    struct sigaction now;
    ASSERT_EQ(sigaction(SIGTERM, NULL, &now), 0);
    ASSERT(now.sa_handler == own_handler);
    elastic_worker_close(w);
}

TEST(worker_gets_the_agents_stop_notice_with_its_grace)
{
    alone();
    elastic_store_server *server = NULL;
    ASSERT_OK(elastic_store_server_start(NULL, &server));
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", test_server_port(server));
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s/agent.sock", test_tmpdir());
    int listener = socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT(listener >= 0);
    ASSERT_EQ(bind(listener, (struct sockaddr *)&addr, sizeof addr), 0);
    ASSERT_EQ(listen(listener, 1), 0);
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "1", 1);
    setenv("ELASTIC_STORE_ENDPOINT", endpoint, 1);
    setenv("ELASTIC_STORE_PREFIX", "g/1/", 1);
    setenv("ELASTIC_GENERATION", "1", 1);
    setenv("ELASTIC_AGENT_SOCKET", addr.sun_path, 1);
    elastic_worker *w = NULL;
    ASSERT_OK(elastic_worker_init(NULL, &w));
    int agent = accept(listener, NULL, NULL);
    ASSERT(agent >= 0);
    ASSERT_EQ(elastic_worker_stop_notice(w, NULL), 0);
    static const char notice[] = "GRACE_MS=4000\nREASON=SIGTERM (scancel)\n";
    ASSERT_OK(channel__msg_write(agent, CHANNEL__MSG_NOTICE, notice, strlen(notice)));
    uint64_t deadline = elastic__now_ms() + (uint64_t)test_scaled_ms(5000);
    int grace = 0;
    while (elastic_worker_stop_notice(w, &grace) == 0) {
        ASSERT_LT(elastic__now_ms(), deadline);
        usleep(1000);
    }
    ASSERT(grace > 0 && grace <= 4000);
    ASSERT_OK(elastic_worker_poll(w)); /* a notice is not a new generation */
    elastic_worker_close(w);
    close(agent);
    close(listener);
    elastic_store_server_close(server);
}
