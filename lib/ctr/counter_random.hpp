// Random numbers keyed by position (seed, step, sample, unit...), so that a value is the same
// on every rank and at any thread count, whatever order it is drawn in: the CTR models'
// initialization, dropout and the planted synthetic set. Built on data/loading/random.hpp's mix64.
#pragma once

#include <cstdint>

#include "data/loading/random.hpp"

namespace sdp::ctr_random {

// mix64(... mix64(mix64(a) ^ b) ^ c ...) over every key given, in order.
template <typename... Keys>
uint64_t chain(uint64_t a, Keys... keys) {
  uint64_t h = mix64(a);
  ((h = mix64(h ^ static_cast<uint64_t>(keys))), ...);
  return h;
}

// A uniform double in [0, 1) from the top 53 bits.
inline double uniform01(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

}  // namespace sdp::ctr_random
