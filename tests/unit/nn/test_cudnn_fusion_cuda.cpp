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
// in the io type, as NVIDIA's samples have them). The graphs are the library's own
// (nn/cudnn_fusion_cuda.hpp, what model.batchnorm: folded runs): does cuDNN build them on this
// GPU, does each pass compute what the separate operations compute (against f32 host references;
// for the input gradient also the BatchNorm input gradient that dbn_weight's coefficients give),
// does each give the same bits twice when built from deterministic engines only (what
// train.deterministic, the default, needs), and what each pass costs at ResNet-50's shapes
// against the same convolution unfused (printed, for scripts/gpu-session.sh's log; no speed is
// claimed here). Skipped without a GPU, and where the build has no frontend headers (the graphs'
// error says to run scripts/install-deps.sh).
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

#if defined(SDP_HAVE_CUDNN)
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <unordered_map>

#include "nn/cudnn_fusion_cuda.hpp"
#endif

namespace sdp::nn {
namespace {

#if defined(SDP_HAVE_CUDNN)
using cuda::FusedConvGraph;
using cuda::FusedConvOptions;
using cuda::FusedConvShape;
using cuda::FusedPass;

// A square convolution of stride 1 and same padding in f16: input sizes, filters, kernel.
FusedConvShape shape_of(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r) {
  FusedConvShape s;
  s.n = n, s.c = c, s.h = h, s.w = w, s.k = k, s.r = r;
  s.stride = 1;
  s.padding = r / 2;
  s.dtype = DType::kF16;
  return s;
}

// The same with stride 2 (the first 3x3 of ResNet-50's layers 2 to 4).
FusedConvShape strided(FusedConvShape s) {
  s.stride = 2;
  return s;
}

std::unique_ptr<FusedConvGraph> build(cudnnHandle_t handle, FusedPass pass, const FusedConvShape& s, bool fused,
                                      bool deterministic = false) {
  FusedConvOptions o;
  o.input_batchnorm = fused;
  o.statistics = fused && pass == FusedPass::kForward;
  o.deterministic = deterministic;
  return std::make_unique<FusedConvGraph>(handle, pass, s, o);
}

// The graph's tensors and workspace on the GPU (zero-filled: allocate).
struct GraphRun {
  std::vector<std::shared_ptr<void>> buffers;
  std::unordered_map<std::string, void*> by_name;
  std::shared_ptr<void> workspace;
};

GraphRun prepare_run(const FusedConvGraph& g) {
  GraphRun run;
  const Device gpu = Device::cuda(0);
  for (const auto& [name, tensor] : g.tensors()) {
    run.buffers.push_back(allocate(gpu, tensor.bytes));
    run.by_name[name] = run.buffers.back().get();
  }
  run.workspace = allocate(gpu, std::max<std::size_t>(g.workspace_bytes(), 1));
  return run;
}

std::vector<uint16_t> to_half(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) h[i] = float_to_half(v[i]);
  return h;
}

// Runs the graph once and waits for it: "" or what failed.
std::string execute_and_wait(cudnnHandle_t handle, const FusedConvGraph& g, GraphRun& run) {
  try {
    g.execute(handle, run.by_name, run.workspace.get(), "probe");
  } catch (const std::exception& e) {
    return e.what();
  }
  const cudaError_t error = cudaDeviceSynchronize();
  return error == cudaSuccess ? "" : std::string("cudaDeviceSynchronize: ") + cudaGetErrorString(error);
}

// A graph tensor's values to and from the GPU: half (uint16_t bits) or f32.
template <typename T>
void upload(GraphRun& run, const std::string& name, const std::vector<T>& values) {
  copy_bytes(Device::cuda(0), run.by_name.at(name), Device::cpu(), values.data(), values.size() * sizeof(T));
}
template <typename T>
std::vector<T> download(const FusedConvGraph& g, const GraphRun& run, const std::string& name) {
  const std::size_t bytes = g.tensors().at(name).bytes;
  std::vector<T> values(bytes / sizeof(T));
  copy_bytes(Device::cpu(), values.data(), Device::cuda(0), run.by_name.at(name), bytes);
  return values;
}

// The GPU tests: a cuDNN handle each, destroyed however the test ends (a skip, a failed
// assertion), and a folded pass's graph, or the test skipped where cuDNN builds none.
class CudnnFusionOnGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    ASSERT_EQ(cudnnCreate(&handle), CUDNN_STATUS_SUCCESS);
  }
  void TearDown() override {
    if (handle != nullptr) cudnnDestroy(handle);
  }
  // `graph`: the folded `pass` of `shape`; null, the test skipped, when cuDNN builds no `what` here.
  void folded_or_skip(FusedPass pass, const FusedConvShape& shape, const char* what,
                      std::unique_ptr<FusedConvGraph>& graph) {
    graph = build(handle, pass, shape, /*fused=*/true);
    if (graph->built()) return;
    const std::string error = graph->error();
    graph.reset();
    GTEST_SKIP() << "cuDNN " << cudnnGetVersion() << " builds no fused " << what << " graph here (" << error << ")";
  }
  cudnnHandle_t handle = nullptr;
};

