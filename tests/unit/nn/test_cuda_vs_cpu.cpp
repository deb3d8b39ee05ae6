// Every CUDA layer against its CPU twin (the oracle: docs/architecture.md, "Tests"; ggml's
// test-backend-ops): the same layer built by its factory on both devices, with the same initial
// weights (drawn on the host from one seed), the same input and the same output gradient; forward
// output, input gradient, parameter gradients and buffers (BN running statistics) must agree.
//
// Tolerances, f32: element-wise layers (ReLU, Add, Dropout, Flatten, PadShortcut) compute the
// same single rounding and must agree exactly; reductions (GEMM, convolution, batch-norm
// statistics, pooling averages, the loss) may sum in another order, so they must agree to
// |gpu - cpu| <= 1e-5 * max|cpu| over the tensor (TF32 is off: cuBLAS in pedantic math,
// cuDNN convolutions in CUDNN_DEFAULT_MATH). Skipped with "no CUDA device" without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/device_info.hpp"
#include "device_compare.hpp"
#include "grad_check.hpp"
#include "nn/add.hpp"
#include "nn/batchnorm2d.hpp"
#include "nn/conv2d.hpp"
#include "nn/dropout.hpp"
#include "nn/flatten.hpp"
#include "nn/linear.hpp"
#include "nn/model.hpp"
#include "nn/pad_shortcut.hpp"
#include "nn/pool2d.hpp"
#include "nn/relu.hpp"
#include "nn/residual_block.hpp"
#include "nn/softmax_cross_entropy.hpp"

