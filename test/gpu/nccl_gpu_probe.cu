// Measurements for test/gpu/run.sh on a machine with one NVIDIA GPU (one rank
// per communicator): communicator init, abort, re-create and NCCL's own
// shrink through libelastic, and the watchdog catching a kernel that spins on
// a host-set flag. Prints "name=value" lines (or "name=FAIL reason") that
// run.sh turns into its table; every wait here has a deadline.
//
//   nccl_gpu_probe [--timeout-ms 2000]
#include <elastic.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace {

double now_ms()
{
    using namespace std::chrono;
    return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

void fail(const char *name, const char *why)
{
    std::printf("%s=FAIL %s\n", name, why);
    std::fflush(stdout);
}

// A kernel that never ends until the host writes 1 into the mapped flag:
// what a hung collective looks like from the stream's point of view.
__global__ void spin(volatile int *flag)
{
    while (*flag == 0) {
    }
}

__global__ void fill(float *x, int n, float value)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = value;
}

elastic_nccl_comm *make_comm(elastic_worker *w, const char *tag, int timeout_ms, double *ms)
{
    elastic_nccl_opts opts;
    elastic_nccl_opts_init(&opts, sizeof opts);
    opts.tag = tag;
    opts.collective_timeout_ms = timeout_ms;
    opts.init_timeout_ms = 60000;
    elastic_nccl_comm *comm = nullptr;
    double started = now_ms();
    int rc = elastic_nccl_comm_init(w, &opts, &comm);
    *ms = now_ms() - started;
    if (rc != 0) {
        char why[512];
        std::snprintf(why, sizeof why, "%s: %s", elastic_err_name(rc), elastic_last_error());
        fail("init_ms", why);
        return nullptr;
    }
    return comm;
}

// 20 all-reduces of 4 MiB; true when the sums are right (one rank: x itself).
bool allreduce_works(elastic_nccl_comm *comm, cudaStream_t stream)
{
    const int n = 1 << 20;
    float *x = nullptr;
    if (cudaMalloc(&x, sizeof(float) * n) != cudaSuccess) return false;
    fill<<<(n + 255) / 256, 256, 0, stream>>>(x, n, 1.5f);
    bool ok = true;
    for (int i = 0; i < 20 && ok; i++) {
        ok = ncclAllReduce(x, x, n, ncclFloat32, ncclSum, (ncclComm_t)elastic_nccl_comm_get(comm), stream) ==
             ncclSuccess;
        elastic_nccl_watch(comm, stream);
    }
    ok = ok && cudaStreamSynchronize(stream) == cudaSuccess;
    float first = 0;
    ok = ok && cudaMemcpy(&first, x, sizeof first, cudaMemcpyDeviceToHost) == cudaSuccess && first == 1.5f;
    cudaFree(x);
    return ok;
}

void measure_lifecycle(elastic_worker *w, cudaStream_t stream)
{
    double init_ms = 0;
    elastic_nccl_comm *comm = make_comm(w, "life", 60000, &init_ms);
    if (comm == nullptr) return;
    std::printf("init_ms=%.1f\n", init_ms);
    std::printf("allreduce=%s\n", allreduce_works(comm, stream) ? "ok" : "FAIL wrong sum or NCCL error");
    double started = now_ms();
    elastic_nccl_comm_abort(comm);
    std::printf("abort_ms=%.1f\n", now_ms() - started);
    started = now_ms();
    int rc = elastic_nccl_comm_rebuild(comm); // alone, the same group: re-created with a new unique id
    double rebuild_ms = now_ms() - started;
    if (rc != 0) fail("recreate_ms", elastic_last_error());
    else std::printf("recreate_ms=%.1f\n", rebuild_ms);
    if (rc == 0) std::printf("allreduce_after_rebuild=%s\n", allreduce_works(comm, stream) ? "ok" : "FAIL");
    // NCCL's shrink itself (one GPU: nothing to exclude, so a shrink to the same ranks).
    ncclComm_t parent = (ncclComm_t)elastic_nccl_comm_get(comm), child = nullptr;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    started = now_ms();
    ncclResult_t result = parent != nullptr ? ncclCommShrink(parent, nullptr, 0, &child, &config, NCCL_SHRINK_DEFAULT)
                                            : ncclInvalidUsage;
    ncclResult_t state = result;
    while (state == ncclInProgress && now_ms() - started < 30000) {
        ncclCommGetAsyncError(child, &state);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (state == ncclSuccess) std::printf("shrink_ms=%.1f\n", now_ms() - started);
    else fail("shrink_ms", ncclGetErrorString(state));
    if (child != nullptr) ncclCommAbort(child);
    elastic_nccl_comm_close(comm);
}

void measure_watchdog(elastic_worker *w, cudaStream_t stream, int timeout_ms)
{
    double init_ms = 0;
    elastic_nccl_comm *comm = make_comm(w, "hang", timeout_ms, &init_ms);
    if (comm == nullptr) return;
    int *flag = nullptr, *device_flag = nullptr;
    if (cudaHostAlloc(&flag, sizeof *flag, cudaHostAllocMapped) != cudaSuccess ||
        cudaHostGetDevicePointer(&device_flag, flag, 0) != cudaSuccess) {
        fail("watchdog_detect_ms", "mapped host memory");
        return;
    }
    *flag = 0;
    float *x = nullptr;
    cudaMalloc(&x, sizeof(float) * 1024);
    spin<<<1, 1, 0, stream>>>(device_flag); // the stream is stuck from here
    ncclAllReduce(x, x, 1024, ncclFloat32, ncclSum, (ncclComm_t)elastic_nccl_comm_get(comm), stream);
    double marked = now_ms();
    elastic_nccl_watch(comm, stream);
    while (elastic_nccl_comm_check(comm) == 0 && now_ms() - marked < timeout_ms + 30000)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    double detected = now_ms() - marked;
    bool caught = elastic_nccl_comm_check(comm) != 0;
    *(volatile int *)flag = 1; // let the kernel end either way
    cudaError_t synced = cudaStreamSynchronize(stream);
    if (caught) std::printf("watchdog_detect_ms=%.1f\nwatchdog_deadline_ms=%d\n", detected, timeout_ms);
    else fail("watchdog_detect_ms", "the watchdog did not abort the communicator");
    std::printf("stream_after_abort=%s\n", cudaGetErrorString(synced));
    cudaFree(x);
    cudaFreeHost(flag);
    elastic_nccl_comm_close(comm);
}

} // namespace

int main(int argc, char **argv)
{
    int timeout_ms = 2000;
    for (int i = 1; i + 1 < argc; i++)
        if (std::strcmp(argv[i], "--timeout-ms") == 0) timeout_ms = std::atoi(argv[i + 1]);
    int version = 0;
    ncclGetVersion(&version);
    std::printf("nccl_version=%d\nfeature_nccl=%d\n", version, elastic_has_feature("nccl"));
    elastic_worker *w = nullptr;
    if (elastic_worker_init(nullptr, &w) != 0) {
        fail("worker", elastic_last_error());
        return 1;
    }
    cudaStream_t stream;
    if (cudaStreamCreate(&stream) != cudaSuccess) {
        fail("stream", "cudaStreamCreate");
        return 1;
    }
    measure_lifecycle(w, stream);
    measure_watchdog(w, stream, timeout_ms);
    cudaStreamDestroy(stream);
    elastic_worker_close(w);
    return 0;
}
