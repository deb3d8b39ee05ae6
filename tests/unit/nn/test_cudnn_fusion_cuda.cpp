// cuDNN's runtime fusion of what a BatchNorm folded into the convolutions would run (#34's
// remaining gap: BatchNorm is half of ResNet-50's 16-bit step, and only NVIDIA's
// "NormConvolution" pattern removes its passes over memory): the previous BatchNorm's scale,
// bias and ReLU applied as the convolution loads its input, and the next BatchNorm's
// statistics (each channel's sum and sum of squares) taken from the convolution's output, in
// one operation graph of the cuDNN frontend:
//   y = conv(relu(x * scale + bias), w);  sum_k = sum(y[..., k]);  sq_k = sum(y[..., k]^2)
// on NHWC f16 with f32 scale, bias and statistics. A probe before the layer is written: does
// cuDNN build this graph on this GPU, does it compute what the separate operations compute
// (against an f32 host reference), and what it costs at ResNet-50's shapes (printed, for
// scripts/gpu-session.sh's log; no speed is claimed here). Skipped without a GPU, and in a
// build without the frontend's headers (scripts/install-deps.sh installs them).
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

// The fused graph and its tensors, built for one shape.
struct FusedGraph {
  std::shared_ptr<fe::graph::Graph> graph;
  std::shared_ptr<fe::graph::Tensor_attributes> x, scale, bias, w, y, sum, sq_sum;
  std::string error;  // empty: built
};

FusedGraph build_fused(cudnnHandle_t handle, const Shape4& s) {
  FusedGraph g;
  g.graph = std::make_shared<fe::graph::Graph>();
  fe::graph::Graph& graph = *g.graph;
  graph.set_io_data_type(fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  // NHWC: the strides of [n, c, h, w] with c innermost.
  g.x = graph.tensor(fe::graph::Tensor_attributes()
                         .set_name("x")
                         .set_dim({s.n, s.c, s.h, s.w})
                         .set_stride({s.c * s.h * s.w, 1, s.c * s.w, s.c}));
  const auto per_channel = [&](const char* name) {
    return graph.tensor(fe::graph::Tensor_attributes()
                            .set_name(name)
                            .set_dim({1, s.c, 1, 1})
                            .set_stride({s.c, 1, s.c, s.c})
                            .set_data_type(fe::DataType_t::FLOAT));
  };
  g.scale = per_channel("scale");
  g.bias = per_channel("bias");
  auto scaled = graph.pointwise(g.x, g.scale, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::MUL));
  auto biased = graph.pointwise(scaled, g.bias, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::ADD));
  auto relu = graph.pointwise(biased, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::RELU_FWD));
  g.w = graph.tensor(fe::graph::Tensor_attributes()
                         .set_name("w")
                         .set_dim({s.k, s.c, s.r, s.r})
                         .set_stride({s.c * s.r * s.r, 1, s.c * s.r, s.c}));
  const int64_t pad = s.r / 2;
  g.y = graph.conv_fprop(relu, g.w,
                         fe::graph::Conv_fprop_attributes().set_padding({pad, pad}).set_stride({1, 1}).set_dilation({1, 1}));
  g.y->set_output(true);
  auto [sum, sq_sum] = graph.genstats(g.y, fe::graph::Genstats_attributes());
  sum->set_output(true).set_data_type(fe::DataType_t::FLOAT);
  sq_sum->set_output(true).set_data_type(fe::DataType_t::FLOAT);
  g.sum = sum;
  g.sq_sum = sq_sum;
  // Each stage only once the one before succeeded; the first failure is the reason.
  const auto failed = [&](const char* what, fe::error_t status) {
    if (status.is_good()) return false;
    g.error = std::string(what) + ": " + status.get_message();
    return true;
  };
  (void)(failed("validate", graph.validate()) || failed("build_operation_graph", graph.build_operation_graph(handle)) ||
         failed("create_execution_plans", graph.create_execution_plans({fe::HeurMode_t::A})) ||
         failed("check_support", graph.check_support(handle)) || failed("build_plans", graph.build_plans(handle)));
  return g;
}

// The graph's tensors and workspace on the GPU (zero-filled: allocate), and the map execute
// takes.
struct GraphRun {
  std::shared_ptr<void> x, scale, bias, w, y, sum, sq, workspace;
  std::unordered_map<std::shared_ptr<fe::graph::Tensor_attributes>, void*> pack;
  std::string error;  // empty: ready
};

GraphRun prepare_run(const FusedGraph& g, const Shape4& s) {
  GraphRun run;
  int64_t bytes = 0;
  fe::error_t status = g.graph->get_workspace_size(bytes);
  if (!status.is_good()) {
    run.error = "get_workspace_size: " + status.get_message();
    return run;
  }
  const Device gpu = Device::cuda(0);
  const auto halves = [](int64_t n) { return static_cast<std::size_t>(n) * 2; };
  const auto floats = [](int64_t n) { return static_cast<std::size_t>(n) * 4; };
  run.x = allocate(gpu, halves(s.n * s.h * s.w * s.c));
  run.w = allocate(gpu, halves(s.k * s.r * s.r * s.c));
  run.y = allocate(gpu, halves(s.n * s.h * s.w * s.k));
  run.scale = allocate(gpu, floats(s.c));
  run.bias = allocate(gpu, floats(s.c));
  run.sum = allocate(gpu, floats(s.k));
  run.sq = allocate(gpu, floats(s.k));
  run.workspace = allocate(gpu, static_cast<std::size_t>(bytes));
  run.pack = {{g.x, run.x.get()},         {g.scale, run.scale.get()}, {g.bias, run.bias.get()},
              {g.w, run.w.get()},         {g.y, run.y.get()},         {g.sum, run.sum.get()},
              {g.sq_sum, run.sq.get()}};
  return run;
}

