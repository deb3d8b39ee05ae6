#include "nn/flatten_cpu.hpp"

namespace sdp::nn {

memory::desc FlattenCpu::configure_md(const memory::desc& src_md, bool /*training*/) {
  const Dims in = src_md.dims();
  int64_t features = 1;
  for (std::size_t i = 1; i < in.size(); ++i) features *= in[i];
  plain_src_md_ = plain_md(in);
  dst_md_ = plain_md({in[0], features});
  to_plain_.configure(src_md, plain_src_md_);
  from_plain_.configure(plain_src_md_, src_md, /*planned=*/true);
  dst_ = memory(dst_md_, cpu_engine(), nullptr);
  diff_src_plain_ = memory(plain_src_md_, cpu_engine(), nullptr);
  return dst_md_;
}

const memory& FlattenCpu::forward_md(const memory& src) {
  const memory& plain = to_plain_.convert(stream(), src);
  dst_.set_data_handle(plain.get_data_handle());
  return dst_;
}

const memory& FlattenCpu::backward_md(const memory& diff_dst) {
  if (!needs_input_grad_) return empty_;
  diff_src_plain_.set_data_handle(diff_dst.get_data_handle());
  return from_plain_.convert(stream(), diff_src_plain_);
}

GradientPlan::Buffer* FlattenCpu::plan_backward_md(GradientPlan& plan,
                                                   GradientPlan::Buffer* diff_dst) {
  // The plain input gradient is diff_dst itself; only a reorder back writes a new buffer.
  return needs_input_grad_ ? from_plain_.plan(plan, diff_dst) : nullptr;
}

}  // namespace sdp::nn
