// A thin C++ layer over <elastic.h> for trainers: handles that free
// themselves, errors as exceptions carrying the ELASTIC_E* code and the
// library's detail, and std::function callbacks. Header-only; C++11.
#ifndef ELASTIC_HPP
#define ELASTIC_HPP

#include <elastic.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace elastic {

class error : public std::runtime_error {
public:
    error(int code, const std::string &what)
        : std::runtime_error(what + ": " + elastic_err_name(code) + " (" + elastic_last_error() + ")"), code_(code) {}
    int code() const { return code_; }

private:
    int code_;
};

inline void check(int rc, const char *what)
{
    if (rc != 0) throw error(rc, what);
}

// The worker: attach at construction, detach at destruction. Not copyable.
class worker {
public:
    worker() { check(elastic_worker_init(nullptr, &handle_), "elastic_worker_init"); }
    ~worker() { elastic_worker_close(handle_); }
    worker(const worker &) = delete;
    worker &operator=(const worker &) = delete;

    elastic_worker *get() const { return handle_; }
    elastic_worker_info info() const
    {
        elastic_worker_info out = {};
        out.struct_size = sizeof out;
        check(elastic_worker_get_info(handle_, &out), "elastic_worker_get_info");
        return out;
    }
    void heartbeat(uint64_t step) { elastic_worker_heartbeat(handle_, step); }
    // true when the group changed and the trainer must reload its state;
    // throws when the job is over for this worker (ECLOSED, ETIMEDOUT).
    bool poll()
    {
        int rc = elastic_worker_poll(handle_);
        if (rc == ELASTIC_ERECONFIGURE) return true;
        check(rc, "elastic_worker_poll");
        return false;
    }
    // Runs on the trainer's thread inside poll(), after the library rebuilt
    // the NCCL communicators for the new generation.
    void on_reconfigure(std::function<void(const elastic_worker_info &)> fn)
    {
        reconfigure_ = std::move(fn);
        check(elastic_worker_on_reconfigure(handle_, reconfigure_ ? &worker::trampoline : nullptr, this),
              "elastic_worker_on_reconfigure");
    }

private:
    static void trampoline(void *user, const elastic_worker_info *info)
    {
        static_cast<worker *>(user)->reconfigure_(*info);
    }
    elastic_worker *handle_ = nullptr;
    std::function<void(const elastic_worker_info &)> reconfigure_;
};

// An NCCL communicator that recovers (see docs/NCCL.md). get() is the
// ncclComm_t; fetch it again after poll() returned true.
class nccl_comm {
public:
    nccl_comm(worker &w, const char *tag, int collective_timeout_ms = 60000)
        : nccl_comm(w.get(), tag, collective_timeout_ms) {}
    nccl_comm(elastic_worker *w, const char *tag, int collective_timeout_ms = 60000)
    {
        elastic_nccl_opts opts;
        check(elastic_nccl_opts_init(&opts, sizeof opts), "elastic_nccl_opts_init");
        opts.tag = tag;
        opts.collective_timeout_ms = collective_timeout_ms;
        check(elastic_nccl_comm_init(w, &opts, &handle_), "elastic_nccl_comm_init");
    }
    ~nccl_comm() { elastic_nccl_comm_close(handle_); }
    nccl_comm(const nccl_comm &) = delete;
    nccl_comm &operator=(const nccl_comm &) = delete;

    void *get() const { return elastic_nccl_comm_get(handle_); }
    // After each collective (or group of them) on `stream` (a cudaStream_t).
    void watch(void *stream) { elastic_nccl_watch(handle_, stream); }
    bool healthy() const { return elastic_nccl_comm_check(handle_) == 0; }
    elastic_nccl_info info() const
    {
        elastic_nccl_info out = {};
        out.struct_size = sizeof out;
        check(elastic_nccl_comm_get_info(handle_, &out), "elastic_nccl_comm_get_info");
        return out;
    }

private:
    elastic_nccl_comm *handle_ = nullptr;
};

// elastic_loop_run (include/elastic/loop.h) over a trainer object with
//   void build(elastic_worker *, const elastic_worker_info &);   every generation
//   bool step(elastic_worker *, uint64_t step);      false: the group changed
//   std::vector<elastic_ckpt_blob> save(uint64_t step, int tier);
//   void load(elastic_ckpt *from, uint64_t step);    from nullptr: the start
// The blobs' data must stay valid until the next call. An exception ends
// the run and is thrown again from run_loop.
template <class T> class loop_adapter {
public:
    explicit loop_adapter(T &trainer) : trainer_(trainer) {}
    static int build(void *u, elastic_worker *w, const elastic_worker_info *info)
    {
        return guard(u, [&](T &t) -> int { t.build(w, *info); return 0; });
    }
    static int step(void *u, elastic_worker *w, uint64_t n)
    {
        return guard(u, [&](T &t) -> int { return t.step(w, n) ? 0 : ELASTIC_ERECONFIGURE; });
    }
    static int save(void *u, uint64_t n, int tier, const elastic_ckpt_blob **blobs, size_t *count)
    {
        auto *self = static_cast<loop_adapter *>(u);
        return guard(u, [&](T &t) -> int {
            self->blobs_ = t.save(n, tier);
            *blobs = self->blobs_.data();
            *count = self->blobs_.size();
            return 0;
        });
    }
    static int load(void *u, elastic_ckpt *from, uint64_t n)
    {
        return guard(u, [&](T &t) -> int { t.load(from, n); return 0; });
    }
    std::exception_ptr failure;

private:
    template <class F> static int guard(void *u, F f)
    {
        auto *self = static_cast<loop_adapter *>(u);
        try {
            return f(self->trainer_);
        } catch (const error &e) {
            if (e.code() != ELASTIC_ERECONFIGURE) self->failure = std::current_exception();
            return e.code();
        } catch (...) {
            self->failure = std::current_exception();
            return ELASTIC_EIO;
        }
    }
    T &trainer_;
    std::vector<elastic_ckpt_blob> blobs_;
};

template <class T> elastic_loop_result run_loop(T &trainer, elastic_loop_opts opts)
{
    loop_adapter<T> adapter(trainer);
    opts.user = &adapter;
    opts.build = &loop_adapter<T>::build;
    opts.step = &loop_adapter<T>::step;
    opts.save = &loop_adapter<T>::save;
    opts.load = &loop_adapter<T>::load;
    elastic_loop_result result = {};
    result.struct_size = sizeof result;
    int rc = elastic_loop_run(&opts, &result);
    if (adapter.failure) std::rethrow_exception(adapter.failure);
    check(rc, "elastic_loop_run");
    return result;
}

} // namespace elastic

#endif // ELASTIC_HPP
