// Portable random numbers for everything that must be identical on every rank and
// every standard library: std::mt19937_64 is specified bit for bit, but the
// std::*_distribution classes and std::shuffle are not, so we draw from the raw engine.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <random>

namespace sdp {

// Every random stream of the data side, by the key that keeps it apart from the others: each
// draws from the job's seed mixed with its own key (and its epoch, sample, pass...), so no two
// streams ever draw the same numbers. A new stream takes a new key here;
// tests/unit/data/test_random_streams.cpp checks that they all differ. The values are the ones
// every checkpoint and recipe was made with: changing one changes every run's batches.
namespace random_stream {
inline constexpr uint64_t kSampleOrder = 0x5eedull;                 // the epoch's permutation (sampler)
inline constexpr uint64_t kShardOrder = 0x7f4a7c159e3779b9ull;      // streamed sets: the shards of a pass
inline constexpr uint64_t kShuffleBuffer = 0x94d049bb133111ebull;   // streamed sets: the shuffle buffer
inline constexpr uint64_t kCropFlip = 0xa5a5a5a5a5a5a5a5ull;        // CIFAR's padded crop + flip (augment)
inline constexpr uint64_t kImageTransform = 0x3c6ef372fe94f82bull;  // RandomResizedCrop + flip
inline constexpr uint64_t kSyntheticClasses = 0x7e3a1a7eull;        // synthetic data: the class templates
inline constexpr uint64_t kSyntheticTrain = 1, kSyntheticTest = 2;  // synthetic data: each split's samples
inline constexpr std::array<uint64_t, 8> kAll = {kSampleOrder, kShardOrder, kShuffleBuffer, kCropFlip,
                                                 kImageTransform, kSyntheticClasses, kSyntheticTrain,
                                                 kSyntheticTest};
}  // namespace random_stream

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
