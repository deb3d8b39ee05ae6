// Portable random numbers for everything that must be identical on every rank and
// every standard library: std::mt19937_64 is specified bit for bit, but the
// std::*_distribution classes and std::shuffle are not, so we draw from the raw engine.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>

namespace sdp {

// SplitMix64 finalizer: turns structured keys (seed, epoch, index) into well-mixed seeds.
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline uint64_t mix_keys(uint64_t a, uint64_t b) {
  return mix64(a ^ mix64(b));
}
inline uint64_t mix_keys(uint64_t a, uint64_t b, uint64_t c) {
  return mix_keys(mix_keys(a, b), c);
}

// Uniform integer in [0, bound), unbiased (rejection of the short top range).
inline uint64_t uniform_below(std::mt19937_64& rng, uint64_t bound) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  uint64_t r;
  do r = rng();
  while (r >= limit);
  return r % bound;
}

// Uniform double in [0, 1) from the top 53 bits.
inline double uniform01(std::mt19937_64& rng) {
  return (rng() >> 11) * 0x1.0p-53;
}

// Standard normal (Box-Muller; one value per call, simplicity over speed).
inline double standard_normal(std::mt19937_64& rng) {
  double u1 = 1.0 - uniform01(rng);  // (0, 1]: log is finite
  double u2 = uniform01(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace sdp
