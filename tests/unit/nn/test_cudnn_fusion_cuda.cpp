// cuDNN's runtime fusion of what a BatchNorm folded into the convolutions would run (#34's
// remaining gap: BatchNorm is half of ResNet-50's 16-bit step, and only NVIDIA's
// "NormConvolution" pattern removes its passes over memory), one operation graph of the cuDNN
// frontend for each pass of a convolution:
//   forward:          y = conv(relu(x * scale + bias), w);  sum_k = sum(y[..., k]);  sq_k = sum(y[..., k]^2)
//                     (the previous BatchNorm applied as the convolution loads its input, the
//                     next one's statistics from its output)
//   input gradient:   dx = conv_dgrad(dy, w), through the previous BatchNorm's ReLU, with that
//                     BatchNorm's weight gradients (dbn_weight)
//   filter gradient:  dw = conv_wgrad(dy, relu(x * scale + bias))
// on NHWC f16 (cuDNN 9.19 on an H100 built no forward graph with f32 scale and bias: they are
// in the io type, as NVIDIA's samples have them). A probe before the layer is written: does
// cuDNN build these graphs on this GPU, does each pass compute what the separate operations
// compute (against f32 host references; for the input gradient also the BatchNorm input
// gradient that dbn_weight's coefficients give), does each give the same bits twice when built
// from deterministic engines only (what train.deterministic, the default, needs), and what each
// pass costs at ResNet-50's shapes against the same convolution unfused (printed, for
// scripts/gpu-session.sh's log; no speed is claimed here). Skipped without a GPU, and in a build
// without the frontend's headers (scripts/install-deps.sh installs them).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <iostream>
#include <vector>

#include "core/device_info.hpp"
#include "core/device_memory.hpp"
#include "core/half_float.hpp"
#include "device_compare.hpp"
#include "grad_check.hpp"

#if defined(SDP_HAVE_CUDNN_FRONTEND)
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <set>
#include <unordered_map>

// Without the frontend's JSON (serialisation, unused here); cuDNN's graph library and NVRTC
// (which the frontend's code generation would use) loaded at run time, so test_nn needs no
// NVRTC at link time, nor on a machine that never builds the graph.
#define CUDNN_FRONTEND_SKIP_JSON_LIB
#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING
#include <dlfcn.h>

#include <cudnn_frontend.h>

// The frontend looks cuDNN's functions up in this handle: the process's own symbols, since
// test_nn links cuDNN (sdp_nn does).
namespace cudnn_frontend {
void* cudnn_dlhandle = RTLD_DEFAULT;
}
#endif

namespace sdp::nn {
namespace {

#if defined(SDP_HAVE_CUDNN_FRONTEND)
namespace fe = cudnn_frontend;

struct Shape4 {
  int64_t n, c, h, w, k, r;  // input NCHW sizes, filters, square kernel (stride 1, same padding)
};

using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

// One operation graph, the bytes and type of each tensor it reads or writes, which it writes,
// and why it was not built.
struct ProbeGraph {
  std::shared_ptr<fe::graph::Graph> graph = std::make_shared<fe::graph::Graph>();
  std::unordered_map<std::string, TensorPtr> tensors;
  std::unordered_map<std::string, std::size_t> bytes;
  std::unordered_map<std::string, fe::DataType_t> types;
  std::set<std::string> outputs;
  std::string error;  // empty: built
  // Under the deterministic rule (train.deterministic, the default: bitwise resume and identical
  // replicas) only engines without cuDNN's NONDETERMINISTIC note are candidates.
  bool deterministic = false;

  static std::size_t element_bytes(fe::DataType_t type) { return type == fe::DataType_t::HALF ? 2 : 4; }

  // An NHWC tensor of [n, c, h, w] (c innermost), in the graph's io type unless `type` says.
  TensorPtr input(const std::string& name, std::vector<int64_t> nchw, fe::DataType_t type = fe::DataType_t::HALF) {
    auto t = graph->tensor(fe::graph::Tensor_attributes().set_name(name).set_dim(nchw).set_stride(nhwc_strides(nchw)));
    if (type != fe::DataType_t::HALF) t->set_data_type(type);
    return record(name, t, nchw, type);
  }
  TensorPtr output(const std::string& name, TensorPtr t, std::vector<int64_t> nchw,
                   fe::DataType_t type = fe::DataType_t::HALF) {
    t->set_output(true).set_dim(nchw).set_stride(nhwc_strides(nchw));
    if (type != fe::DataType_t::HALF) t->set_data_type(type);
    outputs.insert(name);
    return record(name, t, nchw, type);
  }

