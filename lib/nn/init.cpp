#include "nn/init.hpp"

#include <cmath>
#include <vector>

namespace sdp::nn {

namespace {
// Draws on the host in element order, then places the values on the tensor's device, so
// every device gets bit-identical initial weights from the same seed.
template <typename Draw>
void init_values(Tensor& t, Draw draw) {
  if (t.device().is_cpu()) {
    float* p = t.data<float>();
    for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = draw();
    return;
  }
  std::vector<float> host(static_cast<std::size_t>(t.numel()));
  for (float& v : host) v = draw();
  copy_bytes(t.device(), t.raw(), Device::cpu(), host.data(), t.nbytes());
}
}  // namespace

void kaiming_normal_fan_out(Tensor& weight, int64_t fan_out, std::mt19937_64& rng) {
  std::normal_distribution<float> dist(0.0f, std::sqrt(2.0f / static_cast<float>(fan_out)));
  init_values(weight, [&] { return dist(rng); });
}

void uniform(Tensor& t, float bound, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-bound, bound);
  init_values(t, [&] { return dist(rng); });
}

void constant(Tensor& t, float value) {
  init_values(t, [value] { return value; });
}

}  // namespace sdp::nn
