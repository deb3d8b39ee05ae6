#include "train/interruption.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "core/floating_point.hpp"

namespace sdp {

namespace {

std::atomic<int> g_signal{0};

sigset_t interruption_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

void write_stderr(const char* text, std::size_t n) {
  ssize_t ignored = ::write(STDERR_FILENO, text, n);
  (void)ignored;
}

[[noreturn]] void watch(sigset_t set) {
  for (;;) {
    int signo = 0;
    if (::sigwait(&set, &signo) != 0) continue;
    if (g_signal.load() != 0) {
      static const char msg[] = "sdp-train: second signal: exiting at once without a checkpoint\n";
      write_stderr(msg, sizeof msg - 1);
      ::_exit(128 + signo);
    }
    g_signal.store(signo);
    static const char msg[] =
        "sdp-train: signal received: stopping at the next step boundary with a checkpoint "
        "(send it again to exit at once)\n";
    write_stderr(msg, sizeof msg - 1);
  }
}

}  // namespace

void block_interruption_signals() {
  const sigset_t set = interruption_set();
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void install_interruption_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    // The calling thread too (a caller that did not block them at the start, as tests do):
    // then threads started before may still take a signal's default action.
    block_interruption_signals();
    start_thread(watch, interruption_set()).detach();
  });
}

bool interruption_requested() {
  return g_signal.load() != 0;
}

int interruption_signal() {
  return g_signal.load();
}

}  // namespace sdp