  static std::vector<int64_t> nhwc_strides(const std::vector<int64_t>& d) {
    return {d[1] * d[2] * d[3], 1, d[1] * d[3], d[1]};
  }
  TensorPtr record(const std::string& name, TensorPtr t, const std::vector<int64_t>& d, fe::DataType_t type) {
    tensors[name] = t;
    types[name] = type;
    bytes[name] = static_cast<std::size_t>(d[0] * d[1] * d[2] * d[3]) * element_bytes(type);
    return t;
  }

  // Each stage only once the one before succeeded; the first failure is the reason.
  void build(cudnnHandle_t handle) {
    const auto failed = [&](const char* what, fe::error_t status) {
      if (status.is_good()) return false;
      error = std::string(what) + ": " + status.get_message();
      return true;
    };
    if (failed("validate", graph->validate()) ||
        failed("build_operation_graph", graph->build_operation_graph(handle)) ||
        failed("create_execution_plans", graph->create_execution_plans({fe::HeurMode_t::A})))
      return;
    if (deterministic) graph->deselect_numeric_notes({fe::NumericalNote_t::NONDETERMINISTIC});
    (void)(failed("check_support", graph->check_support(handle)) || failed("build_plans", graph->build_plans(handle)));
  }
};

ProbeGraph start_graph(fe::DataType_t intermediate = fe::DataType_t::FLOAT, bool deterministic = false) {
  ProbeGraph g;
  g.deterministic = deterministic;
  g.graph->set_io_data_type(fe::DataType_t::HALF)
      .set_intermediate_data_type(intermediate)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

fe::graph::Pointwise_attributes pointwise(fe::PointwiseMode_t mode) {
  return fe::graph::Pointwise_attributes().set_mode(mode);
}

// relu(x * scale + bias): the previous BatchNorm's output, applied as the convolution loads
// its input (scale and bias in the io type, as cuDNN's runtime fusion engines take them).
TensorPtr scale_bias_relu(ProbeGraph& g, TensorPtr x, int64_t channels) {
  auto scale = g.input("scale", {1, channels, 1, 1});
  auto bias = g.input("bias", {1, channels, 1, 1});
  auto scaled = g.graph->pointwise(x, scale, pointwise(fe::PointwiseMode_t::MUL));
  auto biased = g.graph->pointwise(scaled, bias, pointwise(fe::PointwiseMode_t::ADD));
  return g.graph->pointwise(biased, pointwise(fe::PointwiseMode_t::RELU_FWD));
}

template <typename Attributes>
Attributes conv_attributes(const Shape4& s) {
  const int64_t pad = s.r / 2;
  return Attributes().set_padding({pad, pad}).set_stride({1, 1}).set_dilation({1, 1});
}

// The forward of a convolution whose input is a BatchNorm's output, fused or not:
//   fused:  y = conv(relu(x * scale + bias), w);  sum_k = sum(y[..., k]);  sq_k = sum(y[..., k]^2)
//   plain:  y = conv(x, w)
ProbeGraph build_forward(cudnnHandle_t handle, const Shape4& s, bool fused, bool deterministic = false) {
  ProbeGraph g = start_graph(fe::DataType_t::FLOAT, deterministic);
  TensorPtr x = g.input("x", {s.n, s.c, s.h, s.w});
  TensorPtr in = fused ? scale_bias_relu(g, x, s.c) : x;
  TensorPtr w = g.input("w", {s.k, s.c, s.r, s.r});
  TensorPtr y = g.output("y", g.graph->conv_fprop(in, w, conv_attributes<fe::graph::Conv_fprop_attributes>(s)),
                         {s.n, s.k, s.h, s.w});
  if (fused) {
    auto [sum, sq_sum] = g.graph->genstats(y, fe::graph::Genstats_attributes());
    g.output("sum", sum, {1, s.k, 1, 1}, fe::DataType_t::FLOAT);
    g.output("sq_sum", sq_sum, {1, s.k, 1, 1}, fe::DataType_t::FLOAT);
  }
  g.build(handle);
  return g;
}

// The input gradient through the convolution, fused or not with what the BatchNorm before it
// needs: the ReLU's derivative (its input recomputed from x, the mean, the inverse deviation,
// scale and bias) and the BatchNorm's weight gradients and the coefficients of its input
// gradient (cuDNN's dbn_weight).
ProbeGraph build_input_gradient(cudnnHandle_t handle, const Shape4& s, bool fused, bool deterministic = false) {
  ProbeGraph g = start_graph(fe::DataType_t::FLOAT, deterministic);
  TensorPtr dy = g.input("dy", {s.n, s.k, s.h, s.w});
  TensorPtr w = g.input("w", {s.k, s.c, s.r, s.r});
  TensorPtr dx = g.graph->conv_dgrad(dy, w, conv_attributes<fe::graph::Conv_dgrad_attributes>(s));
  if (!fused) {
    g.output("dx", dx, {s.n, s.c, s.h, s.w});
  } else {
    dx->set_dim({s.n, s.c, s.h, s.w});
    const auto f32 = fe::DataType_t::FLOAT;
    TensorPtr x = g.input("x", {s.n, s.c, s.h, s.w});
    TensorPtr mean = g.input("mean", {1, s.c, 1, 1}, f32), inv_std = g.input("inv_std", {1, s.c, 1, 1}, f32);
    TensorPtr scale = g.input("scale", {1, s.c, 1, 1}, f32), bias = g.input("bias", {1, s.c, 1, 1}, f32);
    auto centred = g.graph->pointwise(x, mean, pointwise(fe::PointwiseMode_t::SUB));
    auto normalised = g.graph->pointwise(centred, inv_std, pointwise(fe::PointwiseMode_t::MUL));
    auto scaled = g.graph->pointwise(normalised, scale, pointwise(fe::PointwiseMode_t::MUL));
    auto bn_out = g.graph->pointwise(scaled, bias, pointwise(fe::PointwiseMode_t::ADD));
    TensorPtr drelu = g.output("drelu", g.graph->pointwise(dx, bn_out, pointwise(fe::PointwiseMode_t::RELU_BWD)),
                               {s.n, s.c, s.h, s.w});
    auto [dscale, dbias, eq_scale_dy, eq_scale_x, eq_bias] =
        g.graph->dbn_weight(drelu, x, mean, inv_std, scale, fe::graph::DBN_weight_attributes());
    g.output("dscale", dscale, {1, s.c, 1, 1}, f32);
    g.output("dbias", dbias, {1, s.c, 1, 1}, f32);
    g.output("eq_scale_dy", eq_scale_dy, {1, s.c, 1, 1}, f32);
    g.output("eq_scale_x", eq_scale_x, {1, s.c, 1, 1}, f32);
    g.output("eq_bias", eq_bias, {1, s.c, 1, 1}, f32);
  }
  g.build(handle);
  return g;
}

// The filter gradient, its input the BatchNorm's output recomputed as it loads (fused) or read
// as stored (plain).
ProbeGraph build_filter_gradient(cudnnHandle_t handle, const Shape4& s, bool fused, bool deterministic = false) {
  ProbeGraph g = start_graph(fused ? fe::DataType_t::HALF : fe::DataType_t::FLOAT, deterministic);
  TensorPtr x = g.input("x", {s.n, s.c, s.h, s.w});
  TensorPtr in = fused ? scale_bias_relu(g, x, s.c) : x;
  TensorPtr dy = g.input("dy", {s.n, s.k, s.h, s.w});
  g.output("dw", g.graph->conv_wgrad(dy, in, conv_attributes<fe::graph::Conv_wgrad_attributes>(s)),
           {s.k, s.c, s.r, s.r});
  g.build(handle);
  return g;
}

// The graph's tensors and workspace on the GPU (zero-filled: allocate), and the map execute
// takes.
struct GraphRun {
  std::vector<std::shared_ptr<void>> buffers;
  std::unordered_map<std::string, void*> by_name;
  std::unordered_map<TensorPtr, void*> pack;
  std::shared_ptr<void> workspace;
  std::string error;  // empty: ready
};

GraphRun prepare_run(const ProbeGraph& g) {
  GraphRun run;
  int64_t bytes = 0;
  fe::error_t status = g.graph->get_workspace_size(bytes);
  if (!status.is_good()) {
    run.error = "get_workspace_size: " + status.get_message();
    return run;
  }
  const Device gpu = Device::cuda(0);
  for (const auto& [name, tensor] : g.tensors) {
    run.buffers.push_back(allocate(gpu, g.bytes.at(name)));
    run.by_name[name] = run.pack[tensor] = run.buffers.back().get();
  }
  run.workspace = allocate(gpu, static_cast<std::size_t>(std::max<int64_t>(bytes, 1)));
  return run;
}

std::vector<uint16_t> to_half(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) h[i] = float_to_half(v[i]);
  return h;
}

// Runs the graph once and waits for it: "" or what failed.
std::string execute_and_wait(cudnnHandle_t handle, const ProbeGraph& g, GraphRun& run) {
  fe::error_t status = g.graph->execute(handle, run.pack, run.workspace.get());
  if (!status.is_good()) return "execute: " + status.get_message();
  const cudaError_t error = cudaDeviceSynchronize();
  return error == cudaSuccess ? "" : std::string("cudaDeviceSynchronize: ") + cudaGetErrorString(error);
}

// A graph tensor's values to and from the GPU: half (uint16_t bits) or f32.
template <typename T>
void upload(GraphRun& run, const std::string& name, const std::vector<T>& values) {
  copy_bytes(Device::cuda(0), run.by_name.at(name), Device::cpu(), values.data(), values.size() * sizeof(T));
}
template <typename T>
std::vector<T> download(const ProbeGraph& g, const GraphRun& run, const std::string& name) {
  std::vector<T> values(g.bytes.at(name) / sizeof(T));
  copy_bytes(Device::cpu(), values.data(), Device::cuda(0), run.by_name.at(name), g.bytes.at(name));
  return values;
}

// The host's input gradient of a square convolution (stride 1, same padding), NHWC:
// dx[b, y, x, c] = sum over k and the window of dy[b, y - ry + pad, x - rx + pad, k] * w[k, ry, rx, c].
std::vector<double> host_dgrad(const Shape4& s, const std::vector<uint16_t>& dy, const std::vector<uint16_t>& w) {
  std::vector<double> dx(s.n * s.h * s.w * s.c, 0.0);
  const int64_t pad = s.r / 2;
  for (int64_t b = 0; b < s.n; ++b)
    for (int64_t oy = 0; oy < s.h; ++oy)
      for (int64_t ox = 0; ox < s.w; ++ox)
        for (int64_t k = 0; k < s.k; ++k) {
          const double g = half_to_float(dy[((b * s.h + oy) * s.w + ox) * s.k + k]);
          for (int64_t ry = 0; ry < s.r; ++ry)
            for (int64_t rx = 0; rx < s.r; ++rx) {
              const int64_t iy = oy + ry - pad, ix = ox + rx - pad;
              if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
              for (int64_t c = 0; c < s.c; ++c)
                dx[((b * s.h + iy) * s.w + ix) * s.c + c] += g * half_to_float(w[((k * s.r + ry) * s.r + rx) * s.c + c]);
            }
        }
  return dx;
}

// The graph's result on the host against the separate operations in f32 from the same
// (half-rounded) input and weights.
TEST(CudnnFusionOnGpu, ScaleBiasReluConvGenstatsMatchesTheSeparateOperations) {
  SKIP_WITHOUT_GPU();
  const Shape4 s{2, 16, 8, 8, 32, 3};
  cudnnHandle_t handle = nullptr;
  ASSERT_EQ(cudnnCreate(&handle), CUDNN_STATUS_SUCCESS);
  const ProbeGraph g = build_forward(handle, s, /*fused=*/true);
  if (!g.error.empty()) {
    cudnnDestroy(handle);
    GTEST_SKIP() << "cuDNN " << cudnnGetVersion() << " builds no fused scale-bias-ReLU-convolution-statistics graph "
                 << "here (" << g.error << "): the fused BatchNorm layer would need its own kernels";
  }
  const int64_t in_n = s.n * s.h * s.w * s.c, w_n = s.k * s.r * s.r * s.c, out_n = s.n * s.h * s.w * s.k;
  const std::vector<uint16_t> x_h = to_half(testing::random_vector(in_n, 1));
  const std::vector<uint16_t> w_h = to_half(testing::random_vector(w_n, 2, -0.2f, 0.2f));
  const std::vector<uint16_t> scale_h = to_half(testing::random_vector(s.c, 3, 0.5f, 1.5f));
  const std::vector<uint16_t> bias_h = to_half(testing::random_vector(s.c, 4, -0.5f, 0.5f));
  GraphRun run = prepare_run(g);
  ASSERT_TRUE(run.error.empty()) << run.error;
  upload(run, "x", x_h);
  upload(run, "w", w_h);
  upload(run, "scale", scale_h);
  upload(run, "bias", bias_h);
  ASSERT_EQ(execute_and_wait(handle, g, run), "");
  const std::vector<uint16_t> y_h = download<uint16_t>(g, run, "y");
  const std::vector<float> sum_h = download<float>(g, run, "sum"), sq_h = download<float>(g, run, "sq_sum");
  cudnnDestroy(handle);

  // The host's separate operations, NHWC, in f32 (double sums).
  std::vector<float> a(in_n);
  for (int64_t i = 0; i < in_n; ++i)
    a[i] = std::max(0.0f, half_to_float(x_h[i]) * half_to_float(scale_h[i % s.c]) + half_to_float(bias_h[i % s.c]));
  std::vector<double> want_sum(s.k, 0.0), want_sq(s.k, 0.0);
  double worst = 0, largest = 0;
  const int64_t pad = s.r / 2;
  for (int64_t b = 0; b < s.n; ++b)
    for (int64_t oy = 0; oy < s.h; ++oy)
      for (int64_t ox = 0; ox < s.w; ++ox)
        for (int64_t k = 0; k < s.k; ++k) {
          double acc = 0;
          for (int64_t dy = 0; dy < s.r; ++dy)
            for (int64_t dx = 0; dx < s.r; ++dx) {
              const int64_t iy = oy + dy - pad, ix = ox + dx - pad;
              if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
              for (int64_t c = 0; c < s.c; ++c)
                acc += static_cast<double>(a[((b * s.h + iy) * s.w + ix) * s.c + c]) *
                       half_to_float(w_h[((k * s.r + dy) * s.r + dx) * s.c + c]);
            }
          want_sum[k] += acc;
          want_sq[k] += acc * acc;
          const float got = half_to_float(y_h[((b * s.h + oy) * s.w + ox) * s.k + k]);
          worst = std::max(worst, std::fabs(got - acc));
          largest = std::max(largest, std::fabs(acc));
        }
  EXPECT_LT(worst, 1e-2 * largest) << "the convolution of the scaled, shifted and ReLU'd input";
  for (int64_t k = 0; k < s.k; ++k) {
    EXPECT_NEAR(sum_h[k], want_sum[k], 1e-2 * (std::fabs(want_sum[k]) + std::sqrt(want_sq[k]))) << "sum " << k;
    EXPECT_NEAR(sq_h[k], want_sq[k], 1e-2 * want_sq[k]) << "sum of squares " << k;
  }
}

// The input gradient's pass against the separate operations: the convolution's input gradient
// through the ReLU of the BatchNorm before it (its output recomputed from x, the mean, the inverse
// deviation, scale and bias), that BatchNorm's weight gradients (dscale = sum of drelu * xhat,
// dbias = sum of drelu), and its input gradient from the coefficients dbn_weight gives:
// eq_scale_dy * drelu + eq_scale_x * x + eq_bias = scale * inv_std * (drelu - dbias / M - xhat * dscale / M),
// M = n h w (what the folded layer's one pointwise pass after it would compute).
TEST(CudnnFusionOnGpu, InputGradientThroughReluWithDbnWeightMatchesTheSeparateOperations) {
  SKIP_WITHOUT_GPU();
  const Shape4 s{2, 16, 8, 8, 32, 3};
  cudnnHandle_t handle = nullptr;
  ASSERT_EQ(cudnnCreate(&handle), CUDNN_STATUS_SUCCESS);
  const ProbeGraph g = build_input_gradient(handle, s, /*fused=*/true);
  if (!g.error.empty()) {
    cudnnDestroy(handle);
    GTEST_SKIP() << "cuDNN " << cudnnGetVersion() << " builds no fused dgrad-dReLU-dbn_weight graph here (" << g.error
                 << ")";
  }
  const int64_t in_n = s.n * s.h * s.w * s.c, w_n = s.k * s.r * s.r * s.c, out_n = s.n * s.h * s.w * s.k;
  const std::vector<uint16_t> dy = to_half(testing::random_vector(out_n, 11));
  const std::vector<uint16_t> w = to_half(testing::random_vector(w_n, 12, -0.2f, 0.2f));
  const std::vector<uint16_t> x = to_half(testing::random_vector(in_n, 13));
  const std::vector<float> mean = testing::random_vector(s.c, 14, -0.2f, 0.2f);
  const std::vector<float> inv_std = testing::random_vector(s.c, 15, 0.8f, 1.2f);
  const std::vector<float> scale = testing::random_vector(s.c, 16, 0.5f, 1.5f);
  const std::vector<float> bias = testing::random_vector(s.c, 17, -0.5f, 0.5f);
  GraphRun run = prepare_run(g);
  ASSERT_TRUE(run.error.empty()) << run.error;
  upload(run, "dy", dy);
  upload(run, "w", w);
  upload(run, "x", x);
  upload(run, "mean", mean);
  upload(run, "inv_std", inv_std);
  upload(run, "scale", scale);
  upload(run, "bias", bias);
  ASSERT_EQ(execute_and_wait(handle, g, run), "");
  const std::vector<uint16_t> drelu = download<uint16_t>(g, run, "drelu");
  const std::vector<float> dscale = download<float>(g, run, "dscale"), dbias = download<float>(g, run, "dbias");
  const std::vector<float> eq_dy = download<float>(g, run, "eq_scale_dy"), eq_x = download<float>(g, run, "eq_scale_x"),
                           eq_bias = download<float>(g, run, "eq_bias");
  cudnnDestroy(handle);

  // The ReLU's derivative gates the convolution's input gradient.
  const std::vector<double> dx = host_dgrad(s, dy, w);
  std::vector<float> xhat(in_n);
  double worst = 0, largest = 0;
  for (int64_t i = 0; i < in_n; ++i) {
    const int64_t c = i % s.c;
    xhat[i] = (half_to_float(x[i]) - mean[c]) * inv_std[c];
    const double want = xhat[i] * scale[c] + bias[c] > 0 ? dx[i] : 0.0;
    worst = std::max(worst, std::fabs(half_to_float(drelu[i]) - want));
    largest = std::max(largest, std::fabs(want));
  }
  EXPECT_LT(worst, 1e-2 * largest) << "drelu: the input gradient through the recomputed ReLU";
  // The BatchNorm's weight gradients, from the pass's own drelu.
  const double m = static_cast<double>(s.n * s.h * s.w);
  std::vector<double> want_dscale(s.c, 0.0), want_dbias(s.c, 0.0), magnitude(s.c, 0.0);
  for (int64_t i = 0; i < in_n; ++i) {
    const double d = half_to_float(drelu[i]);
    want_dscale[i % s.c] += d * xhat[i];
    want_dbias[i % s.c] += d;
    magnitude[i % s.c] += std::fabs(d);
  }
  for (int64_t c = 0; c < s.c; ++c) {
    EXPECT_NEAR(dscale[c], want_dscale[c], 1e-2 * magnitude[c] + 1e-6) << "dscale, channel " << c;
    EXPECT_NEAR(dbias[c], want_dbias[c], 1e-2 * magnitude[c] + 1e-6) << "dbias, channel " << c;
  }
  // The BatchNorm's input gradient from the three coefficients.
  worst = largest = 0;
  int64_t worst_at = 0;
  for (int64_t i = 0; i < in_n; ++i) {
    const int64_t c = i % s.c;
    const double d = half_to_float(drelu[i]);
    const double want = scale[c] * inv_std[c] * (d - want_dbias[c] / m - xhat[i] * want_dscale[c] / m);
    const double got = eq_dy[c] * d + eq_x[c] * half_to_float(x[i]) + eq_bias[c];
    if (std::fabs(got - want) > worst) worst = std::fabs(got - want), worst_at = i;
    largest = std::max(largest, std::fabs(want));
  }
  const int64_t c = worst_at % s.c;
  EXPECT_LT(worst, 1e-2 * largest) << "eq_scale_dy * drelu + eq_scale_x * x + eq_bias against BatchNorm's input gradient; "
                                   << "worst at element " << worst_at << " (channel " << c << "): eq_scale_dy "
                                   << eq_dy[c] << " (scale * inv_std " << scale[c] * inv_std[c] << "), eq_scale_x "
                                   << eq_x[c] << ", eq_bias " << eq_bias[c];
}

// The filter gradient's pass against the separate operations: its input, relu(x * scale + bias),
// recomputed as it loads (in the io type, as the forward's), never stored.
TEST(CudnnFusionOnGpu, FilterGradientOnTheRecomputedInputMatchesTheSeparateOperations) {
  SKIP_WITHOUT_GPU();
  const Shape4 s{2, 16, 8, 8, 32, 3};
  cudnnHandle_t handle = nullptr;
  ASSERT_EQ(cudnnCreate(&handle), CUDNN_STATUS_SUCCESS);
  const ProbeGraph g = build_filter_gradient(handle, s, /*fused=*/true);
  if (!g.error.empty()) {
    cudnnDestroy(handle);
    GTEST_SKIP() << "cuDNN " << cudnnGetVersion() << " builds no fused scale-bias-ReLU-wgrad graph here (" << g.error
                 << ")";
  }
  const int64_t in_n = s.n * s.h * s.w * s.c, out_n = s.n * s.h * s.w * s.k;
  const std::vector<uint16_t> x = to_half(testing::random_vector(in_n, 21));
  const std::vector<uint16_t> dy = to_half(testing::random_vector(out_n, 22));
  const std::vector<uint16_t> scale = to_half(testing::random_vector(s.c, 23, 0.5f, 1.5f));
  const std::vector<uint16_t> bias = to_half(testing::random_vector(s.c, 24, -0.5f, 0.5f));
  GraphRun run = prepare_run(g);
  ASSERT_TRUE(run.error.empty()) << run.error;
  upload(run, "x", x);
  upload(run, "dy", dy);
  upload(run, "scale", scale);
  upload(run, "bias", bias);
  ASSERT_EQ(execute_and_wait(handle, g, run), "");
  const std::vector<uint16_t> dw = download<uint16_t>(g, run, "dw");
  cudnnDestroy(handle);

  // The input as the pass recomputes it, rounded to the io type (the graph's intermediate type).
  std::vector<float> a(in_n);
  for (int64_t i = 0; i < in_n; ++i)
    a[i] = half_to_float(float_to_half(
        std::max(0.0f, half_to_float(x[i]) * half_to_float(scale[i % s.c]) + half_to_float(bias[i % s.c]))));
  const int64_t pad = s.r / 2;
  double worst = 0, largest = 0;
  for (int64_t k = 0; k < s.k; ++k)
    for (int64_t ry = 0; ry < s.r; ++ry)
      for (int64_t rx = 0; rx < s.r; ++rx)
        for (int64_t c = 0; c < s.c; ++c) {
          double want = 0;
          for (int64_t b = 0; b < s.n; ++b)
            for (int64_t oy = 0; oy < s.h; ++oy)
              for (int64_t ox = 0; ox < s.w; ++ox) {
                const int64_t iy = oy + ry - pad, ix = ox + rx - pad;
                if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
                want += static_cast<double>(half_to_float(dy[((b * s.h + oy) * s.w + ox) * s.k + k])) *
                        a[((b * s.h + iy) * s.w + ix) * s.c + c];
              }
          worst = std::max(worst, std::fabs(half_to_float(dw[((k * s.r + ry) * s.r + rx) * s.c + c]) - want));
          largest = std::max(largest, std::fabs(want));
        }
  EXPECT_LT(worst, 1e-2 * largest) << "dw: the filter gradient on the recomputed relu(x * scale + bias)";
}

// Folding can be the default only under the deterministic rule (train.deterministic: the same bits
// every run, for bitwise resume and identical replicas). Each folded pass, at a layer2 shape of
// ResNet-50 (batch 32), built from engines without cuDNN's NONDETERMINISTIC note, runs twice on the
// same inputs and must write the same bits; with any engine the same is printed, not required
// (train.deterministic: false).
TEST(CudnnFusionOnGpu, FoldedPassesFromDeterministicEnginesAreBitwiseRepeatable) {
  SKIP_WITHOUT_GPU();
  const Shape4 s{32, 128, 28, 28, 128, 3};
  cudnnHandle_t handle = nullptr;
  ASSERT_EQ(cudnnCreate(&handle), CUDNN_STATUS_SUCCESS);
  using Builder = ProbeGraph (*)(cudnnHandle_t, const Shape4&, bool, bool);
  const std::pair<const char*, Builder> passes[] = {
      {"forward", build_forward}, {"input gradient", build_input_gradient}, {"filter gradient", build_filter_gradient}};
  for (const auto& [pass, build] : passes)
    for (const bool deterministic : {true, false}) {
      const std::string what = std::string(pass) + (deterministic ? ", deterministic engines" : ", any engine");
      const ProbeGraph g = build(handle, s, /*fused=*/true, deterministic);
      if (!g.error.empty()) {
        ADD_FAILURE() << what << ": not built (" << g.error << ")"
                      << (deterministic ? ": folding could not run under train.deterministic" : "");
        continue;
      }
      GraphRun run = prepare_run(g);
      ASSERT_TRUE(run.error.empty()) << what << ": " << run.error;
      uint64_t seed = 31;
      for (const auto& [name, type] : g.types) {
        if (g.outputs.count(name) != 0) continue;
        const int64_t n = static_cast<int64_t>(g.bytes.at(name) / ProbeGraph::element_bytes(type));
        // Positive per-channel figures (an inverse deviation must be), signed activations.
        const bool per_channel = n == s.c || n == s.k;
        const std::vector<float> v = testing::random_vector(n, seed++, per_channel ? 0.5f : -1.0f, 1.5f);
        if (type == fe::DataType_t::HALF)
          upload(run, name, to_half(v));
        else
          upload(run, name, v);
      }
      std::vector<std::vector<std::vector<uint8_t>>> results;
      for (int repeat = 0; repeat < 2; ++repeat) {
        ASSERT_EQ(execute_and_wait(handle, g, run), "") << what;
        results.emplace_back();
        for (const std::string& name : g.outputs) results.back().push_back(download<uint8_t>(g, run, name));
      }
      const bool same = results[0] == results[1];
      std::cout << "graph " << what << ": " << (same ? "the same bits twice" : "different bits") << "\n";
      if (deterministic) EXPECT_TRUE(same) << what << ": two runs on the same inputs wrote different bits";
    }
  cudnnDestroy(handle);
}

// ResNet-50's bottleneck 3x3 (layer1: 256 x 64 x 56 x 56, 64 filters) and 1x1 shapes at
// batch 256: whether cuDNN builds each pass of a convolution with its BatchNorm folded in
// (forward, input gradient, filter gradient) and the same pass without, and the median of 20
// runs of each (printed: what the folding costs each convolution, against the BatchNorm
// passes it removes).
TEST(CudnnFusionOnGpu, BuildsForResNet50Shapes) {
  SKIP_WITHOUT_GPU();
  cudnnHandle_t handle = nullptr;
  ASSERT_EQ(cudnnCreate(&handle), CUDNN_STATUS_SUCCESS);
  using Builder = ProbeGraph (*)(cudnnHandle_t, const Shape4&, bool, bool);
  const std::pair<const char*, Builder> passes[] = {
      {"forward", build_forward}, {"input gradient", build_input_gradient}, {"filter gradient", build_filter_gradient}};
  for (const Shape4& s : {Shape4{256, 64, 56, 56, 64, 3}, Shape4{256, 64, 56, 56, 256, 1},
                          Shape4{256, 256, 56, 56, 64, 1}, Shape4{256, 128, 28, 28, 128, 3}}) {
    const std::string shape = "n" + std::to_string(s.n) + " c" + std::to_string(s.c) + " " + std::to_string(s.h) +
                              "x" + std::to_string(s.w) + " k" + std::to_string(s.k) + " " + std::to_string(s.r) +
                              "x" + std::to_string(s.r);
    for (const auto& [pass, build] : passes)
      for (const bool fused : {false, true}) {
        const std::string what = shape + " " + pass + (fused ? " fused" : " plain");
        const ProbeGraph g = build(handle, s, fused, false);
        if (fused)  // what the deterministic rule would leave the folded layer
          std::cout << "graph " << what << ", deterministic engines only: "
                    << (build(handle, s, fused, true).error.empty() ? "built" : "not built") << "\n";
        if (!g.error.empty()) {
          std::cout << "graph " << what << ": not built (" << g.error << ")\n";
          continue;
        }
        GraphRun run = prepare_run(g);
        ASSERT_TRUE(run.error.empty()) << what << ": " << run.error;
        std::vector<double> ms;
        for (int i = 0; i < 23; ++i) {
          const auto start = std::chrono::steady_clock::now();
          ASSERT_EQ(execute_and_wait(handle, g, run), "") << what;
          if (i >= 3)
            ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
        }
        std::sort(ms.begin(), ms.end());
        std::cout << "graph " << what << ": built, median " << ms[ms.size() / 2] << " ms a run\n";
      }
  }
  cudnnDestroy(handle);
}

#else

TEST(CudnnFusionOnGpu, NeedsTheFrontendHeaders) {
  GTEST_SKIP() << "built without the cuDNN frontend's headers (pip install nvidia-cudnn-frontend, or "
                  "scripts/install-deps.sh, then configure again)";
}

#endif

}  // namespace
}  // namespace sdp::nn
