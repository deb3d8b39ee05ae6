// Minimal logging: lines go to stderr with a rank prefix. Training metrics are not logs;
// they are printed by obs/ on stdout in the key=value form SageMaker regexes read.
#pragma once

#include <string>

namespace sdp {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

// Set once the World knows its rank; before that lines carry no rank.
void set_log_rank(int rank);
void set_log_level(LogLevel level);
void log(LogLevel level, const std::string& message);
inline void log_info(const std::string& m) { log(LogLevel::kInfo, m); }
inline void log_warn(const std::string& m) { log(LogLevel::kWarn, m); }

}  // namespace sdp
