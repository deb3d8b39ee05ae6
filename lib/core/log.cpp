#include "core/log.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace sdp {

namespace {
std::atomic<int> g_rank{-1};
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::mutex g_mutex;
std::function<void()> g_erase_status;  // guarded by g_mutex
}  // namespace

void set_log_rank(int rank) { g_rank = rank; }
void set_log_level(LogLevel level) { g_level = static_cast<int>(level); }

std::unique_lock<std::mutex> terminal_lock() {
  return std::unique_lock<std::mutex>(g_mutex);
}

void set_status_line_eraser(std::function<void()> erase) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_erase_status = std::move(erase);
}

void erase_status_line() {
  if (g_erase_status) g_erase_status();
}

void log(LogLevel level, const std::string& message) {
  if (static_cast<int>(level) < g_level) return;
  static const char* kNames[] = {"debug", "info", "warning", "error"};
  std::lock_guard<std::mutex> lock(g_mutex);
  erase_status_line();
  int rank = g_rank;
  if (rank >= 0)
    std::fprintf(stderr, "[sdp-train rank %d] %s: %s\n", rank, kNames[static_cast<int>(level)],
                 message.c_str());
  else
    std::fprintf(stderr, "[sdp-train] %s: %s\n", kNames[static_cast<int>(level)], message.c_str());
  std::fflush(stderr);
}

}  // namespace sdp
