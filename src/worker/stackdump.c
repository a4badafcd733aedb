/*
 * The fallback stack dump for the hang probe when no debugger is available:
 * on the agent's signal the handler writes the interrupted thread's backtrace
 * to stderr (the worker's log). Installed only under an agent and only over a
 * default disposition, so a host's own handler is never replaced.
 */
#include "worker/worker.h"

#include <errno.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

static int installed_signal;
static int install_count;      /* worker handles relying on it */
static uint64_t *dump_counter; /* the slot's stack_dumps: tells the agent the backtrace is out */
static struct sigaction previous_action;
static pthread_mutex_t install_lock = PTHREAD_MUTEX_INITIALIZER;

/* Async-signal-safe: snprintf into a stack buffer is not guaranteed safe, so
 * the header is assembled by hand; backtrace() was warmed at install time. */
static void write_backtrace(int signal_number)
{
    (void)signal_number;
    int saved_errno = errno;
    static const char header[] = "elastic: backtrace requested by the agent's hang probe, pid ";
    char pid_text[24];
    int pos = (int)sizeof pid_text;
    unsigned pid = (unsigned)getpid();
    pid_text[--pos] = '\n';
    do pid_text[--pos] = (char)('0' + pid % 10), pid /= 10;
    while (pid > 0 && pos > 0);
    ssize_t ignored = write(STDERR_FILENO, header, sizeof header - 1);
    ignored = write(STDERR_FILENO, pid_text + pos, sizeof pid_text - (size_t)pos);
    (void)ignored;
    void *frames[64];
    int count = backtrace(frames, 64);
    backtrace_symbols_fd(frames, count, STDERR_FILENO);
    static const char footer[] = "elastic: end of backtrace\n";
    ignored = write(STDERR_FILENO, footer, sizeof footer - 1);
    uint64_t *counter = __atomic_load_n(&dump_counter, __ATOMIC_ACQUIRE);
    if (counter != NULL) __atomic_fetch_add(counter, 1, __ATOMIC_RELEASE);
    errno = saved_errno;
}

int worker__stackdump_install(int signal_number, uint64_t *counter)
{
    if (signal_number <= 0) return 0;
    pthread_mutex_lock(&install_lock);
    if (installed_signal == 0) {
        struct sigaction current;
        if (sigaction(signal_number, NULL, &current) == 0 && current.sa_handler == SIG_DFL &&
            !(current.sa_flags & SA_SIGINFO)) {
            void *warm[4];
            backtrace(warm, 4); /* loads libgcc now, not inside the handler */
            struct sigaction action;
            memset(&action, 0, sizeof action);
            action.sa_handler = write_backtrace;
            action.sa_flags = SA_RESTART;
            sigemptyset(&action.sa_mask);
            if (sigaction(signal_number, &action, &previous_action) == 0)
                installed_signal = signal_number;
        } else {
            ELASTIC_LOG_I("worker",
                          "signal %d has a handler already; hang stack dumps rely on a debugger",
                          signal_number);
        }
    }
    int result = installed_signal == signal_number ? signal_number : 0;
    if (result != 0) {
        install_count++;
        __atomic_store_n(&dump_counter, counter, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&install_lock);
    return result;
}

void worker__stackdump_uninstall(uint64_t *counter)
{
    pthread_mutex_lock(&install_lock);
    if (__atomic_load_n(&dump_counter, __ATOMIC_RELAXED) == counter) /* its memory is about to go */
        __atomic_store_n(&dump_counter, NULL, __ATOMIC_RELEASE);
    if (install_count > 0 && --install_count == 0) {
        sigaction(installed_signal, &previous_action, NULL);
        installed_signal = 0;
        __atomic_store_n(&dump_counter, NULL, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&install_lock);
}
