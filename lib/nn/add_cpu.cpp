#include "nn/add_cpu.hpp"

#include <stdexcept>

namespace sdp::nn {

TensorDesc AddCpu::configure(const TensorDesc& a, const TensorDesc& b, AddOutput output) {
  if (a.shape != b.shape)
    throw std::invalid_argument("Add: operand shapes " + shape_str(a.shape) + " and " +
                                shape_str(b.shape) + " differ");
  const memory::desc a_md = to_md(a), b_md = to_md(b);
  const auto& eng = cpu_engine();
  output_ = output;
  const bool gradient = output_ == AddOutput::kGradient;
  b_to_a_.configure(b_md, a_md, gradient);
  diff_b_.configure(a_md, b_md, /*planned=*/true);
  const dnnl::binary::primitive_desc pd({dnnl::algorithm::binary_add, a_md, a_md, a_md}, eng);
  add_ = dnnl::binary(pd);
  dst_.reset();
  if (output_ != AddOutput::kInPlace) dst_.configure(pd.dst_desc());
  if (output_ == AddOutput::kActivation) dst_.get();  // its own storage, kept until backward
  a_port_.configure(a);
  b_port_.configure(b);
  out_ = {to_tensor_desc(pd.dst_desc()), nullptr};
  out_.desc.device = a.device;
  diff_port_.configure(out_.desc);
  diff_b_out_.desc = b;
  return out_.desc;
}

const TensorRef& AddCpu::forward(const TensorRef& a, const TensorRef& b) {
  auto& s = onednn_stream(ctx_);
  const memory& a_mem = a_port_.bind(a);
  // oneDNN's binary runs in place when dst is src0 (same descriptor by construction).
  const memory& dst = output_ == AddOutput::kInPlace ? a_mem : dst_.get();
  add_.execute(s, {{DNNL_ARG_SRC_0, a_mem},
                   {DNNL_ARG_SRC_1, b_to_a_.convert(s, b_port_.bind(b))},
                   {DNNL_ARG_DST, dst}});
  out_.data = dst.get_data_handle();
  return out_;
}

const TensorRef& AddCpu::backward_b(const TensorRef& diff_dst) {
  diff_b_out_.data = diff_b_.convert(onednn_stream(ctx_), diff_port_.bind(diff_dst)).get_data_handle();
  return diff_b_out_;
}

GradientPlan::Buffer* AddCpu::plan_backward_b(GradientPlan& plan, GradientPlan::Buffer* diff_dst) {
  plan.read(diff_dst);
  GradientPlan::Buffer* out = diff_b_.plan(plan, diff_dst);
  plan.next();
  return out;
}

GradientPlan::Buffer* AddCpu::plan_forward(GradientPlan& plan, GradientPlan::Buffer* a,
                                           GradientPlan::Buffer* b) {
  plan.read(a);
  plan.read(b);
  if (output_ != AddOutput::kGradient) {  // an activation: this object's own, or a in place
    plan.next();
    return output_ == AddOutput::kInPlace ? a : nullptr;
  }
  b_to_a_.plan(plan, b);
  GradientPlan::Buffer* out = dst_.write(plan);
  plan.next();
  return out;
}

}  // namespace sdp::nn
