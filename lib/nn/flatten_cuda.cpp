// FlattenCuda (flatten_cuda.hpp): no kernel of its own, only views and layout conversions.
#include "nn/flatten_cuda.hpp"

#include <stdexcept>

namespace sdp::nn {

FlattenCuda::FlattenCuda(Context& ctx, std::string name) : Flatten(ctx, std::move(name)) {}

TensorDesc FlattenCuda::configure(const TensorDesc& src, bool /*training*/) {
  require_cuda_layout(src, "Flatten " + name_);
  if (src.shape.size() < 2) throw std::invalid_argument("Flatten " + name_ + ": expected [N, ...] input");
  int64_t features = 1;
  for (std::size_t i = 1; i < src.shape.size(); ++i) features *= src.shape[i];
  plain_src_ = TensorDesc::plain(src.shape, src.device, src.dtype);
  to_plain_.configure(src, plain_src_);
  from_plain_.configure(plain_src_, src, ctx_.planned_backward);  // backward's conversion
  out_ = {TensorDesc::plain({src.shape[0], features}, src.device, src.dtype), nullptr};
  diff_src_ = {src, nullptr};
  none_ = {src, nullptr};
  return out_.desc;
}

const TensorRef& FlattenCuda::forward(const TensorRef& src) {
  out_.data = to_plain_.convert(ctx_, src).data;
  return out_;
}

const TensorRef& FlattenCuda::backward(const TensorRef& diff_dst) {
  if (!needs_input_grad_) return none_;
  // The plain input gradient is diff_dst itself, seen with the input's shape.
  diff_src_.data = from_plain_.convert(ctx_, {plain_src_, diff_dst.data}).data;
  return diff_src_;
}

// A view of its input, or (channels_last input) a converted copy of its own.
GradientPlan::Buffer* FlattenCuda::plan_forward(GradientPlan& plan, GradientPlan::Buffer* src) {
  plan.read(src);
  plan.next();
  return to_plain_.needed() ? nullptr : src;
}

GradientPlan::Buffer* FlattenCuda::plan_backward(GradientPlan& plan, GradientPlan::Buffer* diff_dst) {
  plan.read(diff_dst);
  GradientPlan::Buffer* diff_src = needs_input_grad_ ? from_plain_.plan(plan, diff_dst) : nullptr;
  plan.next();
  return diff_src;
}

}  // namespace sdp::nn
