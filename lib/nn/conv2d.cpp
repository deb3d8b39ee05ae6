#include "nn/conv2d.hpp"

#include <cmath>
#include <stdexcept>

#include "nn/conv2d_cpu.hpp"
#include "nn/conv2d_cuda.hpp"
#include "nn/init.hpp"
#include "nn/layer_factory.hpp"

namespace sdp::nn {

// The CUDA twin is on cuDNN: without cuDNN a CUDA build has none.
#ifdef SDP_HAVE_CUDNN
using Conv2dCudaTwin = Conv2dCuda;
#else
using Conv2dCudaTwin = NoCudaTwin;
#endif

std::unique_ptr<Conv2d> Conv2d::create(Context& ctx, std::string name, const Conv2dOptions& options) {
  return make_for_device<Conv2d, Conv2dCpu, Conv2dCudaTwin>(ctx, "Conv2d", std::move(name), options);
}

Conv2d::Conv2d(Context& ctx, std::string name, const Conv2dOptions& options)
    : Layer(ctx, std::move(name)), options_(options) {
  const auto& o = options_;
  if (o.in_channels < 1 || o.out_channels < 1 || o.kernel < 1 || o.stride < 1 || o.padding < 0)
    throw std::invalid_argument("Conv2d " + name_ + ": invalid options");
  weight_ = &add_parameter("weight", {o.out_channels, o.in_channels, o.kernel, o.kernel}, true);
  if (o.bias) bias_ = &add_parameter("bias", {o.out_channels}, false);
}

void Conv2d::init_parameters(std::mt19937_64& rng) {
  const auto& o = options_;
  kaiming_normal_fan_out(weight_->value, int64_t{o.out_channels} * o.kernel * o.kernel, rng);
  if (bias_) {
    const float fan_in = static_cast<float>(o.in_channels * o.kernel * o.kernel);
    uniform(bias_->value, 1.0f / std::sqrt(fan_in), rng);
  }
}

Shape Conv2d::output_shape(const Shape& in) const {
  const auto& o = options_;
  if (in.size() != 4 || in[1] != o.in_channels)
    throw std::invalid_argument("Conv2d " + name_ + ": expected [N, " +
                                std::to_string(o.in_channels) + ", H, W] input");
  const int64_t oh = (in[2] + 2 * o.padding - o.kernel) / o.stride + 1;
  const int64_t ow = (in[3] + 2 * o.padding - o.kernel) / o.stride + 1;
  if (oh < 1 || ow < 1) throw std::invalid_argument("Conv2d " + name_ + ": input too small");
  return {in[0], o.out_channels, oh, ow};
}

}  // namespace sdp::nn
