#include "data/sets/dataset.hpp"

#include <algorithm>
#include <cmath>

namespace sdp {

std::vector<int64_t> Dataset::label_histogram() const {
  std::vector<int64_t> hist(num_classes, 0);
  for (int32_t y : labels)
    if (y >= 0 && y < num_classes) ++hist[y];
  return hist;
}

Normalization Dataset::measure_normalization() const {
  Normalization norm;
  const int64_t plane = int64_t{height} * width;
  for (int c = 0; c < channels; ++c) {
    // Byte histogram first: exact, and one pass of cheap increments.
    std::vector<int64_t> hist(256, 0);
    for (int64_t i = 0; i < count; ++i) {
      const uint8_t* p = image(i) + c * plane;
      for (int64_t k = 0; k < plane; ++k) ++hist[p[k]];
    }
    double n = 0, sum = 0, sum_sq = 0;
    for (int v = 0; v < 256; ++v) {
      double x = v / 255.0;
      n += hist[v];
      sum += hist[v] * x;
      sum_sq += hist[v] * x * x;
    }
    double mean = n > 0 ? sum / n : 0.0;
    double var = n > 0 ? sum_sq / n - mean * mean : 0.0;
    norm.mean.push_back(static_cast<float>(mean));
    norm.std.push_back(static_cast<float>(std::sqrt(std::max(var, 1e-12))));
  }
  return norm;
}

}  // namespace sdp
