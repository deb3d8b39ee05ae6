#include "nn/layer.hpp"

namespace sdp::nn {

Param& Layer::add_parameter(const std::string& suffix, const Shape& shape, bool weight_decay) {
  Param& p = ctx_.store.add_parameter(name_ + "." + suffix, shape, weight_decay);
  params_.push_back(&p);
  return p;
}

Buffer& Layer::add_buffer(const std::string& suffix, const Shape& shape) {
  return ctx_.store.add_buffer(name_ + "." + suffix, shape);
}

void Layer::grads_ready() const {
  if (!ctx_.grad_ready_hook) return;
  for (auto it = params_.rbegin(); it != params_.rend(); ++it) ctx_.grad_ready_hook(**it);
}

}  // namespace sdp::nn
