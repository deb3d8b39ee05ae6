// FusedConvGraph (cudnn_fusion_cuda.hpp) on the cuDNN frontend's graph API.
#include "nn/cudnn_fusion_cuda.hpp"

#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "nn/cuda_util_cuda.hpp"
#include "nn/cudnn_cuda.hpp"

#if defined(SDP_HAVE_CUDNN_FRONTEND)
// Without the frontend's JSON (serialisation, unused here); cuDNN's graph library and NVRTC (which
// the frontend's code generation would use) loaded at run time, so the runner needs no NVRTC at
// link time, nor on a machine that never builds a graph.
#define CUDNN_FRONTEND_SKIP_JSON_LIB
#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING
#include <dlfcn.h>

#include <cudnn_frontend.h>

// The frontend looks cuDNN's functions up in this handle: the process's own symbols (sdp_nn links
// cuDNN).
namespace cudnn_frontend {
void* cudnn_dlhandle = RTLD_DEFAULT;
}
#endif

namespace sdp::nn::cuda {

bool FusedConvShape::operator<(const FusedConvShape& o) const {
  return std::tie(n, c, h, w, k, r, stride, padding, dtype) <
         std::tie(o.n, o.c, o.h, o.w, o.k, o.r, o.stride, o.padding, o.dtype);
}

bool FusedConvOptions::operator<(const FusedConvOptions& o) const {
  return std::tie(input_batchnorm, statistics, add_to_input_grad, deterministic) <
         std::tie(o.input_batchnorm, o.statistics, o.add_to_input_grad, o.deterministic);
}

#if defined(SDP_HAVE_CUDNN_FRONTEND)

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

struct FusedConvGraph::Impl {
  fe::graph::Graph graph;
  std::unordered_map<std::string, TensorPtr> by_name;
};

namespace {

fe::DataType_t frontend_type(DType dtype) {
  switch (dtype) {
    case DType::kF16: return fe::DataType_t::HALF;
    case DType::kBF16: return fe::DataType_t::BFLOAT16;
    case DType::kF32: break;
  }
  return fe::DataType_t::FLOAT;
}

std::vector<int64_t> nhwc_strides(const std::vector<int64_t>& d) { return {d[1] * d[2] * d[3], 1, d[1] * d[3], d[1]}; }

fe::graph::Pointwise_attributes pointwise(fe::PointwiseMode_t mode) {
  return fe::graph::Pointwise_attributes().set_mode(mode);
}

// Declares the graph's tensors as it is built: their NHWC dims and strides, type and bytes.
class Builder {
 public:
  Builder(FusedConvGraph::Impl& impl, std::map<std::string, FusedConvGraph::TensorInfo>& tensors, DType io)
      : impl_(impl), tensors_(tensors), io_(io) {}

  TensorPtr input(const std::string& name, const std::vector<int64_t>& nchw, DType dtype) {
    auto t = impl_.graph.tensor(fe::graph::Tensor_attributes().set_name(name).set_dim(nchw).set_stride(
        nhwc_strides(nchw)));
    t->set_data_type(frontend_type(dtype));
    return record(name, t, nchw, dtype, false);
  }
  // One bit an element (cuDNN's BOOLEAN), NHWC order: a ReLU's mask.
  TensorPtr bit_mask_input(const std::string& name, const std::vector<int64_t>& nchw) {
    auto t = impl_.graph.tensor(fe::graph::Tensor_attributes().set_name(name).set_dim(nchw).set_stride(
        nhwc_strides(nchw)));
    t->set_data_type(fe::DataType_t::BOOLEAN);
    impl_.by_name[name] = t;
    FusedConvGraph::TensorInfo info;
    info.bytes = static_cast<std::size_t>((nchw[0] * nchw[1] * nchw[2] * nchw[3] + 7) / 8);
    info.bit_mask = true;
    tensors_[name] = info;
    return t;
  }
  TensorPtr output(const std::string& name, const TensorPtr& t, const std::vector<int64_t>& nchw, DType dtype) {
    t->set_output(true).set_dim(nchw).set_stride(nhwc_strides(nchw)).set_data_type(frontend_type(dtype));
    return record(name, t, nchw, dtype, true);
  }
  DType io() const { return io_; }
  fe::graph::Graph& graph() { return impl_.graph; }

 private:
  TensorPtr record(const std::string& name, const TensorPtr& t, const std::vector<int64_t>& d, DType dtype,
                   bool output) {
    impl_.by_name[name] = t;
    tensors_[name] = {static_cast<std::size_t>(d[0] * d[1] * d[2] * d[3]) * dtype_size(dtype), dtype, output};
    return t;
  }

