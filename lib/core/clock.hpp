// Durations in sdp-train are measured on the steady clock (never the wall clock, which jumps).
#pragma once

#include <chrono>

namespace sdp {

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace sdp