std::vector<uint16_t> to_half(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) h[i] = float_to_half(v[i]);
  return h;
}

// The graph's result on the host against the separate operations in f32 from the same
// (half-rounded) input and weights.
TEST(CudnnFusionOnGpu, ScaleBiasReluConvGenstatsMatchesTheSeparateOperations) {
  SKIP_WITHOUT_GPU();
  const Shape4 s{2, 16, 8, 8, 32, 3};
  cudnnHandle_t handle = nullptr;
  ASSERT_EQ(cudnnCreate(&handle), CUDNN_STATUS_SUCCESS);
  const FusedGraph g = build_fused(handle, s);
  if (!g.error.empty()) {
    cudnnDestroy(handle);
    GTEST_SKIP() << "cuDNN " << cudnnGetVersion() << " builds no fused scale-bias-ReLU-convolution-statistics graph "
                 << "here (" << g.error << "): the fused BatchNorm layer would need its own kernels";
  }
  const int64_t in_n = s.n * s.h * s.w * s.c, w_n = s.k * s.r * s.r * s.c, out_n = s.n * s.h * s.w * s.k;
  const std::vector<uint16_t> x_h = to_half(testing::random_vector(in_n, 1));
  const std::vector<uint16_t> w_h = to_half(testing::random_vector(w_n, 2, -0.2f, 0.2f));
  const std::vector<float> scale = testing::random_vector(s.c, 3, 0.5f, 1.5f);
  const std::vector<float> bias = testing::random_vector(s.c, 4, -0.5f, 0.5f);
  GraphRun run = prepare_run(g, s);
  ASSERT_TRUE(run.error.empty()) << run.error;
  const Device gpu = Device::cuda(0), host = Device::cpu();
  copy_bytes(gpu, run.x.get(), host, x_h.data(), in_n * 2);
  copy_bytes(gpu, run.w.get(), host, w_h.data(), w_n * 2);
  copy_bytes(gpu, run.scale.get(), host, scale.data(), s.c * 4);
  copy_bytes(gpu, run.bias.get(), host, bias.data(), s.c * 4);
  fe::error_t status = g.graph->execute(handle, run.pack, run.workspace.get());
  ASSERT_TRUE(status.is_good()) << status.get_message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint16_t> y_h(out_n);
  std::vector<float> sum_h(s.k), sq_h(s.k);
  copy_bytes(host, y_h.data(), gpu, run.y.get(), out_n * 2);
  copy_bytes(host, sum_h.data(), gpu, run.sum.get(), s.k * 4);
  copy_bytes(host, sq_h.data(), gpu, run.sq.get(), s.k * 4);
  cudnnDestroy(handle);

  // The host's separate operations, NHWC, in f32 (double sums).
  std::vector<float> a(in_n);
  for (int64_t i = 0; i < in_n; ++i)
    a[i] = std::max(0.0f, half_to_float(x_h[i]) * scale[i % s.c] + bias[i % s.c]);
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

// ResNet-50's bottleneck 3x3 (layer1: 256 x 64 x 56 x 56, 64 filters) and 1x1 shapes at
// batch 256: whether cuDNN builds the graph for them, and the median of 20 runs (printed).
TEST(CudnnFusionOnGpu, BuildsForResNet50Shapes) {
  SKIP_WITHOUT_GPU();
  cudnnHandle_t handle = nullptr;
  ASSERT_EQ(cudnnCreate(&handle), CUDNN_STATUS_SUCCESS);
  for (const Shape4& s : {Shape4{256, 64, 56, 56, 64, 3}, Shape4{256, 64, 56, 56, 256, 1},
                          Shape4{256, 256, 56, 56, 64, 1}, Shape4{256, 128, 28, 28, 128, 3}}) {
    const std::string what = "n" + std::to_string(s.n) + " c" + std::to_string(s.c) + " " + std::to_string(s.h) +
                             "x" + std::to_string(s.w) + " k" + std::to_string(s.k) + " " + std::to_string(s.r) + "x" +
                             std::to_string(s.r);
    const FusedGraph g = build_fused(handle, s);
    if (!g.error.empty()) {
      std::cout << "fused graph " << what << ": not built (" << g.error << ")\n";
      continue;
    }
    GraphRun run = prepare_run(g, s);
    ASSERT_TRUE(run.error.empty()) << what << ": " << run.error;
    std::vector<double> ms;
    for (int i = 0; i < 23; ++i) {
      const auto start = std::chrono::steady_clock::now();
      ASSERT_TRUE(g.graph->execute(handle, run.pack, run.workspace.get()).is_good()) << what;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      if (i >= 3) ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(ms.begin(), ms.end());
    std::cout << "fused graph " << what << ": built, median " << ms[ms.size() / 2] << " ms a run\n";
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
