// Weight initializers, matching PyTorch's so results are comparable with the papers'
// reference code. All draw from one std::mt19937_64 in a fixed order, so every rank that
// uses the same seed builds bit-identical weights, on whatever device the tensor lives.
#pragma once

#include <cstdint>
#include <random>

#include "core/tensor.hpp"

namespace sdp::nn {

// N(0, sqrt(2 / fan_out)): kaiming_normal_(mode="fan_out", nonlinearity="relu").
void kaiming_normal_fan_out(Tensor& weight, int64_t fan_out, std::mt19937_64& rng);
// U(-bound, bound).
void uniform(Tensor& t, float bound, std::mt19937_64& rng);
// Every element = value (on any device).
void constant(Tensor& t, float value);

}  // namespace sdp::nn
