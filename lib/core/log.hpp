// Minimal logging: lines go to stderr with a rank prefix. Training metrics are not logs;
// they are printed by obs/ on stdout in the key=value form SageMaker regexes read.
#pragma once

#include <functional>
#include <mutex>
#include <string>

namespace sdp {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

// Set once the World knows its rank; before that lines carry no rank.
void set_log_rank(int rank);
void set_log_level(LogLevel level);
void log(LogLevel level, const std::string& message);
inline void log_info(const std::string& m) { log(LogLevel::kInfo, m); }
inline void log_warn(const std::string& m) { log(LogLevel::kWarn, m); }

// Sharing the terminal with a live status line (obs/progress.hpp's bar, redrawn in place
// with \r): every writer of whole lines takes terminal_lock() and calls
// erase_status_line() first, so a line never lands in the middle of the bar. log() does
// both itself; other writers (the metric lines) do it around their printf. The eraser runs
// with the lock held (it must not log); an empty function removes it.
std::unique_lock<std::mutex> terminal_lock();
void set_status_line_eraser(std::function<void()> erase);
void erase_status_line();  // with terminal_lock() held

}  // namespace sdp
