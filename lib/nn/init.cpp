#include "nn/init.hpp"

#include <cmath>

namespace sdp::nn {

void kaiming_normal_fan_out(Tensor& weight, int64_t fan_out, std::mt19937_64& rng) {
  std::normal_distribution<float> dist(0.0f, std::sqrt(2.0f / static_cast<float>(fan_out)));
  float* w = weight.data<float>();
  for (int64_t i = 0, n = weight.numel(); i < n; ++i) w[i] = dist(rng);
}

void uniform(Tensor& t, float bound, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-bound, bound);
  float* p = t.data<float>();
  for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = dist(rng);
}

}  // namespace sdp::nn
