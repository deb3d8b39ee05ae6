#include "nn/relu_cpu.hpp"

namespace sdp::nn {

using dnnl::algorithm;
using dnnl::prop_kind;

memory::desc ReLUCpu::configure_md(const memory::desc& src_md, bool training) {
  const auto& eng = cpu_engine();
  // Backward from the output (relu'(x) == (y > 0)) so the input need not stay alive.
  const algorithm alg = algorithm::eltwise_relu_use_dst_for_bwd;
  const dnnl::eltwise_forward::primitive_desc fwd_pd(
      {training ? prop_kind::forward_training : prop_kind::forward_inference, alg, src_md, 0.f,
       0.f},
      eng);
  fwd_ = dnnl::eltwise_forward(fwd_pd);
  // oneDNN's eltwise runs in place when src and dst are one memory.
  dst_ = in_place_ ? memory() : memory(fwd_pd.dst_desc(), eng);
  diff_src_.reset();
  if (training && needs_input_grad_) {
    const dnnl::eltwise_backward::primitive_desc bwd_pd({alg, src_md, src_md, 0.f, 0.f}, eng,
                                                        fwd_pd);
    bwd_ = dnnl::eltwise_backward(bwd_pd);
    diff_src_.configure(bwd_pd.diff_src_desc());
  }
  return fwd_pd.dst_desc();
}

const memory& ReLUCpu::forward_md(const memory& src) {
  if (in_place_) dst_ = src;  // a handle copy: backward reads the output from here
  fwd_.execute(stream(), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst_}});
  return dst_;
}

const memory& ReLUCpu::backward_md(const memory& diff_dst) {
  if (!needs_input_grad_) return empty_;
  bwd_.execute(
      stream(),
      {{DNNL_ARG_DST, dst_}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, diff_src_.get()}});
  return diff_src_.get();
}

GradientPlan::Buffer* ReLUCpu::plan_backward_md(GradientPlan& plan,
                                                GradientPlan::Buffer* /*diff_dst*/) {
  return needs_input_grad_ ? diff_src_.write(plan) : nullptr;
}

}  // namespace sdp::nn
