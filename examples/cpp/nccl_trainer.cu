// A data-parallel CUDA + NCCL toy trainer that survives failures with
// libelastic: every step each rank computes a gradient on its GPU, the ranks
// all-reduce it with NCCL through a communicator that recovers, and update
// their weights; checkpoints go through elastic_ckpt. With elasticrun
// --in-process-recovery the survivors keep their process: the library
// aborts and rebuilds the communicator, the trainer only reloads its state.
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
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

const float kLearningRate = 0.01f;

struct args {
    std::string ckpt_dir;
    int steps = 2000, ckpt_every = 100, dim = 1 << 20, timeout_ms = 60000;
};

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

struct model {
    int dim;
    float *weights = nullptr, *grads = nullptr;
    uint64_t step = 0;
    explicit model(int n) : dim(n)
    {
        cuda_check(cudaMalloc(&weights, sizeof(float) * n), "cudaMalloc");
        cuda_check(cudaMalloc(&grads, sizeof(float) * n), "cudaMalloc");
        cuda_check(cudaMemset(weights, 0, sizeof(float) * n), "cudaMemset"); // w0 = 0
    }
    ~model()
    {
        cudaFree(weights);
        cudaFree(grads);
    }
};

// One checkpoint handle per generation: its rank and world are the generation's.
struct checkpoints {
    elastic_ckpt *handle = nullptr;
    checkpoints(const std::string &dir, const elastic_worker_info &info)
    {
        elastic_ckpt_opts opts;
        elastic::check(elastic_ckpt_opts_init(&opts, sizeof opts), "elastic_ckpt_opts_init");
        opts.compression = ELASTIC_CKPT_NONE;
        opts.keep_last = 2;
        opts.rank = (uint32_t)info.rank;
        opts.world = (uint32_t)info.world_size;
        opts.generation = info.generation;
        elastic::check(elastic_ckpt_open(dir.c_str(), &opts, &handle), "elastic_ckpt_open");
    }
    ~checkpoints() { elastic_ckpt_close(handle); }

    void save(const model &m)
    {
        std::vector<float> host(m.dim);
        cuda_check(cudaMemcpy(host.data(), m.weights, sizeof(float) * m.dim, cudaMemcpyDeviceToHost), "copy out");
        elastic_ckpt_blob blobs[2] = {{"step", &m.step, sizeof m.step, ELASTIC_CKPT_REPLICATED},
                                      {"weights", host.data(), sizeof(float) * m.dim, ELASTIC_CKPT_REPLICATED}};
        elastic::check(elastic_ckpt_save(handle, m.step, blobs, 2), "elastic_ckpt_save");
    }

    // The newest committed step, or a fresh start.
    void load(model &m)
    {
        uint64_t step = 0;
        int rc = elastic_ckpt_latest(handle, &step);
        if (rc == ELASTIC_ENOTFOUND) {
            m.step = 0;
            cuda_check(cudaMemset(m.weights, 0, sizeof(float) * m.dim), "cudaMemset");
            return;
        }
        elastic::check(rc, "elastic_ckpt_latest");
        std::vector<float> host(m.dim);
        size_t len = 0;
        elastic::check(elastic_ckpt_read_into(handle, step, "weights", host.data(), sizeof(float) * m.dim, &len),
                       "elastic_ckpt_read_into");
        if (len != sizeof(float) * m.dim) throw std::runtime_error("checkpoint of another size");
        cuda_check(cudaMemcpy(m.weights, host.data(), len, cudaMemcpyHostToDevice), "copy in");
        m.step = step;
    }
};

args parse(int argc, char **argv)
{
    args a;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string flag = argv[i];
        if (flag == "--ckpt-dir") a.ckpt_dir = argv[i + 1];
        else if (flag == "--steps") a.steps = std::atoi(argv[i + 1]);
        else if (flag == "--ckpt-every") a.ckpt_every = std::atoi(argv[i + 1]);
        else if (flag == "--dim") a.dim = std::atoi(argv[i + 1]);
        else if (flag == "--timeout-ms") a.timeout_ms = std::atoi(argv[i + 1]);
    }
    if (a.ckpt_dir.empty() || a.steps <= 0 || a.ckpt_every <= 0 || a.dim <= 0)
        throw std::runtime_error("usage: nccl_trainer --ckpt-dir DIR [--steps N] [--ckpt-every K] [--dim D]");
    return a;
}

