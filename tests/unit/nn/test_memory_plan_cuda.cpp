// model.memory_plan: shared on the GPU. The CUDA layers leave their outputs and backward's
// buffers (input gradients, fused ReLUs' gradients, the residual sum's gradient, gradient
// sums, backward layout conversions) to the model's GradientPlan, which reuses each once its
// last reader has run: gradients take the memory of activations whose backward is done. The
// same model with every buffer its own (per_layer, the path before) must give bit-identical
// losses and gradients, step after step: a buffer reused while a later kernel still reads it
// (a missed declaration of what a backward reads) would change them. Every GPU layer kind is covered (the tiny ResNet: conv,
// BatchNorm with its ReLU, max and global-average pooling, both shortcut kinds, flatten,
// linear; the bottleneck model: BatchNorm fused with the block's sum; the MLP: dropout), in
// f32 NCHW and in 16 bits, NCHW and channels_last. Skipped with "no CUDA device" without a GPU.
#include <gtest/gtest.h>

#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/device_memory.hpp"
#include "device_compare.hpp"

namespace sdp::nn {
namespace {

struct Case {
  std::string name;
  std::function<std::unique_ptr<Model>(Device)> build;
  Shape image;
  int classes;
};

std::vector<Case> cases() {
  return {{"tiny resnet", [](Device d) { return testing::tiny_resnet(d); }, {3, 8, 8}, 5},
          {"bottleneck resnet", [](Device d) { return testing::bottleneck_resnet(d); }, {3, 16, 16}, 6},
          {"mlp with dropout", [](Device d) { return testing::mlp_with_dropout(d); }, {1, 8, 8}, 10}};
}

void expect_shared_matches_per_layer(const Case& c, DType dtype, bool channels_last, bool lean = false) {
  const std::string what =
      c.name + " " + dtype_name(dtype) + (channels_last ? " channels_last" : " nchw") + (lean ? " lean" : "");
  auto shared = c.build(Device::cuda(0));
  auto own = c.build(Device::cuda(0));
  shared->set_lean_memory_plan(lean);
  own->set_gradient_plan_enabled(false);
  for (Model* m : {shared.get(), own.get()}) {
    m->set_compute_dtype(dtype);
    m->set_channels_last(channels_last);
  }
  const int n = 8;
  const int64_t per_image = c.image[0] * c.image[1] * c.image[2];
  for (int step = 0; step < 3; ++step) {
    Tensor x({n, c.image[0], c.image[1], c.image[2]});
    testing::set_values(x, testing::random_vector(n * per_image, 50 + step));
    std::vector<int32_t> labels(n);
    for (int i = 0; i < n; ++i) labels[i] = (i + step) % c.classes;
    EXPECT_EQ(shared->forward(x, labels.data(), true), own->forward(x, labels.data(), true)) << what << " step " << step;
    shared->backward();
    own->backward();
    EXPECT_EQ(testing::host_values(shared->store().grad_arena()), testing::host_values(own->store().grad_arena()))
        << what << " step " << step;
  }
  const GradientPlan& plan = shared->gradient_plan();
  std::cout << "  " << what << ": " << plan.buffer_count() << " buffers, " << plan.arena_bytes() << " bytes shared ("
            << plan.peak_live_bytes() << " alive at the peak) for " << plan.separate_bytes() << "\n";
  EXPECT_EQ(own->gradient_plan().buffer_count(), 0u) << what << ": per_layer plans nothing";
  EXPECT_GT(plan.buffer_count(), 2u) << what;
  EXPECT_LT(plan.arena_bytes(), plan.separate_bytes()) << what << ": sharing saved nothing";
}

TEST(MemoryPlanOnGpu, SharedGiveTheBitsOfPerLayer) {
  SKIP_WITHOUT_GPU();
  for (const Case& c : cases()) {
    expect_shared_matches_per_layer(c, DType::kF32, false);
    for (DType dtype : {DType::kF16, DType::kBF16})
      for (bool channels_last : {false, true}) expect_shared_matches_per_layer(c, dtype, channels_last);
  }
}

// model.memory_plan: lean lets an output die once forward's readers are done where backward
// does not read it (a BatchNorm without its ReLU: cuDNN's backward is given no output; a
// convolution without a fused ReLU): its memory then goes to other buffers while backward
// still runs, so a backward that did read it would see them and the bits would differ.
TEST(MemoryPlanOnGpu, LeanGivesTheBitsOfPerLayer) {
  SKIP_WITHOUT_GPU();
  for (const Case& c : cases()) {
    expect_shared_matches_per_layer(c, DType::kF32, false, /*lean=*/true);
    for (DType dtype : {DType::kF16, DType::kBF16})
      for (bool channels_last : {false, true}) expect_shared_matches_per_layer(c, dtype, channels_last, true);
  }
}

// The bottleneck model in f16 channels_last, configured by `setup`, after `steps` training steps
// of batch 32.
std::unique_ptr<Model> trained_bottleneck(const std::function<void(Model&)>& setup, int steps) {
  auto m = testing::bottleneck_resnet(Device::cuda(0));
  setup(*m);
  m->set_compute_dtype(DType::kF16);
  m->set_channels_last(true);
  Tensor x({32, 3, 16, 16});
  testing::set_values(x, testing::random_vector(32 * 768, 7));
  std::vector<int32_t> labels(32, 1);
  for (int step = 0; step < steps; ++step) {
    m->forward(x, labels.data(), true);
    m->backward();
  }
  return m;
}

// What lean saves: the projection shortcuts' BatchNorm outputs (the bottleneck model's
// layer1.0 and layer2.0) no longer live across the start of backward, where every activation
// is alive, and cuDNN's workspace is each operation's own buffer in the arena, alive while the
// operation runs, instead of a shared one the size of the largest beside it: no shared
// workspace is held during training, and the whole peak is lower.
TEST(MemoryPlanOnGpu, LeanHoldsLessAndNoSharedWorkspace) {
  SKIP_WITHOUT_GPU();
  const int workspace = static_cast<int>(MemoryPurpose::kWorkspace);
  const auto peak_of_two_steps = [&](bool lean) {
    const std::size_t before = memory_use(DeviceKind::kCuda).current;
    reset_peak_memory(DeviceKind::kCuda);
    const std::size_t workspace_before = memory_at_peak(DeviceKind::kCuda)[workspace];
    auto m = trained_bottleneck([&](Model& model) { model.set_lean_memory_plan(lean); }, 2);
    std::cout << "  bottleneck f16 channels_last, batch 32, " << (lean ? "lean" : "shared") << ": arena "
              << m->gradient_plan().arena_bytes() << " bytes (" << m->gradient_plan().peak_live_bytes()
              << " alive at the peak); at the device's peak " << describe_memory_at_peak(DeviceKind::kCuda) << "\n";
    return std::make_pair(memory_use(DeviceKind::kCuda).peak - before,
                          memory_at_peak(DeviceKind::kCuda)[workspace] - workspace_before);
  };
  const auto [shared, shared_workspace] = peak_of_two_steps(false);
  const auto [lean, lean_workspace] = peak_of_two_steps(true);
  std::cout << "  peak " << shared << " bytes shared (" << shared_workspace << " of them cuDNN's workspace), " << lean
            << " lean\n";
  EXPECT_EQ(lean_workspace, 0u) << "a lean plan's training holds no shared cuDNN workspace";
  EXPECT_LT(lean, shared);
}

// What the arena saves shows in the device memory the runner holds: the activations all live
// at the start of backward, and the gradients then fit in what dies, so the bottleneck model's
// arena is well under its buffers' sum (by the layer shapes, ResNet-50's about 0.4 of it), and
// its peak allocation falls with it.
TEST(MemoryPlanOnGpu, SharedBuffersLowerThePeak) {
  SKIP_WITHOUT_GPU();
  const auto peak_of_a_step = [](bool shared) {
    const std::size_t before = memory_use(DeviceKind::kCuda).current;
    reset_peak_memory(DeviceKind::kCuda);
    auto m = trained_bottleneck([&](Model& model) { model.set_gradient_plan_enabled(shared); }, 1);
    if (shared)
      EXPECT_LT(static_cast<double>(m->gradient_plan().arena_bytes()), 0.7 * m->gradient_plan().separate_bytes())
          << "the bottleneck model's shared buffers";
    return memory_use(DeviceKind::kCuda).peak - before;
  };
  const std::size_t per_layer = peak_of_a_step(false), shared = peak_of_a_step(true);
  std::cout << "  bottleneck f16 channels_last, batch 32: peak " << per_layer << " bytes per_layer, " << shared
            << " shared\n";
  EXPECT_LT(shared, per_layer);
}

}  // namespace
}  // namespace sdp::nn
