// A thin C++ layer over <elastic.h> for trainers: handles that free
// themselves, errors as exceptions carrying the ELASTIC_E* code and the
// library's detail, and std::function callbacks. Header-only; C++11.
#ifndef ELASTIC_HPP
#define ELASTIC_HPP

#include <elastic.h>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>

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
    {
        elastic_nccl_opts opts;
        check(elastic_nccl_opts_init(&opts, sizeof opts), "elastic_nccl_opts_init");
        opts.tag = tag;
        opts.collective_timeout_ms = collective_timeout_ms;
        check(elastic_nccl_comm_init(w.get(), &opts, &handle_), "elastic_nccl_comm_init");
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

} // namespace elastic

#endif // ELASTIC_HPP