namespace sdp::nn {
namespace {

using testing::expect_close;
using testing::LayerHarness;
using tag = memory::format_tag;

constexpr double kExact = 0.0;
constexpr double kF32 = 1e-5;  // relative to the largest magnitude of the CPU tensor

// Builds L on both devices, runs forward (and backward when training) from the same values,
// and compares everything. `native_nhwc`: the GPU layer is built for a channels_last model
// (Context::channels_last), so an NHWC input takes its native NHWC kernels.
template <class L, class... Args>
void compare_layer_in(bool native_nhwc, const std::string& what, const Dims& in, bool training, double tol,
                      const std::vector<float>& input, tag layout, const Args&... args) {
  LayerHarness cpu(Device::cpu()), gpu(Device::cuda(0));
  gpu.ctx().channels_last = native_nhwc;
  cpu.make<L>(args...);
  gpu.make<L>(args...);
  cpu.configure(in, training, layout);
  gpu.configure(in, training, layout);
  ASSERT_EQ(cpu.out_dims(), gpu.out_dims()) << what;
  cpu.input() = input;
  gpu.input() = input;
  testing::expect_same_pass(cpu, gpu, training, tol, what);
}

template <class L, class... Args>
void compare_layer(const std::string& what, const Dims& in, bool training, double tol,
                   const std::vector<float>& input, tag layout, const Args&... args) {
  compare_layer_in<L>(false, what, in, training, tol, input, layout, args...);
}

template <class L, class... Args>
void compare_layer(const std::string& what, const Dims& in, bool training, double tol,
                   const Args&... args) {
  compare_layer<L>(what, in, training, tol, testing::random_vector(testing::numel(in), 77), tag::undef,
                   args...);
}

// Distinct values 0.05 apart: no ties (max pooling) and nothing at ReLU's kink.
std::vector<float> spread(int64_t n, uint64_t seed) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = (static_cast<float>(i) - n / 2.0f + 0.5f) * 0.05f;
  std::mt19937_64 rng(seed);
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

// The f32 channels_last path (model.memory_format: channels_last in fp32 or tf32): each layer
// on its native NHWC kernels in f32; the CPU twin gets the same NHWC input.
template <class L, class... Args>
void compare_native_nhwc_layer(const std::string& what, const Dims& in, bool training, double tol,
                               const std::vector<float>& input, const Args&... args) {
  compare_layer_in<L>(true, what, in, training, tol, input, tag::acdb, args...);
}

TEST(CudaVsCpu, F32NativeNhwcLayers) {
  SKIP_WITHOUT_GPU();
  compare_native_nhwc_layer<Conv2d>("conv 3x3 nhwc f32", {2, 8, 7, 7}, true, kF32, testing::random_vector(784, 31),
                                    Conv2dOptions{8, 16, 3, 1, 1, false, false, true});
  compare_native_nhwc_layer<Conv2d>("conv 1x1 s2 bias nhwc f32", {2, 8, 6, 6}, true, kF32,
                                    testing::random_vector(576, 32), Conv2dOptions{8, 12, 1, 2, 0, true, false, true});
  compare_native_nhwc_layer<Conv2d>("conv inference nhwc f32", {2, 8, 7, 7}, false, kF32,
                                    testing::random_vector(784, 33), Conv2dOptions{8, 16, 3, 1, 1, true, false, true});
  compare_native_nhwc_layer<BatchNorm2d>("bn nhwc f32", {4, 8, 3, 3}, true, kF32, testing::random_vector(288, 34),
                                         BatchNorm2dOptions{8, 1e-5f, 0.1f, false});
  compare_native_nhwc_layer<BatchNorm2d>("bn relu nhwc f32", {4, 8, 3, 3}, true, kF32, spread(288, 35),
                                         BatchNorm2dOptions{8, 1e-5f, 0.1f, true});
  compare_native_nhwc_layer<BatchNorm2d>("bn inference nhwc f32", {4, 8, 3, 3}, false, kF32,
                                         testing::random_vector(288, 36), BatchNorm2dOptions{8, 1e-5f, 0.1f, true});
  // C = 8: 4 channels a thread; C = 6: one. Overlapping windows: an input's gradients from
  // several windows are summed in another order by oneDNN (1 ulp apart on an H100).
  compare_native_nhwc_layer<Pool2d>("max 3/2/1 nhwc f32 C8", {2, 8, 9, 9}, true, kF32, spread(1296, 37),
                                    max_pool(3, 2, 1));
  compare_native_nhwc_layer<Pool2d>("max 2/2 relu nhwc f32 C6", {2, 6, 6, 6}, true, kExact, spread(432, 38),
                                    max_pool(2, 2, 0, true));
  compare_native_nhwc_layer<Pool2d>("global avg nhwc f32", {2, 16, 5, 3}, true, kF32, testing::random_vector(480, 39),
                                    global_avg_pool());
  compare_native_nhwc_layer<PadShortcut>("pad nhwc f32", {2, 4, 6, 6}, true, kExact, testing::random_vector(288, 40),
                                         4, 8, 2);
}

TEST(CudaVsCpu, ReLU) {
  SKIP_WITHOUT_GPU();
  compare_layer<ReLU>("relu", {2, 3, 5, 7}, true, kExact, spread(210, 1), tag::undef);
  compare_layer<ReLU>("relu nhwc", {2, 3, 5, 7}, true, kExact, spread(210, 2), tag::acdb);
}

TEST(CudaVsCpu, Dropout) {
  SKIP_WITHOUT_GPU();
  // The same generator position draws the same mask on both devices.
  compare_layer<Dropout>("dropout 0.5", {4, 3, 5, 5}, true, kExact, 0.5f);
  compare_layer<Dropout>("dropout 0.1", {8, 100}, true, kExact, 0.1f);
  compare_layer<Dropout>("dropout inference", {4, 3, 5, 5}, false, kExact, 0.5f);
}

TEST(CudaVsCpu, Flatten) {
  SKIP_WITHOUT_GPU();
  compare_layer<Flatten>("flatten", {2, 3, 4, 5}, true, kExact);
  compare_layer<Flatten>("flatten nhwc", {2, 3, 4, 5}, true, kExact, testing::random_vector(120, 3), tag::acdb);
}

TEST(CudaVsCpu, PadShortcut) {
  SKIP_WITHOUT_GPU();
  compare_layer<PadShortcut>("pad stride 2", {2, 4, 5, 5}, true, kExact, 4, 8, 2);
  compare_layer<PadShortcut>("pad stride 1", {2, 6, 4, 4}, true, kExact, 6, 10, 1);
  compare_layer<PadShortcut>("pad nhwc", {2, 4, 6, 5}, true, kExact, testing::random_vector(240, 4), tag::acdb, 4,
                             8, 2);
}

// 120 elements: the vector kernel alone (4 f32 a thread); 75: the vector kernel and a tail.
TEST(CudaVsCpu, Add) {
  SKIP_WITHOUT_GPU();
  for (const Dims& d : {Dims{2, 5, 3, 4}, Dims{3, 5, 1, 5}}) {
    const int64_t n = testing::numel(d);
    const std::vector<float> a = testing::random_vector(n, 5), b = testing::random_vector(n, 6),
                             w = testing::random_vector(n, 7);
    for (Layout b_layout : {Layout::kPlain, Layout::kChannelsLast})
      for (AddOutput mode : {AddOutput::kActivation, AddOutput::kInPlace, AddOutput::kGradient}) {
        std::vector<std::vector<float>> results[2];
        int k = 0;
        for (Device device : {Device::cpu(), Device::cuda(0)}) {
          LayerHarness h(device);
          std::unique_ptr<Add> add = Add::create(h.ctx());
          const TensorDesc a_desc = TensorDesc::plain(d, device);
          TensorDesc b_desc = a_desc;
          b_desc.layout = b_layout;
          const TensorDesc out = add->configure(a_desc, b_desc, mode);
          const TensorRef a_ref = h.device_buffer(a_desc), b_ref = h.device_buffer(b_desc);
          h.from_host(a, a_ref);
          h.from_host(b, b_ref);
          results[k].push_back(h.to_host(add->forward(a_ref, b_ref)));
          const TensorRef diff = h.device_buffer(out);
          h.from_host(w, diff);
          results[k].push_back(h.to_host(add->backward_b(diff)));
          ++k;
        }
        const std::string what = "add of " + std::to_string(n) + " mode " + std::to_string(static_cast<int>(mode)) +
                                 " b layout " + layout_name(b_layout);
        expect_close(results[0][0], results[1][0], kExact, what + " forward");
        expect_close(results[0][1], results[1][1], kExact, what + " backward_b");
      }
  }
}

TEST(CudaVsCpu, SoftmaxCrossEntropy) {
  SKIP_WITHOUT_GPU();
  const int n = 33, k = 10;
  const std::vector<float> z = testing::random_vector(n * k, 8, -4.f, 4.f);
  std::vector<int32_t> labels(n);
  for (int i = 0; i < n; ++i) labels[i] = (i * 7) % k;
  for (float smoothing : {0.0f, 0.1f}) {
    float loss[2];
    int64_t correct[2];
    std::vector<float> grad[2];
    int idx = 0;
    for (Device device : {Device::cpu(), Device::cuda(0)}) {
      LayerHarness h(device);
      std::unique_ptr<SoftmaxCrossEntropy> ce = SoftmaxCrossEntropy::create(h.ctx());
      ce->set_label_smoothing(smoothing);
      const TensorRef zm = h.device_buffer(TensorDesc::plain({n, k}, device));
      ce->configure(zm.desc, k);
      h.from_host(z, zm);
      loss[idx] = ce->forward(zm, labels.data(), &correct[idx]);
      grad[idx] = h.to_host(ce->backward());
      ++idx;
    }
    EXPECT_NEAR(loss[1], loss[0], kF32 * std::fabs(loss[0])) << "smoothing " << smoothing;
    EXPECT_EQ(correct[1], correct[0]);
    expect_close(grad[0], grad[1], kF32, "softmax xent gradient");
  }
}

TEST(CudaVsCpu, Linear) {
  SKIP_WITHOUT_GPU();
  compare_layer<Linear>("linear", {8, 37}, true, kF32, LinearOptions{37, 19, true});
  compare_layer<Linear>("linear no bias", {5, 64}, true, kF32, LinearOptions{64, 10, false});
  compare_layer<Linear>("linear inference", {3, 16}, false, kF32, LinearOptions{16, 4, true});
}

TEST(CudaVsCpu, Conv2d) {
  SKIP_WITHOUT_GPU();
  compare_layer<Conv2d>("conv 3x3 s2 p1 bias", {2, 3, 9, 9}, true, kF32, Conv2dOptions{3, 8, 3, 2, 1, true, false});
  compare_layer<Conv2d>("conv 1x1 s2", {2, 16, 8, 8}, true, kF32, Conv2dOptions{16, 32, 1, 2, 0, false, false});
  compare_layer<Conv2d>("conv 5x5 fused relu", {3, 6, 12, 12}, true, kF32,
                        Conv2dOptions{6, 16, 5, 1, 0, true, true});
  compare_layer<Conv2d>("conv channels_last", {2, 6, 7, 7}, true, kF32, testing::random_vector(588, 9), tag::acdb,
                        Conv2dOptions{6, 5, 3, 1, 1, true, false, true});
  compare_layer<Conv2d>("conv inference", {2, 3, 8, 8}, false, kF32, Conv2dOptions{3, 4, 3, 1, 1, true, false});
}

TEST(CudaVsCpu, BatchNorm2d) {
  SKIP_WITHOUT_GPU();
  compare_layer<BatchNorm2d>("bn training", {4, 6, 5, 5}, true, kF32, BatchNorm2dOptions{6, 1e-5f, 0.1f, false});
  compare_layer<BatchNorm2d>("bn fused relu", {4, 6, 5, 5}, true, kF32, BatchNorm2dOptions{6, 1e-5f, 0.1f, true});
  compare_layer<BatchNorm2d>("bn inference", {4, 6, 5, 5}, false, kF32, BatchNorm2dOptions{6, 1e-5f, 0.1f, false});
  compare_layer<BatchNorm2d>("bn nhwc", {4, 6, 3, 3}, true, kF32, testing::random_vector(216, 10), tag::acdb,
                             BatchNorm2dOptions{6, 1e-5f, 0.1f, false});
}

TEST(CudaVsCpu, Pool2d) {
  SKIP_WITHOUT_GPU();
  compare_layer<Pool2d>("max 2/2", {2, 3, 8, 8}, true, kExact, spread(384, 11), tag::undef, max_pool(2, 2));
  compare_layer<Pool2d>("max 3/2/1", {2, 3, 7, 7}, true, kF32, spread(294, 12), tag::undef, max_pool(3, 2, 1));
  compare_layer<Pool2d>("max 2/2 relu", {2, 3, 7, 9}, true, kExact, spread(378, 13), tag::undef,
                        max_pool(2, 2, 0, true));
  compare_layer<Pool2d>("max nhwc out", {2, 4, 6, 6}, true, kExact, spread(288, 14), tag::undef,
                        max_pool(2, 2, 0, false, true));
  compare_layer<Pool2d>("avg 2/2", {2, 3, 6, 6}, true, kF32, avg_pool(2, 2));
  compare_layer<Pool2d>("avg 3/2/1", {2, 3, 7, 7}, true, kF32, avg_pool(3, 2, 1));
  compare_layer<Pool2d>("global avg", {2, 16, 5, 3}, true, kF32, global_avg_pool());
}

TEST(CudaVsCpu, ResidualBlocks) {
  SKIP_WITHOUT_GPU();
  for (ShortcutKind kind : {ShortcutKind::kPad, ShortcutKind::kProjection}) {
    LayerHarness cpu(Device::cpu()), gpu(Device::cuda(0));
    cpu.adopt(make_basic_block(cpu.ctx(), "block", 8, 16, 2, kind));
    gpu.adopt(make_basic_block(gpu.ctx(), "block", 8, 16, 2, kind));
    cpu.configure({4, 8, 6, 6}, true);
    gpu.configure({4, 8, 6, 6}, true);
    cpu.input() = gpu.input() = testing::random_vector(4 * 8 * 36, 15);
    // A block chains convolutions and batch norms: allow a few f32 roundings more.
    expect_close(cpu.forward(), gpu.forward(), 1e-4, "block forward");
    expect_close(cpu.backward(), gpu.backward(), 1e-4, "block input gradient");
    for (std::size_t p = 0; p < cpu.store().params().size(); ++p)
      expect_close(testing::host_values(cpu.store().params()[p].grad),
                   testing::host_values(gpu.store().params()[p].grad), 1e-4,
                   "block gradient of " + cpu.store().params()[p].name);
  }
}

// A whole model (tiny ResNet: every CUDA layer but Dropout) trained a few plain-SGD steps on
// each device from the same initial weights and batch: the losses stay within f32 noise
// of each other and the first step's gradients agree.
TEST(CudaVsCpu, TinyResNetFewSgdSteps) {
  SKIP_WITHOUT_GPU();
  auto cpu = testing::tiny_resnet(Device::cpu());
  auto gpu = testing::tiny_resnet(Device::cuda(0));
  const int n = 8;
  const std::vector<float> x = testing::random_vector(n * 3 * 8 * 8, 16);
  std::vector<int32_t> labels(n);
  for (int i = 0; i < n; ++i) labels[i] = (3 * i + 1) % 5;
  Tensor x_cpu({n, 3, 8, 8}), x_gpu({n, 3, 8, 8}, DType::kF32, Device::cuda(0));
  testing::set_values(x_cpu, x);
  testing::set_values(x_gpu, x);
  const float lr = 0.1f;
  for (int step = 0; step < 3; ++step) {
    const float loss_cpu = cpu->forward(x_cpu, labels.data(), true);
    const float loss_gpu = gpu->forward(x_gpu, labels.data(), true);
    EXPECT_NEAR(loss_gpu, loss_cpu, 1e-4 * std::fabs(loss_cpu)) << "step " << step;
    cpu->backward();
    gpu->backward();
    const std::vector<float> g_cpu = testing::host_values(cpu->store().grad_arena());
    const std::vector<float> g_gpu = testing::host_values(gpu->store().grad_arena());
    if (step == 0) expect_close(g_cpu, g_gpu, 1e-4, "step 0 gradients");
    for (auto* m : {cpu.get(), gpu.get()}) {
      const std::vector<float> g = m == cpu.get() ? g_cpu : g_gpu;
      std::vector<float> w = testing::host_values(m->store().param_arena());
      for (std::size_t i = 0; i < w.size(); ++i) w[i] -= lr * g[i];
      testing::set_values(m->store().param_arena(), w);
    }
  }
}

// The trainer hands a GPU model the loader's host batches: forward copies them in on the
// model's stream, with the same result as input already on the GPU.
TEST(CudaVsCpu, HostInputToAGpuModelIsCopiedIn) {
  SKIP_WITHOUT_GPU();
  auto on_device = testing::tiny_linear_model(Device::cuda(0));
  auto from_host = testing::tiny_linear_model(Device::cuda(0));
  const int n = 6;
  const std::vector<float> x = testing::random_vector(n * 16, 21);
  std::vector<int32_t> labels = {0, 1, 2, 2, 1, 0};
  Tensor x_host({n, 1, 4, 4}), x_gpu({n, 1, 4, 4}, DType::kF32, Device::cuda(0));
  testing::set_values(x_host, x);
  testing::set_values(x_gpu, x);
  for (int step = 0; step < 2; ++step) {  // the second call reuses the staging buffer
    int64_t correct_a = -1, correct_b = -1;
    const float a = on_device->forward(x_gpu, labels.data(), true, &correct_a);
    const float b = from_host->forward(x_host, labels.data(), true, &correct_b);
    EXPECT_EQ(a, b) << "step " << step;
    EXPECT_EQ(correct_a, correct_b);
    on_device->backward();
    from_host->backward();
    EXPECT_EQ(testing::host_values(on_device->store().grad_arena()),
              testing::host_values(from_host->store().grad_arena()));
  }
  Tensor wrong({n, 1, 4, 4}, DType::kF32, Device::cpu());
  EXPECT_THROW(from_host->forward(wrong.reshaped({n, 16, 1, 1}), labels.data(), false), InputError);
}

// The trainer starts each next batch's copy early (Model::prefetch, on a copy stream from
// page-locked memory, into the slot the last forward did not read): the steps are bit for bit
// those of plain copies, including when a prefetched batch is not the one forwarded next.
TEST(CudaVsCpu, PrefetchedHostInputGivesTheSameSteps) {
  SKIP_WITHOUT_GPU();
  auto plain = testing::tiny_linear_model(Device::cuda(0));
  auto ahead = testing::tiny_linear_model(Device::cuda(0));
  const int n = 6;
  std::vector<int32_t> labels = {0, 1, 2, 2, 1, 0};
  std::vector<Tensor> batches;
  for (int b = 0; b < 4; ++b) {
    std::shared_ptr<void> memory = allocate_pinned_host(n * 16 * sizeof(float));
    void* data = memory.get();
    batches.push_back(Tensor::view_of(std::move(memory), data, {n, 1, 4, 4}));
    testing::set_values(batches.back(), testing::random_vector(n * 16, 30 + b));
  }
  for (int step = 0; step < 4; ++step) {
    const Tensor& x = batches[step];
    // Step 2 prefetches batch 3 but forwards batch 2: the prefetch is dropped.
    ahead->prefetch(step == 2 ? batches[3] : x);
    EXPECT_EQ(plain->forward(x, labels.data(), true), ahead->forward(x, labels.data(), true)) << "step " << step;
    plain->backward();
    ahead->backward();
    EXPECT_EQ(testing::host_values(plain->store().grad_arena()), testing::host_values(ahead->store().grad_arena()))
        << "step " << step;
  }
}

}  // namespace
}  // namespace sdp::nn