// The host's input gradient of a square convolution (stride 1, same padding), NHWC:
// dx[b, y, x, c] = sum over k and the window of dy[b, y - ry + pad, x - rx + pad, k] * w[k, ry, rx, c].
std::vector<double> host_dgrad(const FusedConvShape& s, const std::vector<uint16_t>& dy, const std::vector<uint16_t>& w) {
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

// What a CPU can check of the folded passes: the frontend defines and validates every pass
// model.batchnorm: folded asks of ResNet-50's bottlenecks at batch 256 (conv1 with the next
// BatchNorm's statistics; conv2, of stride 1 or 2, applying the BatchNorm before it and summing
// the next one's; conv3 applying its input's; both gradients of the last two) and of ResNet-20's
// basic blocks, in f16 and bf16: every node's attributes are set and its inputs are what it
// takes (the frontend's checks before a handle is needed); f32 is refused. With them, the
// backward of each branch's last BatchNorm folded with its block's sum (bn3 of a bottleneck, bn2
// of a basic block), through the ReLU's bit mask, and of a projection shortcut's BatchNorm
// folded into it; and the input gradient with the residual block's other term added
// (model.grad_sum: fused) of each convolution that folds no BatchNorm before it.
TEST(CudnnFusion, EveryFoldedPassOfTheResNetsValidatesWithoutAGpu) {
  struct Conv {
    int64_t c, h, k, r, stride;
    bool input_batchnorm, statistics;
  };
  std::vector<Conv> convs;
  const int64_t planes[] = {64, 128, 256, 512}, blocks[] = {3, 4, 6, 3};
  int64_t in = 64, size = 56;
  for (int layer = 0; layer < 4; ++layer)
    for (int64_t b = 0; b < blocks[layer]; ++b) {
      const int64_t p = planes[layer], stride = layer > 0 && b == 0 ? 2 : 1;
      // The projection shortcut's 1x1 convolution sums its BatchNorm's statistics (folded).
      if (b == 0) convs.push_back({in, size, 4 * p, 1, stride, false, true});
      convs.push_back({in, size, p, 1, 1, false, true});
      convs.push_back({p, size, p, 3, stride, true, true});
      size /= stride;
      convs.push_back({p, size, 4 * p, 1, 1, true, false});
      in = 4 * p;
    }
  for (const int64_t width : {16, 32, 64})  // ResNet-20's basic blocks: conv1 then conv2 on bn1
    for (const int64_t stride : {1, 2}) {
      convs.push_back({width / stride, 32, width, 3, stride, false, true});
      convs.push_back({width, 32 / stride, width, 3, 1, true, false});
    }
  int checked = 0;
  for (const DType dtype : {DType::kF16, DType::kBF16})
    for (const Conv& c : convs) {
      FusedConvShape s = shape_of(256, c.c, c.h, c.h, c.k, c.r);
      s.stride = c.stride;
      s.dtype = dtype;
      FusedConvOptions o;
      o.input_batchnorm = c.input_batchnorm;
      o.statistics = c.statistics;
      const std::string what = std::string(dtype_name(dtype)) + " c" + std::to_string(c.c) + " " +
                               std::to_string(c.h) + "x" + std::to_string(c.h) + " k" + std::to_string(c.k) + " " +
                               std::to_string(c.r) + "x" + std::to_string(c.r) + " stride " + std::to_string(c.stride);
      EXPECT_EQ(FusedConvGraph::validation_error(FusedPass::kForward, s, o), "") << what << " forward";
      ++checked;
      if (c.input_batchnorm && !c.statistics) {  // a branch's last: folded sums its BatchNorm's statistics too
        FusedConvOptions with_statistics = o;
        with_statistics.statistics = true;
        EXPECT_EQ(FusedConvGraph::validation_error(FusedPass::kForward, s, with_statistics), "")
            << what << " forward with the statistics of the BatchNorm with the sum";
        ++checked;
      }
      if (!c.input_batchnorm) {  // model.grad_sum: fused: its input gradient plus the block's other term
        FusedConvOptions sum;
        sum.add_to_input_grad = true;
        EXPECT_EQ(FusedConvGraph::validation_error(FusedPass::kInputGradient, s, sum), "")
            << what << " input gradient with the block's sum";
        ++checked;
        continue;
      }
      o.statistics = false;
      EXPECT_EQ(FusedConvGraph::validation_error(FusedPass::kInputGradient, s, o), "") << what << " input gradient";
      EXPECT_EQ(FusedConvGraph::validation_error(FusedPass::kFilterGradient, s, o), "") << what << " filter gradient";
      checked += 2;
    }
  EXPECT_EQ(checked, 2 * (16 * (2 + 3 + 4) + 4 * 2 + 6 * (2 + 4)));
  FusedConvOptions sum_through_batchnorm;
  sum_through_batchnorm.add_to_input_grad = sum_through_batchnorm.input_batchnorm = true;
  EXPECT_NE(FusedConvGraph::validation_error(FusedPass::kInputGradient, shape_of(8, 16, 8, 8, 16, 3),
                                             sum_through_batchnorm)
                .find("a plain input gradient only"),
            std::string::npos);
  struct Activations {
    int64_t c, h;
  };
  std::vector<Activations> residual_batchnorms;  // the sum's shape: the block's output
  size = 56;
  for (int layer = 0; layer < 4; ++layer) {
    size = layer == 0 ? 56 : size / 2;
    for (int64_t b = 0; b < blocks[layer]; ++b) residual_batchnorms.push_back({4 * planes[layer], size});
  }
  for (const int64_t width : {16, 32, 64}) residual_batchnorms.push_back({width, 32 * 16 / width});
  int residual_checked = 0;
  for (const DType dtype : {DType::kF16, DType::kBF16})
    for (const Activations& a : residual_batchnorms) {
      FusedConvShape s = shape_of(256, a.c, a.h, a.h, a.c, 1);
      s.dtype = dtype;
      EXPECT_EQ(FusedConvGraph::validation_error(FusedPass::kResidualBatchNormBackward, s, {}), "")
          << dtype_name(dtype) << " residual BatchNorm backward, c" << a.c << " " << a.h << "x" << a.h;
      // A projection shortcut's BatchNorm, folded into that one, has the same shape.
      EXPECT_EQ(FusedConvGraph::validation_error(FusedPass::kBatchNormBackward, s, {}), "")
          << dtype_name(dtype) << " shortcut BatchNorm backward, c" << a.c << " " << a.h << "x" << a.h;
      residual_checked += 2;
    }
  EXPECT_EQ(residual_checked, 2 * 2 * (16 + 3));
  FusedConvShape f32 = shape_of(8, 16, 8, 8, 16, 3);
  f32.dtype = DType::kF32;
  EXPECT_NE(FusedConvGraph::validation_error(FusedPass::kForward, f32, {}).find("f16 and bf16 only"), std::string::npos);
}

// The graph's result on the host against the separate operations in f32 from the same
// (half-rounded) input and weights.
TEST_F(CudnnFusionOnGpu, ScaleBiasReluConvGenstatsMatchesTheSeparateOperations) {
  const FusedConvShape s = shape_of(2, 16, 8, 8, 32, 3);
  std::unique_ptr<FusedConvGraph> graph;
  folded_or_skip(FusedPass::kForward, s, "scale-bias-ReLU-convolution-statistics", graph);
  if (!graph) return;
  const FusedConvGraph& g = *graph;
  const int64_t in_n = s.n * s.h * s.w * s.c, w_n = s.k * s.r * s.r * s.c, out_n = s.n * s.h * s.w * s.k;
  const std::vector<uint16_t> x_h = to_half(testing::random_vector(in_n, 1));
  const std::vector<uint16_t> w_h = to_half(testing::random_vector(w_n, 2, -0.2f, 0.2f));
  const std::vector<uint16_t> scale_h = to_half(testing::random_vector(s.c, 3, 0.5f, 1.5f));
  const std::vector<uint16_t> bias_h = to_half(testing::random_vector(s.c, 4, -0.5f, 0.5f));
  GraphRun run = prepare_run(g);
  upload(run, "x", x_h);
  upload(run, "w", w_h);
  upload(run, "scale", scale_h);
  upload(run, "bias", bias_h);
  ASSERT_EQ(execute_and_wait(handle, g, run), "");
  const std::vector<uint16_t> y_h = download<uint16_t>(g, run, "y");
  const std::vector<float> sum_h = download<float>(g, run, "sum"), sq_h = download<float>(g, run, "sq_sum");

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
TEST_F(CudnnFusionOnGpu, InputGradientThroughReluWithDbnWeightMatchesTheSeparateOperations) {
  const FusedConvShape s = shape_of(2, 16, 8, 8, 32, 3);
  std::unique_ptr<FusedConvGraph> graph;
  folded_or_skip(FusedPass::kInputGradient, s, "dgrad-dReLU-dbn_weight", graph);
  if (!graph) return;
  const FusedConvGraph& g = *graph;
  const int64_t in_n = s.n * s.h * s.w * s.c, w_n = s.k * s.r * s.r * s.c, out_n = s.n * s.h * s.w * s.k;
  const std::vector<uint16_t> dy = to_half(testing::random_vector(out_n, 11));
  const std::vector<uint16_t> w = to_half(testing::random_vector(w_n, 12, -0.2f, 0.2f));
  const std::vector<uint16_t> x = to_half(testing::random_vector(in_n, 13));
  const std::vector<float> mean = testing::random_vector(s.c, 14, -0.2f, 0.2f);
  const std::vector<float> inv_std = testing::random_vector(s.c, 15, 0.8f, 1.2f);
  const std::vector<float> scale = testing::random_vector(s.c, 16, 0.5f, 1.5f);
  const std::vector<float> bias = testing::random_vector(s.c, 17, -0.5f, 0.5f);
  GraphRun run = prepare_run(g);
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

// model.grad_sum: fused: the input gradient pass with the residual block's other term added in its
// epilogue against the host's input gradient plus that term.
TEST_F(CudnnFusionOnGpu, InputGradientPlusTheBlocksSumMatchesTheSeparateOperations) {
  const FusedConvShape s = shape_of(2, 16, 8, 8, 32, 3);
  FusedConvOptions o;
  o.add_to_input_grad = true;
  const auto graph = std::make_unique<FusedConvGraph>(handle, FusedPass::kInputGradient, s, o);
  if (!graph->built()) GTEST_SKIP() << "cuDNN builds no input gradient with the sum here (" << graph->error() << ")";
  const FusedConvGraph& g = *graph;
  const int64_t in_n = s.n * s.h * s.w * s.c, w_n = s.k * s.r * s.r * s.c, out_n = s.n * s.h * s.w * s.k;
  const std::vector<uint16_t> dy = to_half(testing::random_vector(out_n, 51));
  const std::vector<uint16_t> w = to_half(testing::random_vector(w_n, 52, -0.2f, 0.2f));
  const std::vector<uint16_t> dsum = to_half(testing::random_vector(in_n, 53));
  GraphRun run = prepare_run(g);
  upload(run, "dy", dy);
  upload(run, "w", w);
  upload(run, "dsum", dsum);
  ASSERT_EQ(execute_and_wait(handle, g, run), "");
  const std::vector<uint16_t> dx = download<uint16_t>(g, run, "dx");
  const std::vector<double> want = host_dgrad(s, dy, w);
  double worst = 0, largest = 0;
  for (int64_t i = 0; i < in_n; ++i) {
    const double expected = want[i] + half_to_float(dsum[i]);
    worst = std::max(worst, std::fabs(half_to_float(dx[i]) - expected));
    largest = std::max(largest, std::fabs(expected));
  }
  EXPECT_LT(worst, 1e-2 * largest) << "dx: the input gradient plus the block's other term";
}

// The filter gradient's pass against the separate operations: its input, relu(x * scale + bias),
// recomputed as it loads (in the io type, as the forward's), never stored.
TEST_F(CudnnFusionOnGpu, FilterGradientOnTheRecomputedInputMatchesTheSeparateOperations) {
  const FusedConvShape s = shape_of(2, 16, 8, 8, 32, 3);
  std::unique_ptr<FusedConvGraph> graph;
  folded_or_skip(FusedPass::kFilterGradient, s, "scale-bias-ReLU-wgrad", graph);
  if (!graph) return;
  const FusedConvGraph& g = *graph;
  const int64_t in_n = s.n * s.h * s.w * s.c, out_n = s.n * s.h * s.w * s.k;
  const std::vector<uint16_t> x = to_half(testing::random_vector(in_n, 21));
  const std::vector<uint16_t> dy = to_half(testing::random_vector(out_n, 22));
  const std::vector<uint16_t> scale = to_half(testing::random_vector(s.c, 23, 0.5f, 1.5f));
  const std::vector<uint16_t> bias = to_half(testing::random_vector(s.c, 24, -0.5f, 0.5f));
  GraphRun run = prepare_run(g);
  upload(run, "x", x);
  upload(run, "dy", dy);
  upload(run, "scale", scale);
  upload(run, "bias", bias);
  ASSERT_EQ(execute_and_wait(handle, g, run), "");
  const std::vector<uint16_t> dw = download<uint16_t>(g, run, "dw");

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

// The backward of a branch's last BatchNorm folded with the block's sum against the separate
// operations: dz = dy where the mask's bit is set, else 0, exactly (element j at bit j % 8 of
// byte j / 8, the order batchnorm_fold_cuda's forward kernel writes: a wrong order fails here), and
// the batchnorm backward of dz with the given mean and inverse deviation: dscale = sum(dz * xhat),
// dbias = sum(dz), dx = scale * inv_std * (dz - dbias / M - xhat * dscale / M).
TEST_F(CudnnFusionOnGpu, ResidualBatchNormBackwardThroughTheMaskMatchesTheSeparateOperations) {
  const FusedConvShape s = shape_of(2, 16, 8, 8, 16, 1);
  std::unique_ptr<FusedConvGraph> graph;
  folded_or_skip(FusedPass::kResidualBatchNormBackward, s, "batchnorm backward through the ReLU's mask", graph);
  if (!graph) return;
  const FusedConvGraph& g = *graph;
  const int64_t numel = s.n * s.h * s.w * s.c;
  ASSERT_TRUE(g.tensors().at("mask").bit_mask);
  ASSERT_EQ(g.tensors().at("mask").bytes, static_cast<std::size_t>(numel / 8));
  const std::vector<uint16_t> dy = to_half(testing::random_vector(numel, 41));
  const std::vector<uint16_t> x = to_half(testing::random_vector(numel, 42));
  std::vector<uint8_t> mask(numel / 8);
  for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
  const std::vector<float> scale = testing::random_vector(s.c, 43, 0.5f, 1.5f);
  const std::vector<float> mean = testing::random_vector(s.c, 44, -0.2f, 0.2f);
  const std::vector<float> inv_std = testing::random_vector(s.c, 45, 0.8f, 1.2f);
  GraphRun run = prepare_run(g);
  upload(run, "dy", dy);
  upload(run, "x", x);
  upload(run, "mask", mask);
  upload(run, "scale", scale);
  upload(run, "mean", mean);
  upload(run, "inv_std", inv_std);
  ASSERT_EQ(execute_and_wait(handle, g, run), "");
  const std::vector<uint16_t> dz = download<uint16_t>(g, run, "dz"), dx = download<uint16_t>(g, run, "dx");
  const std::vector<float> dscale = download<float>(g, run, "dscale"), dbias = download<float>(g, run, "dbias");
  int64_t wrong = 0, first_wrong = -1;
  std::vector<double> want_dscale(s.c, 0.0), want_dbias(s.c, 0.0), magnitude(s.c, 0.0), xhat(numel);
  for (int64_t i = 0; i < numel; ++i) {
    const bool set = (mask[i / 8] >> (i % 8)) & 1;
    const uint16_t want = set ? dy[i] : float_to_half(0.0f);
    if (dz[i] != want && !(half_to_float(dz[i]) == 0.0f && half_to_float(want) == 0.0f)) {
      if (first_wrong < 0) first_wrong = i;
      ++wrong;
    }
    const int64_t c = i % s.c;
    xhat[i] = (half_to_float(x[i]) - mean[c]) * inv_std[c];
    const double d = set ? half_to_float(dy[i]) : 0.0;
    want_dscale[c] += d * xhat[i];
    want_dbias[c] += d;
    magnitude[c] += std::fabs(d);
  }
  EXPECT_EQ(wrong, 0) << "dz differs from dy * mask at " << wrong << " elements, the first " << first_wrong
                      << ": cuDNN reads the mask's bits in another order than bit j % 8 of byte j / 8";
  for (int64_t c = 0; c < s.c; ++c) {
    EXPECT_NEAR(dscale[c], want_dscale[c], 1e-2 * magnitude[c] + 1e-6) << "dscale, channel " << c;
    EXPECT_NEAR(dbias[c], want_dbias[c], 1e-2 * magnitude[c] + 1e-6) << "dbias, channel " << c;
  }
  const double m = static_cast<double>(s.n * s.h * s.w);
  double worst = 0, largest = 0;
  for (int64_t i = 0; i < numel; ++i) {
    const int64_t c = i % s.c;
    const double d = ((mask[i / 8] >> (i % 8)) & 1) ? half_to_float(dy[i]) : 0.0;
    const double want = scale[c] * inv_std[c] * (d - want_dbias[c] / m - xhat[i] * want_dscale[c] / m);
    worst = std::max(worst, std::fabs(half_to_float(dx[i]) - want));
    largest = std::max(largest, std::fabs(want));
  }
  EXPECT_LT(worst, 1e-2 * largest) << "dx: the batchnorm backward of dy * mask";
}

// Folding can be the default only under the deterministic rule (train.deterministic: the same bits
// every run, for bitwise resume and identical replicas). Each folded pass (the residual
// BatchNorm's backward on the convolution's input shape), at a layer2 shape of
// ResNet-50 (batch 32), built from engines without cuDNN's NONDETERMINISTIC note, runs twice on the
// same inputs and must write the same bits; with any engine the same is printed, not required
// (train.deterministic: false).
TEST_F(CudnnFusionOnGpu, FoldedPassesFromDeterministicEnginesAreBitwiseRepeatable) {
  const FusedConvShape s = shape_of(32, 128, 28, 28, 128, 3);
  const std::pair<const char*, FusedPass> passes[] = {
      {"forward", FusedPass::kForward},
      {"input gradient", FusedPass::kInputGradient},
      {"filter gradient", FusedPass::kFilterGradient},
      {"residual batchnorm backward", FusedPass::kResidualBatchNormBackward},
      {"shortcut batchnorm backward", FusedPass::kBatchNormBackward}};
  for (const auto& [pass_name, pass] : passes)
    for (const bool deterministic : {true, false}) {
      const std::string what = std::string(pass_name) + (deterministic ? ", deterministic engines" : ", any engine");
      const std::unique_ptr<FusedConvGraph> graph = build(handle, pass, s, /*fused=*/true, deterministic);
      const FusedConvGraph& g = *graph;
      if (!g.built()) {
        ADD_FAILURE() << what << ": not built (" << g.error() << ")"
                      << (deterministic ? ": folding could not run under train.deterministic" : "");
        continue;
      }
      GraphRun run = prepare_run(g);
      uint64_t seed = 31;
      for (const auto& [name, tensor] : g.tensors()) {
        if (tensor.output) continue;
        if (tensor.bit_mask) {  // any bits
          std::vector<uint8_t> bits(tensor.bytes);
          for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<uint8_t>((i * 131 + seed) % 256);
          upload(run, name, bits);
          ++seed;
          continue;
        }
        const int64_t n = static_cast<int64_t>(tensor.bytes / dtype_size(tensor.dtype));
        // Positive per-channel figures (an inverse deviation must be), signed activations.
        const bool per_channel = n == s.c || n == s.k;
        const std::vector<float> v = testing::random_vector(n, seed++, per_channel ? 0.5f : -1.0f, 1.5f);
        if (tensor.dtype == DType::kF16)
          upload(run, name, to_half(v));
        else
          upload(run, name, v);
      }
      std::vector<std::vector<std::vector<uint8_t>>> results;
      for (int repeat = 0; repeat < 2; ++repeat) {
        ASSERT_EQ(execute_and_wait(handle, g, run), "") << what;
        results.emplace_back();
        for (const auto& [name, tensor] : g.tensors())
          if (tensor.output) results.back().push_back(download<uint8_t>(g, run, name));
      }
      const bool same = results[0] == results[1];
      std::cout << "graph " << what << ": " << (same ? "the same bits twice" : "different bits") << "\n";
      if (deterministic) EXPECT_TRUE(same) << what << ": two runs on the same inputs wrote different bits";
    }
}

// ResNet-50's bottleneck 3x3 (layer1: 256 x 64 x 56 x 56, 64 filters; layer2's first, of
// stride 2) and 1x1 shapes at batch 256: whether cuDNN builds each pass of a convolution with its BatchNorm folded in
// (forward, input gradient, filter gradient) and the same pass without, and the median of 20
// runs of each (printed: what the folding costs each convolution, against the BatchNorm
// passes it removes).
TEST_F(CudnnFusionOnGpu, BuildsForResNet50Shapes) {
  const std::pair<const char*, FusedPass> passes[] = {{"forward", FusedPass::kForward},
                                                       {"input gradient", FusedPass::kInputGradient},
                                                       {"filter gradient", FusedPass::kFilterGradient}};
  for (const FusedConvShape& s : {shape_of(256, 64, 56, 56, 64, 3), shape_of(256, 64, 56, 56, 256, 1),
                                  shape_of(256, 256, 56, 56, 64, 1), shape_of(256, 128, 28, 28, 128, 3),
                                  strided(shape_of(256, 128, 56, 56, 128, 3))}) {
    const std::string shape = "n" + std::to_string(s.n) + " c" + std::to_string(s.c) + " " + std::to_string(s.h) +
                              "x" + std::to_string(s.w) + " k" + std::to_string(s.k) + " " + std::to_string(s.r) +
                              "x" + std::to_string(s.r) + (s.stride == 2 ? " stride 2" : "");
    for (const auto& [pass_name, pass] : passes)
      for (const bool fused : {false, true}) {
        const std::string what = shape + " " + pass_name + (fused ? " fused" : " plain");
        const std::unique_ptr<FusedConvGraph> graph = build(handle, pass, s, fused, false);
        const FusedConvGraph& g = *graph;
        if (fused)  // what the deterministic rule would leave the folded layer
          std::cout << "graph " << what << ", deterministic engines only: "
                    << (build(handle, pass, s, fused, true)->built() ? "built" : "not built") << "\n";
        if (!g.built()) {
          std::cout << "graph " << what << ": not built (" << g.error() << ")\n";
          continue;
        }
        GraphRun run = prepare_run(g);
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
}

#endif

}  // namespace
}  // namespace sdp::nn
