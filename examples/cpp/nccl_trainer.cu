// A data-parallel CUDA + NCCL toy trainer that survives failures with
// libelastic's training loop (elastic_loop_run, through examples/cpp/elastic.hpp):
// this file is the training logic. Every step each rank computes a gradient on
// its GPU, the ranks all-reduce it with NCCL through a communicator that
// recovers (elastic_nccl_*: with elasticrun --in-process-recovery the library
// aborts and rebuilds it), and update their weights. The loop restores, saves
// (disk every --ckpt-every, memory with --memory-ckpt), heartbeats, parks a
// warm spare and reloads after a peer's death.
//
//   nccl_trainer --ckpt-dir DIR [--steps 2000] [--ckpt-every 100] [--dim 1048576] [--timeout-ms 60000]
//
// The answer does not depend on the world size or on failures: the gradient
// is split so that the ranks' shares sum to 2 (w - target), so after n steps
// w = target + (w0 - target) (1 - 2 lr)^n, which the trainer checks at the end.
#include "elastic.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace {

const float kLearningRate = 0.01f;

void cuda_check(cudaError_t err, const char *what)
{
    if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

__device__ float target(int i) { return sinf(0.001f * (float)i); }

// This rank's share of the gradient: (rank + 1) / (1 + ... + world) of 2 (w - target).
__global__ void gradient(const float *w, float *g, int n, float share)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) g[i] = share * 2.0f * (w[i] - target(i));
}

__global__ void update(float *w, const float *g, int n, float lr)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) w[i] -= lr * g[i];
}

struct trainer {
    int dim = 1 << 20, timeout_ms = 60000, rank = 0, world = 1;
    float *weights = nullptr, *grads = nullptr;
    cudaStream_t stream = nullptr;
    std::unique_ptr<elastic::nccl_comm> comm;
    std::vector<float> host;
    uint64_t step_done = 0;

    // Every generation, after load: the first makes the communicator (on the
    // local rank's device); later ones find it already rebuilt.
    void build(elastic_worker *w, const elastic_worker_info &info)
    {
        rank = info.rank;
        world = info.world_size;
        if (!comm) comm.reset(new elastic::nccl_comm(w, "dp", timeout_ms));
        std::printf("rank %d of %d starts at step %llu (generation %llu)\n", rank, world,
                    (unsigned long long)step_done, (unsigned long long)info.generation);
        std::fflush(stdout);
    }

    // Once, at the first load: after a warm spare was given its rank, whose
    // LOCAL_RANK (the device) is then in the environment.
    void allocate()
    {
        if (weights != nullptr) return;
        const char *local_rank = std::getenv("LOCAL_RANK");
        cuda_check(cudaSetDevice(local_rank != nullptr ? std::atoi(local_rank) : 0), "cudaSetDevice");
        cuda_check(cudaStreamCreate(&stream), "cudaStreamCreate");
        cuda_check(cudaMalloc(&weights, sizeof(float) * dim), "cudaMalloc");
        cuda_check(cudaMalloc(&grads, sizeof(float) * dim), "cudaMalloc");
        host.resize(dim);
    }

    // false: the communicator was aborted (the group changed); the loop reloads.
    bool step(elastic_worker *, uint64_t)
    {
        int threads = 256, blocks = (dim + threads - 1) / threads;
        float share = (float)(rank + 1) / (float)(world * (world + 1) / 2);
        gradient<<<blocks, threads, 0, stream>>>(weights, grads, dim, share);
        ncclComm_t nccl = (ncclComm_t)comm->get();
        if (nccl == nullptr) return false;
        ncclResult_t result = ncclAllReduce(grads, grads, dim, ncclFloat32, ncclSum, nccl, stream);
        comm->watch(stream);
        update<<<blocks, threads, 0, stream>>>(weights, grads, dim, kLearningRate);
        cudaError_t synced = cudaStreamSynchronize(stream);
        if (result != ncclSuccess || synced != cudaSuccess || !comm->healthy()) return false;
        step_done++;
        return true;
    }

    std::vector<elastic_ckpt_blob> save(uint64_t n, int tier)
    {
        cuda_check(cudaMemcpy(host.data(), weights, sizeof(float) * dim, cudaMemcpyDeviceToHost), "copy out");
        if (tier == ELASTIC_CKPT_SOURCE_DISK && rank == 0) std::printf("saved step %llu\n", (unsigned long long)n);
        std::fflush(stdout);
        return {{"weights", host.data(), sizeof(float) * dim, ELASTIC_CKPT_REPLICATED}};
    }

    void load(elastic_ckpt *from, uint64_t n)
    {
        allocate();
        step_done = n;
        if (from == nullptr) { // the start: w0 = 0
            cuda_check(cudaMemset(weights, 0, sizeof(float) * dim), "cudaMemset");
            return;
        }
        size_t len = 0;
        elastic::check(elastic_ckpt_read_into(from, n, "weights", host.data(), sizeof(float) * dim, &len),
                       "elastic_ckpt_read_into");
        if (len != sizeof(float) * dim) throw std::runtime_error("checkpoint of another size");
        cuda_check(cudaMemcpy(weights, host.data(), len, cudaMemcpyHostToDevice), "copy in");
    }

    // The largest distance from the closed-form answer (computed on the host).
    double max_error()
    {
        cuda_check(cudaMemcpy(host.data(), weights, sizeof(float) * dim, cudaMemcpyDeviceToHost), "copy out");
        double decay = std::pow(1.0 - 2.0 * kLearningRate, (double)step_done), worst = 0;
        for (int i = 0; i < dim; i += 997)
            worst = std::fmax(worst, std::fabs(host[i] - std::sin(0.001 * i) * (1.0 - decay)));
        return worst;
    }
};

} // namespace

int main(int argc, char **argv)
{
    try {
        trainer t;
        elastic_loop_opts opts;
        elastic::check(elastic_loop_opts_init(&opts, sizeof opts), "elastic_loop_opts_init");
        opts.steps = 2000;
        opts.disk_every = 100;
        opts.keep_last = 2;
        for (int i = 1; i + 1 < argc; i += 2) {
            std::string flag = argv[i];
            if (flag == "--ckpt-dir") opts.dir = argv[i + 1];
            else if (flag == "--steps") opts.steps = std::strtoull(argv[i + 1], nullptr, 10);
            else if (flag == "--ckpt-every") opts.disk_every = std::strtoull(argv[i + 1], nullptr, 10);
            else if (flag == "--dim") t.dim = std::atoi(argv[i + 1]);
            else if (flag == "--timeout-ms") t.timeout_ms = std::atoi(argv[i + 1]);
        }
        if (opts.dir == nullptr || t.dim <= 0)
            throw std::runtime_error("usage: nccl_trainer --ckpt-dir DIR [--steps N] [--ckpt-every K] [--dim D]");
        elastic_loop_result done = elastic::run_loop(t, opts);
        if (done.released) return 0; // a warm spare the job did not need
        double worst = t.max_error();
        std::printf("result rank=%d steps=%llu max_error=%.3g %s\n", done.rank, (unsigned long long)done.steps,
                    worst, worst < 1e-3 ? "ok" : "WRONG");
        return worst < 1e-3 ? 0 : 1;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "nccl_trainer: %s\n", e.what());
        return 1;
    }
}
