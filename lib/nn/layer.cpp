#include "nn/layer.hpp"

#include "nn/layer_profile.hpp"

namespace sdp::nn {

Param& Layer::add_parameter(const std::string& suffix, const Shape& shape, bool weight_decay) {
  Param& p = ctx_.store.add_parameter(name_ + "." + suffix, shape, weight_decay);
  params_.push_back(&p);
  return p;
}

Buffer& Layer::add_buffer(const std::string& suffix, const Shape& shape) {
  return ctx_.store.add_buffer(name_ + "." + suffix, shape);
}

const TensorRef& Layer::run_forward(const TensorRef& src) {
  if (ctx_.profile == nullptr || composite()) return forward(src);  // usually one pointer test
  LayerProfile::Scope scope(*ctx_.profile, this, name_, kind(), Pass::kForward);
  return forward(src);
}

const TensorRef& Layer::run_backward(const TensorRef& diff_dst) {
  if (ctx_.profile == nullptr || composite()) return backward(diff_dst);
  LayerProfile::Scope scope(*ctx_.profile, this, name_, kind(), Pass::kBackward);
  return backward(diff_dst);
}

GradientPlan::Buffer* Layer::plan_forward(GradientPlan& plan, GradientPlan::Buffer* src) {
  plan.read(src);
  plan.next();
  return nullptr;
}

void Layer::grads_ready() const {
  if (!ctx_.grad_ready_hook) return;
  for (auto it = params_.rbegin(); it != params_.rend(); ++it) ctx_.grad_ready_hook(**it);
}

}  // namespace sdp::nn
