// Synthetic, seeded, learnable data: each class has a fixed random template (a coarse
// grid of random gray levels per channel, so it has spatial structure a conv net can
// use), and an image is its class template plus Gaussian pixel noise, clipped to uint8.
// Train and test share the templates (same seed) and differ in noise and order, so a
// small MLP or LeNet reaches > 90 % test accuracy in seconds. Used for smoke tests and
// for throughput benchmarks where the data should cost nothing to read.
#pragma once

#include <cstdint>

#include "data/sets/dataset.hpp"
#include "data/sets/split.hpp"

namespace sdp {

struct SyntheticSpec {
  int64_t count = 10000;  // samples in the split
  int channels = 1;
  int height = 28;
  int width = 28;
  int num_classes = 10;
  uint64_t seed = 42;
  // Noise std relative to the std of the class templates (~55 gray levels), the
  // meaning of data.synthetic.noise in the job spec. 0.5: easy; 2: hard.
  double noise = 0.5;
  int cell = 4;  // template grid cell size in pixels
};

Dataset make_synthetic(const SyntheticSpec& spec, Split split);

}  // namespace sdp
