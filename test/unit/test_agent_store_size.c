/* The store a node hosts for the job takes as many connections as the job
 * can bring (its agents and their workers), never fewer than the default:
 * a 16k-node job is not refused at node 4,097. */
#include "agent/generation_store.h"
#include "test.h"

TEST(agent_store_connection_limit_follows_the_job_size)
{
    ASSERT_EQ(agent__store_connections(1, 1), (size_t)4096);
    ASSERT_EQ(agent__store_connections(128, 8), (size_t)4096);
    /* Every node: its agent's few connections plus one per worker. */
    ASSERT_EQ(agent__store_connections(16384, 8), (size_t)16384 * 12 + 64);
    ASSERT_EQ(agent__store_connections(4096, 1), (size_t)4096 * 5 + 64);
    /* Unset or nonsense sizes fall back to the floor, never to 0. */
    ASSERT_EQ(agent__store_connections(0, 0), (size_t)4096);
    ASSERT_EQ(agent__store_connections(-5, -1), (size_t)4096);
}
