// Durations in sdp-train are measured on the steady clock (never the wall clock, which jumps).
#pragma once

#include <chrono>
#include <ctime>
#include <string>

namespace sdp {

// Today's date in UTC, "2026-11-26": what measured files record as their date.
inline std::string utc_date() {
  const std::time_t now = std::time(nullptr);
  std::tm parts{};
  gmtime_r(&now, &parts);
  char text[16];
  std::strftime(text, sizeof text, "%Y-%m-%d", &parts);
  return text;
}

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace sdp
