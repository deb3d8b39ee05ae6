// model.batchnorm: folded on a GPU (nn/batchnorm2d_cuda.hpp, fold_between): which BatchNorms
// fold, that a folded step gives the same bits twice (train.deterministic's engines), what it
// computes against the separate BatchNorms on the same GPU (the running statistics, evaluation
// with them), and the memory it saves (no BatchNorm output is stored). AmpVsCpu's
// BottleneckResNetWithBatchNormFolded checks the gradients against the CPU, StepGraphsOnGpu the
// replays. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "device_compare.hpp"
#include "grad_check.hpp"

namespace sdp::nn {
namespace {

// The bottleneck model in `dtype`, channels_last, folded or not.
std::unique_ptr<Model> bottleneck(DType dtype, bool folded) {
  auto m = testing::bottleneck_resnet(Device::cuda(0));
  m->set_compute_dtype(dtype);
  m->set_channels_last(true);
  m->set_batchnorm_folding(folded);
  return m;
}

struct Steps {
  std::vector<float> losses;
  std::vector<float> grads, buffers;  // after the last step
  float eval_loss = 0.0f;
};

// `steps` training steps of batch 32 (no update: the running statistics move), then an evaluation.
Steps run_steps(Model& m, int steps) {
  Steps out;
  std::vector<int32_t> labels(32);
  for (int i = 0; i < 32; ++i) labels[i] = (5 * i + 2) % 6;
  for (int step = 0; step <= steps; ++step) {
    Tensor x({32, 3, 16, 16});
    testing::set_values(x, testing::random_vector(32 * 768, 70 + step));
    if (step == steps) {
      out.eval_loss = m.forward(x, labels.data(), false);
      break;
    }
    out.losses.push_back(m.forward(x, labels.data(), true));
    m.backward();
  }
  out.grads = testing::host_values(m.store().grad_arena());
  for (const Buffer& b : m.store().buffers()) {
    const std::vector<float> v = testing::host_values(b.value);
    out.buffers.insert(out.buffers.end(), v.begin(), v.end());
  }
  return out;
}

std::string refusals(const Model& m) {
  std::string all;
  for (const std::string& r : m.batchnorm_folding().refused) all += "\n  " + r;
  return all;
}

// Every BatchNorm between two convolutions of a branch folds (bn1 and bn2 of each bottleneck);
// the branch's last one (with the block's sum) and the stem's do not; an evaluation folds them
// with the running statistics, and the next training configure folds them again.
TEST(FoldedBatchNormOnGpu, FoldsEveryBatchNormBetweenTwoConvolutions) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    auto m = bottleneck(dtype, true);
    Tensor x({8, 3, 16, 16});
    testing::set_values(x, testing::random_vector(8 * 768, 3));
    std::vector<int32_t> labels(8, 1);
    m->forward(x, labels.data(), true);
    m->backward();
    EXPECT_EQ(m->batchnorm_folding().folded, 6) << dtype_name(dtype) << refusals(*m);
    EXPECT_TRUE(m->batchnorm_folding().refused.empty()) << dtype_name(dtype) << refusals(*m);
    m->forward(x, labels.data(), false);
    EXPECT_EQ(m->batchnorm_folding().folded, 6) << "evaluation folds them too (the running statistics)"
                                                << refusals(*m);
    m->forward(x, labels.data(), true);
    EXPECT_EQ(m->batchnorm_folding().folded, 6) << "folded again for training";
  }
  auto separate = bottleneck(DType::kF16, false);
  Tensor x({8, 3, 16, 16});
  testing::set_values(x, testing::random_vector(8 * 768, 3));
  std::vector<int32_t> labels(8, 1);
  separate->forward(x, labels.data(), true);
  EXPECT_EQ(separate->batchnorm_folding().folded, 0) << "not asked";
}

// Built from deterministic engines only (train.deterministic, the default), the folded step gives
// the same losses, gradients and running statistics twice, bit for bit: what bitwise resume and
// identical replicas rest on.
TEST(FoldedBatchNormOnGpu, StepsAreBitwiseRepeatable) {
  SKIP_WITHOUT_GPU();
  auto a = bottleneck(DType::kF16, true), b = bottleneck(DType::kF16, true);
  const Steps first = run_steps(*a, 3), second = run_steps(*b, 3);
  EXPECT_EQ(a->batchnorm_folding().folded, 6) << refusals(*a);
  EXPECT_EQ(first.losses, second.losses);
  EXPECT_EQ(first.grads, second.grads);
  EXPECT_EQ(first.buffers, second.buffers);
  EXPECT_EQ(first.eval_loss, second.eval_loss);
}

// Against the separate BatchNorms on the same GPU: the same losses, running statistics and
// evaluation (folded too, with those statistics) to 16-bit rounding; the gradients to the bound the CPU
// comparison holds both to. The folded statistics come from f32 sums (variance = E[x^2] - mean^2)
// and the scale and bias are applied in the io type, so the bits differ.
TEST(FoldedBatchNormOnGpu, ComputesWhatTheSeparateBatchNormsCompute) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    const std::string what = dtype_name(dtype);
    auto separate = bottleneck(dtype, false), folded = bottleneck(dtype, true);
    const Steps s = run_steps(*separate, 3), f = run_steps(*folded, 3);
    ASSERT_EQ(folded->batchnorm_folding().folded, 6) << refusals(*folded);
    const double loss_tolerance = dtype == DType::kF16 ? 5e-3 : 2e-2;
    for (std::size_t i = 0; i < s.losses.size(); ++i)
      EXPECT_NEAR(f.losses[i], s.losses[i], loss_tolerance * std::fabs(s.losses[i])) << what << " step " << i;
    EXPECT_NEAR(f.eval_loss, s.eval_loss, loss_tolerance * std::fabs(s.eval_loss)) << what << " evaluation";
    const double buffers = testing::relative_error(s.buffers, f.buffers);
    const double grads = testing::relative_error(s.grads, f.grads);
    std::cout << what << ": running statistics off by " << buffers << ", whole gradient by " << grads << "\n";
    EXPECT_LT(buffers, dtype == DType::kF16 ? 5e-3 : 2e-2) << what << " running statistics";
    EXPECT_LT(grads, dtype == DType::kF16 ? 0.2 : 0.45) << what << " whole gradient";
  }
}

// The folded BatchNorms' outputs are never stored: the step's arena (the activations alive at
// backward's start) is smaller by them.
TEST(FoldedBatchNormOnGpu, HoldsLessThanTheSeparateBatchNorms) {
  SKIP_WITHOUT_GPU();
  auto separate = bottleneck(DType::kF16, false), folded = bottleneck(DType::kF16, true);
  run_steps(*separate, 1);
  run_steps(*folded, 1);
  // The evaluation at the end configured for inference: one more training step plans again.
  Tensor x({32, 3, 16, 16});
  testing::set_values(x, testing::random_vector(32 * 768, 9));
  std::vector<int32_t> labels(32, 2);
  for (Model* m : {separate.get(), folded.get()}) {
    m->forward(x, labels.data(), true);
    m->backward();
  }
  const std::size_t s = separate->gradient_plan().peak_live_bytes(), f = folded->gradient_plan().peak_live_bytes();
  std::cout << "  bottleneck f16 channels_last, batch 32: alive at the peak " << s << " bytes separate, " << f
            << " folded (arenas " << separate->gradient_plan().arena_bytes() << ", "
            << folded->gradient_plan().arena_bytes() << ")\n";
  EXPECT_LT(f, s);
}

}  // namespace
}  // namespace sdp::nn
