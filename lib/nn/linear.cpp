#include "nn/linear.hpp"

#include <cmath>
#include <stdexcept>

#include "nn/init.hpp"
#include "nn/layer_factory.hpp"
#include "nn/linear_cpu.hpp"
#include "nn/linear_cuda.hpp"

namespace sdp::nn {

std::unique_ptr<Linear> Linear::create(Context& ctx, std::string name, const LinearOptions& options) {
  return make_for_device<Linear, LinearCpu, LinearCuda>(ctx, "Linear", std::move(name), options);
}

Linear::Linear(Context& ctx, std::string name, const LinearOptions& options)
    : Layer(ctx, std::move(name)), options_(options) {
  if (options_.in_features < 1 || options_.out_features < 1)
    throw std::invalid_argument("Linear " + name_ + ": invalid options");
  weight_ = &add_parameter("weight", {options_.out_features, options_.in_features}, true);
  if (options_.bias) bias_ = &add_parameter("bias", {options_.out_features}, false);
}

void Linear::init_parameters(std::mt19937_64& rng) {
  // kaiming_uniform_(a=sqrt(5)) reduces to U(+-1/sqrt(fan_in)); the bias uses the same bound.
  const float bound = 1.0f / std::sqrt(static_cast<float>(options_.in_features));
  uniform(weight_->value, bound, rng);
  if (bias_) uniform(bias_->value, bound, rng);
}

void Linear::check_input(const Shape& in) const {
  if (in.size() != 2 || in[1] != options_.in_features)
    throw std::invalid_argument("Linear " + name_ + ": expected [N, " +
                                std::to_string(options_.in_features) + "] input");
}

}  // namespace sdp::nn
