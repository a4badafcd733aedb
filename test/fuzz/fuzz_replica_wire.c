/* libFuzzer target for the replica channel's request decoder
 * (src/replica/wire.c, replica__recv_request) as the receiver runs it on
 * what a peer sent: a transport that hands out the fuzzer's bytes. Oracle:
 * an accepted request is within every bound the receiver relies on (its
 * origin a node name, rank < world <= CKPT_MAX_WORLD, a push's length within
 * replica__file_max), and a file path built from it stays under its dir. */
#include "replica/wire.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct fuzz_conn {
    replica_conn base;
    const uint8_t *data;
    size_t size, at;
} fuzz_conn;

static int fuzz_recv(replica_conn *c, void *out, size_t len, uint64_t deadline_ms)
{
    (void)deadline_ms;
    fuzz_conn *f = (fuzz_conn *)c;
    if (len > f->size - f->at) return elastic__fail(ELASTIC_ECONNECT, "fuzz: end of input");
    memcpy(out, f->data + f->at, len);
    f->at += len;
    return 0;
}

static const replica_transport_ops fuzz_ops = { .name = "fuzz", .recv = fuzz_recv };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_conn f = { .base.ops = &fuzz_ops, .data = data, .size = size };
    replica_request r;
    if (replica__recv_request(&f.base, &r, 0) != 0) return 0;
    if (r.id.world == 0 || r.id.world > CKPT_MAX_WORLD || r.id.rank >= r.id.world) abort();
    if (r.id.origin[0] != '\0' && !replica__node_name_ok(r.id.origin)) abort();
    if (r.op == REPLICA_OP_PUT && (r.id.origin[0] == '\0' || r.length > replica__file_max(&r.id)))
        abort();
    char path[4096];
    replica__file_path("/tier/peer/x", &r.id, path, sizeof path);
    if (strncmp(path, "/tier/peer/x/", 13) != 0 || strstr(path, "..") != NULL) abort();
    return 0;
}
