/*
 * Test helper: holds a store lease with a key attached, kept alive by the
 * client's I/O thread, then idles until killed (or 120 s pass).
 * usage: store_lease_holder ENDPOINT KEY TTL_MS KEEPALIVE_MS
 */
#include "elastic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: store_lease_holder ENDPOINT KEY TTL_MS KEEPALIVE_MS\n");
        return 2;
    }
    elastic_store *store = NULL;
    uint64_t lease = 0;
    int rc = elastic_store_connect(argv[1], NULL, &store);
    if (rc == 0) rc = elastic_store_lease_grant(store, atoi(argv[3]), atoi(argv[4]), &lease);
    if (rc == 0) rc = elastic_store_set_leased(store, argv[2], "held", 4, lease);
    if (rc != 0) {
        fprintf(stderr, "store_lease_holder: %s (%s)\n", elastic_strerror(rc),
                elastic_last_error());
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    for (int i = 0; i < 120; i++) sleep(1);
    elastic_store_close(store);
    return 0;
}