  FusedConvGraph::Impl& impl_;
  std::map<std::string, FusedConvGraph::TensorInfo>& tensors_;
  DType io_;
};

// relu(x * scale + bias), scale and bias per channel in the io type.
TensorPtr scale_bias_relu(Builder& b, const TensorPtr& x, int64_t channels) {
  auto scale = b.input("scale", {1, channels, 1, 1}, b.io());
  auto bias = b.input("bias", {1, channels, 1, 1}, b.io());
  auto scaled = b.graph().pointwise(x, scale, pointwise(fe::PointwiseMode_t::MUL));
  auto biased = b.graph().pointwise(scaled, bias, pointwise(fe::PointwiseMode_t::ADD));
  return b.graph().pointwise(biased, pointwise(fe::PointwiseMode_t::RELU_FWD));
}

template <typename Attributes>
Attributes conv_attributes(const FusedConvShape& s) {
  return Attributes()
      .set_padding({s.padding, s.padding})
      .set_stride({s.stride, s.stride})
      .set_dilation({1, 1});
}

void build_forward(Builder& b, const FusedConvShape& s, const FusedConvOptions& o) {
  TensorPtr x = b.input("x", {s.n, s.c, s.h, s.w}, s.dtype);
  TensorPtr in = o.input_batchnorm ? scale_bias_relu(b, x, s.c) : x;
  TensorPtr w = b.input("w", {s.k, s.c, s.r, s.r}, s.dtype);
  const std::vector<int64_t> out{s.n, s.k, s.out_h(), s.out_w()};
  TensorPtr y = b.output("y", b.graph().conv_fprop(in, w, conv_attributes<fe::graph::Conv_fprop_attributes>(s)), out,
                         s.dtype);
  if (o.statistics) {
    auto [sum, sq_sum] = b.graph().genstats(y, fe::graph::Genstats_attributes());
    b.output("sum", sum, {1, s.k, 1, 1}, DType::kF32);
    b.output("sq_sum", sq_sum, {1, s.k, 1, 1}, DType::kF32);
  }
}

void build_input_gradient(Builder& b, const FusedConvShape& s, const FusedConvOptions& o) {
  TensorPtr dy = b.input("dy", {s.n, s.k, s.out_h(), s.out_w()}, s.dtype);
  TensorPtr w = b.input("w", {s.k, s.c, s.r, s.r}, s.dtype);
  TensorPtr dx = b.graph().conv_dgrad(dy, w, conv_attributes<fe::graph::Conv_dgrad_attributes>(s));
  const std::vector<int64_t> in{s.n, s.c, s.h, s.w}, channels{1, s.c, 1, 1};
  if (o.add_to_input_grad) {  // the residual block's sum of its input gradients, in the epilogue
    dx->set_dim(in);
    TensorPtr dsum = b.input("dsum", in, s.dtype);
    b.output("dx", b.graph().pointwise(dx, dsum, pointwise(fe::PointwiseMode_t::ADD)), in, s.dtype);
    return;
  }
  if (!o.input_batchnorm) {
    b.output("dx", dx, in, s.dtype);
    return;
  }
  dx->set_dim(in);
  const DType f32 = DType::kF32;
  TensorPtr x = b.input("x", in, s.dtype);
  TensorPtr mean = b.input("mean", channels, f32), inv_std = b.input("inv_std", channels, f32);
  TensorPtr scale = b.input("scale", channels, f32), bias = b.input("bias", channels, f32);
  fe::graph::Graph& g = b.graph();
  auto centred = g.pointwise(x, mean, pointwise(fe::PointwiseMode_t::SUB));
  auto normalised = g.pointwise(centred, inv_std, pointwise(fe::PointwiseMode_t::MUL));
  auto scaled = g.pointwise(normalised, scale, pointwise(fe::PointwiseMode_t::MUL));
  auto bn_out = g.pointwise(scaled, bias, pointwise(fe::PointwiseMode_t::ADD));
  TensorPtr drelu = b.output("drelu", g.pointwise(dx, bn_out, pointwise(fe::PointwiseMode_t::RELU_BWD)), in, s.dtype);
  auto [dscale, dbias, eq_scale_dy, eq_scale_x, eq_bias] =
      g.dbn_weight(drelu, x, mean, inv_std, scale, fe::graph::DBN_weight_attributes());
  b.output("dscale", dscale, channels, f32);
  b.output("dbias", dbias, channels, f32);
  b.output("eq_scale_dy", eq_scale_dy, channels, f32);
  b.output("eq_scale_x", eq_scale_x, channels, f32);
  b.output("eq_bias", eq_bias, channels, f32);
}

void build_filter_gradient(Builder& b, const FusedConvShape& s, const FusedConvOptions& o) {
  TensorPtr x = b.input("x", {s.n, s.c, s.h, s.w}, s.dtype);
  TensorPtr in = o.input_batchnorm ? scale_bias_relu(b, x, s.c) : x;
  TensorPtr dy = b.input("dy", {s.n, s.k, s.out_h(), s.out_w()}, s.dtype);
  b.output("dw", b.graph().conv_wgrad(dy, in, conv_attributes<fe::graph::Conv_wgrad_attributes>(s)),
           {s.k, s.c, s.r, s.r}, s.dtype);
}

// The backward of a folded BatchNorm with the block's sum (the header's last two passes): with
// the mask, the residual branch's last, whose gradient through the ReLU's mask is the sum's
// (written: z's gradient); without, a projection shortcut's, given that gradient. The batchnorm
// backward node takes it with the saved statistics the forward's finalize kept.
void build_batchnorm_backward(Builder& b, const FusedConvShape& s, bool through_mask) {
  const std::vector<int64_t> act{s.n, s.c, s.h, s.w}, channels{1, s.c, 1, 1};
  const DType f32 = DType::kF32;
  fe::graph::Graph& g = b.graph();
  TensorPtr dy = b.input("dy", act, s.dtype);
  TensorPtr dz = dy;
  if (through_mask) {
    TensorPtr mask = b.bit_mask_input("mask", act);
    dz = b.output("dz", g.pointwise(dy, mask, pointwise(fe::PointwiseMode_t::MUL)), act, s.dtype);
  }
  TensorPtr x = b.input("x", act, s.dtype);
  TensorPtr scale = b.input("scale", channels, f32);
  TensorPtr mean = b.input("mean", channels, f32), inv_std = b.input("inv_std", channels, f32);
  auto [dx, dscale, dbias] = g.batchnorm_backward(
      dz, x, scale, fe::graph::Batchnorm_backward_attributes().set_saved_mean_and_inv_variance(mean, inv_std));
  b.output("dx", dx, act, s.dtype);
  b.output("dscale", dscale, channels, f32);
  b.output("dbias", dbias, channels, f32);
}

}  // namespace

namespace {

// The pass's operations and tensors, as FusedConvGraph's header describes them; "" or why not.
std::string define_graph(FusedConvGraph::Impl& impl, std::map<std::string, FusedConvGraph::TensorInfo>& tensors,
                         FusedPass pass, const FusedConvShape& shape, const FusedConvOptions& options) {
  if (shape.dtype == DType::kF32) return "the folded passes are built for f16 and bf16 only";
  if (options.add_to_input_grad && (pass != FusedPass::kInputGradient || options.input_batchnorm))
    return "the sum is added to a plain input gradient only";
  // The recomputed input of a folded filter gradient stays in the io type (what the forward
  // convolved); elsewhere intermediates are f32.
  const bool io_intermediate = pass == FusedPass::kFilterGradient && options.input_batchnorm;
  impl.graph.set_io_data_type(frontend_type(shape.dtype))
      .set_intermediate_data_type(io_intermediate ? frontend_type(shape.dtype) : fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  Builder builder(impl, tensors, shape.dtype);
  switch (pass) {
    case FusedPass::kForward: build_forward(builder, shape, options); break;
    case FusedPass::kInputGradient: build_input_gradient(builder, shape, options); break;
    case FusedPass::kFilterGradient: build_filter_gradient(builder, shape, options); break;
    case FusedPass::kResidualBatchNormBackward: build_batchnorm_backward(builder, shape, true); break;
    case FusedPass::kBatchNormBackward: build_batchnorm_backward(builder, shape, false); break;
  }
  fe::error_t status = impl.graph.validate();
  return status.is_good() ? "" : "validate: " + status.get_message();
}

}  // namespace

std::string FusedConvGraph::validation_error(FusedPass pass, const FusedConvShape& shape,
                                             const FusedConvOptions& options) {
  Impl impl;
  std::map<std::string, TensorInfo> tensors;
  try {
    return define_graph(impl, tensors, pass, shape, options);
  } catch (const std::exception& e) {
    return std::string("the cuDNN frontend threw: ") + e.what();
  }
}

FusedConvGraph::FusedConvGraph(cudnnHandle_t handle, FusedPass pass, const FusedConvShape& shape,
                               const FusedConvOptions& options)
    : impl_(std::make_unique<Impl>()) {
  // What the frontend throws (a library it loads at run time missing, say) is a refusal too:
  // the layer then runs the pass unfolded and says why.
  try {
    build(handle, pass, shape, options);
  } catch (const std::exception& e) {
    error_ = std::string("the cuDNN frontend threw: ") + e.what();
  }
}

void FusedConvGraph::build(cudnnHandle_t handle, FusedPass pass, const FusedConvShape& shape,
                           const FusedConvOptions& options) {
  error_ = define_graph(*impl_, tensors_, pass, shape, options);
  if (!error_.empty()) return;
  // Each stage only once the one before succeeded; the first failure is the reason.
  fe::graph::Graph& g = impl_->graph;
  const auto failed = [&](const char* stage, fe::error_t status) {
    if (status.is_good()) return false;
    error_ = std::string(stage) + ": " + status.get_message();
    return true;
  };
  if (failed("build_operation_graph", g.build_operation_graph(handle)) ||
      failed("create_execution_plans", g.create_execution_plans({fe::HeurMode_t::A})))
    return;
  if (options.deterministic) g.deselect_numeric_notes({fe::NumericalNote_t::NONDETERMINISTIC});
  if (failed("check_support", g.check_support(handle)) || failed("build_plans", g.build_plans(handle))) return;
  int64_t bytes = 0;
  if (failed("get_workspace_size", g.get_workspace_size(bytes))) return;
  workspace_bytes_ = static_cast<std::size_t>(bytes);
}

void FusedConvGraph::execute(cudnnHandle_t handle, const std::unordered_map<std::string, void*>& by_name,
                             void* workspace, const std::string& what) const {
  if (!built()) throw RuntimeError(what + ": the fused convolution graph was not built (" + error_ + ")");
  std::unordered_map<TensorPtr, void*> pack;
  for (const auto& [name, tensor] : impl_->by_name) {
    const auto at = by_name.find(name);
    if (at == by_name.end()) throw RuntimeError(what + ": no address for the fused graph's tensor '" + name + "'");
    pack[tensor] = at->second;
  }
  fe::error_t status;
  try {
    status = impl_->graph.execute(handle, pack, workspace);
  } catch (const std::exception& e) {
    throw RuntimeError(what + ": the cuDNN frontend threw: " + e.what());
  }
  if (!status.is_good()) throw RuntimeError(what + ": cuDNN's fused convolution graph: " + status.get_message());
}

bool fused_conv_graphs_compiled() { return true; }

#else

struct FusedConvGraph::Impl {};

namespace {
const char* const kNoFrontend =
    "built without the cuDNN frontend's headers (pip install nvidia-cudnn-frontend, or scripts/install-deps.sh, then "
    "configure again)";
}  // namespace

FusedConvGraph::FusedConvGraph(cudnnHandle_t, FusedPass, const FusedConvShape&, const FusedConvOptions&)
    : error_(kNoFrontend) {}

void FusedConvGraph::execute(cudnnHandle_t, const std::unordered_map<std::string, void*>&, void*,
                             const std::string& what) const {
  throw RuntimeError(what + ": " + error_);
}

std::string FusedConvGraph::validation_error(FusedPass, const FusedConvShape&, const FusedConvOptions&) {
  return kNoFrontend;
}

bool fused_conv_graphs_compiled() { return false; }

#endif

FusedConvGraph::~FusedConvGraph() = default;

std::shared_ptr<const FusedConvGraph> fused_conv_graph(Context& ctx, FusedPass pass, const FusedConvShape& shape,
                                                       const FusedConvOptions& options) {
  using Key = std::tuple<FusedPass, FusedConvShape, FusedConvOptions>;
  using Graphs = std::map<Key, std::shared_ptr<const FusedConvGraph>>;
  cudnnHandle_t handle = cudnn_handle(ctx);
  std::shared_ptr<void>& slot = stream_attachment(ctx, "cudnn_fused_conv_graphs");
  if (!slot) slot = std::make_shared<Graphs>();
  std::shared_ptr<const FusedConvGraph>& graph = (*static_cast<Graphs*>(slot.get()))[Key{pass, shape, options}];
  if (!graph) graph = std::make_shared<const FusedConvGraph>(handle, pass, shape, options);
  return graph;
}

}  // namespace sdp::nn::cuda
