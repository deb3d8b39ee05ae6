#include "nn/pool2d_cpu.hpp"

#include <cstring>
#include <optional>
#include <stdexcept>

namespace sdp::nn {

using dnnl::algorithm;
using dnnl::prop_kind;

memory::desc Pool2dCpu::configure_md(const memory::desc& src_md, bool training) {
  const Dims in = src_md.dims();
  if (in.size() != 4) throw std::invalid_argument("Pool2d " + name_ + ": expected NCHW input");
  training_ = training;
  Dims kernel, strides, pad_l, pad_r, out;
  algorithm alg = algorithm::pooling_max;
  if (options_.kind == PoolKind::kGlobalAvg) {
    kernel = {in[2], in[3]};
    strides = {1, 1};
    pad_l = pad_r = {0, 0};
    out = {in[0], in[1], 1, 1};
    alg = algorithm::pooling_avg_exclude_padding;
  } else {
    const int64_t k = options_.kernel, s = options_.stride, p = options_.padding;
    const int64_t oh = (in[2] + 2 * p - k) / s + 1, ow = (in[3] + 2 * p - k) / s + 1;
    if (oh < 1 || ow < 1) throw std::invalid_argument("Pool2d " + name_ + ": input too small");
    kernel = {k, k};
    strides = {s, s};
    pad_l = {p, p};
    // Right padding that yields exactly the floor-mode size (may trim the last rows).
    pad_r = {(oh - 1) * s + k - in[2] - p, (ow - 1) * s + k - in[3] - p};
    out = {in[0], in[1], oh, ow};
    if (options_.kind == PoolKind::kAvg) alg = algorithm::pooling_avg_include_padding;
  }
  const auto& eng = cpu_engine();
  const memory::desc nhwc_out(out, memory::data_type::f32, memory::format_tag::acdb);
  const std::optional<ActivationLayout> src_layout = activation_layout(src_md);
  direct_.reset();
  argmax_.clear();
  diff_src_.reset();
  diff_pre_relu_.reset();
  direct_diff_src_ = memory();
  if (options_.kind == PoolKind::kMax && options_.kernel == options_.stride &&
      options_.padding == 0 && options_.kernel <= kMaxDirectPoolKernel && src_layout)
    return configure_direct(src_md, *src_layout, out, training);

  const prop_kind prop = training ? prop_kind::forward_training : prop_kind::forward_inference;
  const dnnl::pooling_forward::primitive_desc fwd_pd(
      {prop, alg, src_md, options_.channels_last ? nhwc_out : any_md(out), strides, kernel, pad_l,
       pad_r},
      eng);
  fwd_ = dnnl::pooling_forward(fwd_pd);
  const memory::desc dst_md = fwd_pd.dst_desc();
  dst_ = memory(dst_md, eng);
  workspace_ = memory();
  if (training && alg == algorithm::pooling_max) workspace_ = memory(fwd_pd.workspace_desc(), eng);
  if (options_.fuse_relu) {
    // In place on the pooled output; backward takes ReLU' from that output.
    const dnnl::eltwise_forward::primitive_desc relu_pd(
        {prop, algorithm::eltwise_relu_use_dst_for_bwd, dst_md, 0.f, 0.f}, eng);
    relu_fwd_ = dnnl::eltwise_forward(relu_pd);
    if (training && needs_input_grad_) {
      relu_bwd_ = dnnl::eltwise_backward(dnnl::eltwise_backward::primitive_desc(
          {algorithm::eltwise_relu_use_dst_for_bwd, dst_md, dst_md, 0.f, 0.f}, eng, relu_pd));
      diff_pre_relu_.configure(dst_md);
    }
  }
  if (training && needs_input_grad_) {
    const dnnl::pooling_backward::primitive_desc bwd_pd(
        {alg, src_md, fwd_pd.dst_desc(), strides, kernel, pad_l, pad_r}, eng, fwd_pd);
    bwd_ = dnnl::pooling_backward(bwd_pd);
    diff_src_.configure(bwd_pd.diff_src_desc());
  }
  return fwd_pd.dst_desc();
}

namespace {
// A new buffer of `md`, zeroed: the direct kernels never write padded channels or unpooled
// rows/columns, which must read as 0.
memory zeroed_memory(const memory::desc& md) {
  memory m(md, cpu_engine());
  std::memset(m.get_data_handle(), 0, md.get_size());
  return m;
}
}  // namespace

memory::desc Pool2dCpu::configure_direct(const memory::desc& src_md,
                                      const ActivationLayout& src_layout, const Dims& out,
                                      bool training) {
  const memory::desc dst_md(out, memory::data_type::f32,
                            options_.channels_last ? memory::format_tag::acdb : src_layout.tag);
  direct_.emplace(DirectMaxPoolShape{out[0], out[1], out[2], out[3], options_.kernel}, src_layout,
                  *activation_layout(dst_md));
  dst_ = zeroed_memory(dst_md);
  argmax_.assign(training ? static_cast<std::size_t>(out[0] * out[1] * out[2] * out[3]) : 0, 0);
  workspace_ = memory();
  if (training && needs_input_grad_) direct_diff_src_ = zeroed_memory(src_md);
  return dst_md;
}

const memory& Pool2dCpu::forward_md(const memory& src) {
  if (direct_) {
    direct_->forward(options_.fuse_relu, static_cast<const float*>(src.get_data_handle()),
                     static_cast<float*>(dst_.get_data_handle()),
                     training_ ? argmax_.data() : nullptr);
    return dst_;
  }
  std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst_}};
  if (workspace_) args[DNNL_ARG_WORKSPACE] = workspace_;
  fwd_.execute(stream(), args);
  if (options_.fuse_relu)
    relu_fwd_.execute(stream(), {{DNNL_ARG_SRC, dst_}, {DNNL_ARG_DST, dst_}});
  return dst_;
}

const memory& Pool2dCpu::backward_md(const memory& diff_dst) {
  if (!training_) throw std::logic_error("Pool2d " + name_ + ": backward after inference forward");
  if (!needs_input_grad_) return empty_;
  if (direct_) {
    direct_->backward(static_cast<const float*>(diff_dst.get_data_handle()), argmax_.data(),
                      static_cast<float*>(direct_diff_src_.get_data_handle()));
    return direct_diff_src_;
  }
  const memory* g = &diff_dst;
  if (options_.fuse_relu) {
    relu_bwd_.execute(stream(), {{DNNL_ARG_DST, dst_},
                                 {DNNL_ARG_DIFF_DST, diff_dst},
                                 {DNNL_ARG_DIFF_SRC, diff_pre_relu_.get()}});
    g = &diff_pre_relu_.get();
  }
  // oneDNN's pooling backward clears diff_src before scattering: a shared buffer is fine.
  std::unordered_map<int, memory> args = {{DNNL_ARG_DIFF_DST, *g},
                                          {DNNL_ARG_DIFF_SRC, diff_src_.get()}};
  if (workspace_) args[DNNL_ARG_WORKSPACE] = workspace_;
  bwd_.execute(stream(), args);
  return diff_src_.get();
}

GradientPlan::Buffer* Pool2dCpu::plan_backward_md(GradientPlan& plan,
                                                  GradientPlan::Buffer* /*diff_dst*/) {
  if (!needs_input_grad_ || direct_) return nullptr;  // direct: its own buffer
  if (options_.fuse_relu) diff_pre_relu_.write(plan);
  return diff_src_.write(plan);
}

}  // namespace sdp::nn
