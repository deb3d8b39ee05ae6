#include "train/interruption.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstring>

namespace sdp {

namespace {

volatile sig_atomic_t g_signal = 0;

void on_signal(int signo) {
  if (g_signal != 0) {
    static const char msg[] = "sdp-train: second signal: exiting at once without a checkpoint\n";
    ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    ::_exit(128 + signo);
  }
  g_signal = signo;
  static const char msg[] =
      "sdp-train: signal received: stopping at the next step boundary with a checkpoint "
      "(send it again to exit at once)\n";
  ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)ignored;
}

}  // namespace

void install_interruption_handlers() {
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // blocking calls (MPI, file I/O) carry on; the loop polls the flag
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGINT, &action, nullptr);
}

bool interruption_requested() {
  return g_signal != 0;
}

int interruption_signal() {
  return g_signal;
}

}  // namespace sdp
