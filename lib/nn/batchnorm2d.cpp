#include "nn/batchnorm2d.hpp"

#include <stdexcept>

#include "nn/batchnorm2d_cpu.hpp"
#include "nn/batchnorm2d_cuda.hpp"
#include "nn/init.hpp"
#include "nn/layer_factory.hpp"

namespace sdp::nn {

// The CUDA twin is on cuDNN: without cuDNN a CUDA build has none.
#ifdef SDP_HAVE_CUDNN
using BatchNorm2dCudaTwin = BatchNorm2dCuda;
#else
using BatchNorm2dCudaTwin = NoCudaTwin;
#endif

std::unique_ptr<BatchNorm2d> BatchNorm2d::create(Context& ctx, std::string name,
                                                 const BatchNorm2dOptions& options) {
  return make_for_device<BatchNorm2d, BatchNorm2dCpu, BatchNorm2dCudaTwin>(ctx, "BatchNorm2d", std::move(name), options);
}

BatchNorm2d::BatchNorm2d(Context& ctx, std::string name, const BatchNorm2dOptions& options)
    : Layer(ctx, std::move(name)), options_(options) {
  if (options_.channels < 1) throw std::invalid_argument("BatchNorm2d " + name_ + ": channels < 1");
  const Shape c = {options_.channels};
  weight_ = &add_parameter("weight", c, false);
  bias_ = &add_parameter("bias", c, false);
  running_mean_ = &add_buffer("running_mean", c);
  running_var_ = &add_buffer("running_var", c);
}

void BatchNorm2d::init_parameters(std::mt19937_64& /*rng*/) {
  constant(weight_->value, options_.gamma_init);
  constant(bias_->value, 0.0f);
  constant(running_mean_->value, 0.0f);
  constant(running_var_->value, 1.0f);
}

const TensorRef& BatchNorm2d::residual_grad() const {
  throw std::logic_error("BatchNorm2d " + name_ + ": no residual sum fused");
}

void BatchNorm2d::check_input(const Shape& in) const {
  if (in.size() != 4 || in[1] != options_.channels)
    throw std::invalid_argument("BatchNorm2d " + name_ + ": expected [N, " +
                                std::to_string(options_.channels) + ", H, W] input");
}

void BatchNorm2d::update_running_stats_host(const float* batch_mean, const float* batch_var,
                                            int64_t reduce_count) {
  // Running statistics as PyTorch keeps them: the variance is unbiased (n / (n - 1)).
  const float m = options_.momentum;
  const float unbias =
      reduce_count > 1 ? static_cast<float>(reduce_count) / static_cast<float>(reduce_count - 1)
                       : 1.0f;
  float* rm = running_mean_->value.data<float>();
  float* rv = running_var_->value.data<float>();
  for (int c = 0; c < options_.channels; ++c) {
    rm[c] = (1.0f - m) * rm[c] + m * batch_mean[c];
    rv[c] = (1.0f - m) * rv[c] + m * batch_var[c] * unbias;
  }
}

}  // namespace sdp::nn