// The largest distance from the closed-form answer (computed on the host).
double check_answer(const model &m)
{
    std::vector<float> host(m.dim);
    cuda_check(cudaMemcpy(host.data(), m.weights, sizeof(float) * m.dim, cudaMemcpyDeviceToHost), "copy out");
    double decay = std::pow(1.0 - 2.0 * kLearningRate, (double)m.step), worst = 0;
    for (int i = 0; i < m.dim; i += 997) {
        double expected = std::sin(0.001 * i) * (1.0 - decay);
        worst = std::fmax(worst, std::fabs(host[i] - expected));
    }
    return worst;
}

int train(const args &a)
{
    elastic::worker w;
    elastic_worker_info info = w.info();
    elastic::nccl_comm comm(w, "dp", a.timeout_ms); // the device defaults to the local rank
    cudaStream_t stream;
    cuda_check(cudaStreamCreate(&stream), "cudaStreamCreate");
    model m(a.dim);
    std::unique_ptr<checkpoints> ckpt(new checkpoints(a.ckpt_dir, info));
    ckpt->load(m);
    std::printf("rank %d of %d starts at step %llu (generation %llu)\n", info.rank, info.world_size,
                (unsigned long long)m.step, (unsigned long long)info.generation);
    int threads = 256, blocks = (a.dim + threads - 1) / threads;
    while (m.step < (uint64_t)a.steps) {
        if (w.poll()) { // the group changed: the communicator is already rebuilt
            info = w.info();
            ckpt.reset(new checkpoints(a.ckpt_dir, info));
            ckpt->load(m);
            elastic_nccl_info nccl = comm.info();
            std::printf("rank %d of %d resumes at step %llu after a %s communicator in %d ms\n", info.rank,
                        info.world_size, (unsigned long long)m.step,
                        nccl.last_method == ELASTIC_NCCL_SHRUNK ? "shrunk" : "re-created", nccl.last_build_ms);
            std::fflush(stdout);
        }
        float share = (float)(info.rank + 1) / (float)(info.world_size * (info.world_size + 1) / 2);
        gradient<<<blocks, threads, 0, stream>>>(m.weights, m.grads, a.dim, share);
        ncclComm_t nccl = (ncclComm_t)comm.get();
        if (nccl == nullptr) continue; // aborted: poll() waits for the next generation
        ncclResult_t result = ncclAllReduce(m.grads, m.grads, a.dim, ncclFloat32, ncclSum, nccl, stream);
        comm.watch(stream);
        update<<<blocks, threads, 0, stream>>>(m.weights, m.grads, a.dim, kLearningRate);
        cudaError_t synced = cudaStreamSynchronize(stream);
        if (result != ncclSuccess || synced != cudaSuccess || !comm.healthy()) continue;
        m.step++;
        w.heartbeat(m.step);
        if (m.step % (uint64_t)a.ckpt_every == 0) {
            ckpt->save(m);
            if (info.rank == 0) std::printf("saved step %llu\n", (unsigned long long)m.step);
            std::fflush(stdout);
        }
    }
    double worst = check_answer(m);
    std::printf("result rank=%d steps=%llu max_error=%.3g %s\n", info.rank, (unsigned long long)m.step, worst,
                worst < 1e-3 ? "ok" : "WRONG");
    cudaStreamDestroy(stream);
    return worst < 1e-3 ? 0 : 1;
}

} // namespace

int main(int argc, char **argv)
{
    try {
        return train(parse(argc, argv));
    } catch (const std::exception &e) {
        std::fprintf(stderr, "nccl_trainer: %s\n", e.what());
        return 1;
    }
}
