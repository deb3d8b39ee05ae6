#include "nn/dropout.hpp"

#include <functional>
#include <stdexcept>

#include "nn/dropout_cpu.hpp"
#include "nn/layer_factory.hpp"

namespace sdp::nn {

std::unique_ptr<Dropout> Dropout::create(Context& ctx, std::string name, float p) {
  return make_for_device<Dropout, DropoutCpu>(ctx, "Dropout", std::move(name), p);
}

Dropout::Dropout(Context& ctx, std::string name, float p)
    : Layer(ctx, std::move(name)), p_(p), rng_(ctx.seed ^ std::hash<std::string>{}(name_)) {
  if (!(p >= 0.0f && p < 1.0f))
    throw std::invalid_argument("Dropout " + name_ + ": p must be in [0, 1)");
}

}  // namespace sdp::nn
