// model.batchnorm: folded_inner and folded on a GPU (nn/batchnorm2d_cuda.hpp, fold_between and
// fold_with_residual_after): which BatchNorms fold, that a folded step gives the same bits twice
// (train.deterministic's engines), what it computes against the separate BatchNorms on the same
// GPU (the running statistics, evaluation with them), and the memory it saves (no BatchNorm
// output is stored). AmpVsCpu's
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

// How a test model's BatchNorms run: model.batchnorm separate, folded_inner, folded.
enum class Fold { kSeparate, kInner, kWithResidual };
const char* fold_name(Fold f) {
  return f == Fold::kSeparate ? "separate" : f == Fold::kInner ? "folded_inner" : "folded";
}

// The bottleneck model in `dtype`, channels_last, its BatchNorms run as `fold` says, each block's
// input gradient summed in its first convolution's pass with `grad_sum` (model.grad_sum: fused).
std::unique_ptr<Model> bottleneck(DType dtype, Fold fold, bool grad_sum = false) {
  auto m = testing::bottleneck_resnet(Device::cuda(0));
  m->set_compute_dtype(dtype);
  m->set_channels_last(true);
  m->set_batchnorm_folding(fold != Fold::kSeparate, fold == Fold::kWithResidual);
  m->set_grad_sum_fused(grad_sum);
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
  for (const std::string& r : m.batchnorm_folding().refused_with_residual) all += "\n  " + r;
  for (const std::string& r : m.batchnorm_folding().refused_shortcuts) all += "\n  " + r;
  return all;
}

// Every BatchNorm between two convolutions of a branch folds (bn1 and bn2 of each bottleneck);
// with folded, each branch's last one (with the block's sum) too, in training, and the two
// projection shortcuts' BatchNorms into theirs; the stem's never;
// an evaluation folds the inner ones with the running statistics, and the next training
// configure folds them all again.
TEST(FoldedBatchNormOnGpu, FoldsEveryBatchNormBetweenTwoConvolutions) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kF16, DType::kBF16})
    for (const Fold fold : {Fold::kInner, Fold::kWithResidual}) {
      const std::string what = std::string(dtype_name(dtype)) + " " + fold_name(fold);
      const int with_residual = fold == Fold::kWithResidual ? 3 : 0;
      auto m = bottleneck(dtype, fold);
      Tensor x({8, 3, 16, 16});
      testing::set_values(x, testing::random_vector(8 * 768, 3));
      std::vector<int32_t> labels(8, 1);
      m->forward(x, labels.data(), true);
      m->backward();
      EXPECT_EQ(m->batchnorm_folding().folded, 6) << what << refusals(*m);
      EXPECT_EQ(m->batchnorm_folding().folded_with_residual, with_residual) << what << refusals(*m);
      EXPECT_EQ(m->batchnorm_folding().folded_shortcuts, with_residual > 0 ? 2 : 0) << what << refusals(*m);
      EXPECT_TRUE(m->batchnorm_folding().refused.empty()) << what << refusals(*m);
      EXPECT_TRUE(m->batchnorm_folding().refused_with_residual.empty()) << what << refusals(*m);
      EXPECT_TRUE(m->batchnorm_folding().refused_shortcuts.empty()) << what << refusals(*m);
      m->forward(x, labels.data(), false);
      EXPECT_EQ(m->batchnorm_folding().folded, 6)
          << what << ": evaluation folds them too (the running statistics)" << refusals(*m);
      EXPECT_EQ(m->batchnorm_folding().folded_with_residual, 0) << what << ": evaluation's sum is one pass already";
      m->forward(x, labels.data(), true);
      EXPECT_EQ(m->batchnorm_folding().folded, 6) << what << ": folded again for training";
      EXPECT_EQ(m->batchnorm_folding().folded_with_residual, with_residual) << what << ": folded again for training";
    }
  auto separate = bottleneck(DType::kF16, Fold::kSeparate);
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
  for (const Fold fold : {Fold::kInner, Fold::kWithResidual}) {
    SCOPED_TRACE(fold_name(fold));
    auto a = bottleneck(DType::kF16, fold), b = bottleneck(DType::kF16, fold);
    const Steps first = run_steps(*a, 3), second = run_steps(*b, 3);
    EXPECT_EQ(a->batchnorm_folding().folded, 6) << refusals(*a);
    EXPECT_EQ(first.losses, second.losses);
    EXPECT_EQ(first.grads, second.grads);
    EXPECT_EQ(first.buffers, second.buffers);
    EXPECT_EQ(first.eval_loss, second.eval_loss);
  }
}

// Against the separate BatchNorms on the same GPU: the same losses, running statistics and
// evaluation (folded too, with those statistics) to 16-bit rounding; the gradients to the bound the CPU
// comparison holds both to. The folded statistics come from f32 sums (variance = E[x^2] - mean^2)
// and the scale and bias are applied in the io type, so the bits differ.
TEST(FoldedBatchNormOnGpu, ComputesWhatTheSeparateBatchNormsCompute) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kF16, DType::kBF16})
    for (const Fold fold : {Fold::kInner, Fold::kWithResidual}) {
      const std::string what = std::string(dtype_name(dtype)) + " " + fold_name(fold);
      auto separate = bottleneck(dtype, Fold::kSeparate), folded = bottleneck(dtype, fold);
      const Steps s = run_steps(*separate, 3), f = run_steps(*folded, 3);
      ASSERT_EQ(folded->batchnorm_folding().folded, 6) << refusals(*folded);
      ASSERT_EQ(folded->batchnorm_folding().folded_with_residual, fold == Fold::kWithResidual ? 3 : 0)
          << refusals(*folded);
      ASSERT_EQ(folded->batchnorm_folding().folded_shortcuts, fold == Fold::kWithResidual ? 2 : 0)
          << refusals(*folded);
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
// backward's start) is smaller by them. Folding the branch's last one too keeps no more.
TEST(FoldedBatchNormOnGpu, HoldsLessThanTheSeparateBatchNorms) {
  SKIP_WITHOUT_GPU();
  auto separate = bottleneck(DType::kF16, Fold::kSeparate), folded = bottleneck(DType::kF16, Fold::kInner);
  auto all = bottleneck(DType::kF16, Fold::kWithResidual);
  run_steps(*separate, 1);
  run_steps(*folded, 1);
  run_steps(*all, 1);
  // The evaluation at the end configured for inference: one more training step plans again.
  Tensor x({32, 3, 16, 16});
  testing::set_values(x, testing::random_vector(32 * 768, 9));
  std::vector<int32_t> labels(32, 2);
  for (Model* m : {separate.get(), folded.get(), all.get()}) {
    m->forward(x, labels.data(), true);
    m->backward();
  }
  const std::size_t s = separate->gradient_plan().peak_live_bytes(), f = folded->gradient_plan().peak_live_bytes();
  std::cout << "  bottleneck f16 channels_last, batch 32: alive at the peak " << s << " bytes separate, " << f
            << " folded (arenas " << separate->gradient_plan().arena_bytes() << ", "
            << folded->gradient_plan().arena_bytes() << ")\n";
  EXPECT_LT(f, s);
  const std::size_t a = all->gradient_plan().peak_live_bytes();
  std::cout << "  with the branches' last BatchNorms folded too: " << a << " bytes\n";
  EXPECT_LE(a, f);
}

std::string grad_sum_refusals(const Model& m) {
  std::string all;
  for (const std::string& r : m.grad_sum_fusion().refused) all += "\n  " + r;
  return all;
}

// model.grad_sum: fused: every block whose BatchNorm fuses its sum (all three, channels_last)
// sums its input gradient in its first convolution's pass, with the BatchNorms separate and
// folded; the steps give the same bits twice; and the model computes what the separate sums
// compute, to the rounding the one fewer rounding of the sum changes.
TEST(GradSumOnGpu, EveryBlockSumsInItsFirstConvolution) {
  SKIP_WITHOUT_GPU();
  for (const Fold fold : {Fold::kSeparate, Fold::kWithResidual}) {
    SCOPED_TRACE(fold_name(fold));
    auto m = bottleneck(DType::kF16, fold, true);
    run_steps(*m, 1);
    Tensor x({8, 3, 16, 16});
    testing::set_values(x, testing::random_vector(8 * 768, 4));
    std::vector<int32_t> labels(8, 3);
    m->forward(x, labels.data(), true);  // the evaluation in run_steps configured for inference
    m->backward();
    EXPECT_EQ(m->grad_sum_fusion().fused, 3) << grad_sum_refusals(*m);
    EXPECT_TRUE(m->grad_sum_fusion().refused.empty()) << grad_sum_refusals(*m);
  }
}

TEST(GradSumOnGpu, StepsAreBitwiseRepeatable) {
  SKIP_WITHOUT_GPU();
  auto a = bottleneck(DType::kF16, Fold::kWithResidual, true), b = bottleneck(DType::kF16, Fold::kWithResidual, true);
  const Steps first = run_steps(*a, 3), second = run_steps(*b, 3);
  EXPECT_EQ(first.losses, second.losses);
  EXPECT_EQ(first.grads, second.grads);
  EXPECT_EQ(first.buffers, second.buffers);
}

TEST(GradSumOnGpu, ComputesWhatTheSeparateSumsCompute) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    const std::string what = dtype_name(dtype);
    auto separate = bottleneck(dtype, Fold::kSeparate), fused = bottleneck(dtype, Fold::kSeparate, true);
    const Steps s = run_steps(*separate, 3), f = run_steps(*fused, 3);
    const double loss_tolerance = dtype == DType::kF16 ? 5e-3 : 2e-2;
    for (std::size_t i = 0; i < s.losses.size(); ++i)
      EXPECT_NEAR(f.losses[i], s.losses[i], loss_tolerance * std::fabs(s.losses[i])) << what << " step " << i;
    const double grads = testing::relative_error(s.grads, f.grads);
    std::cout << what << ": whole gradient off by " << grads << " with the sums in the convolutions\n";
    EXPECT_LT(grads, dtype == DType::kF16 ? 0.2 : 0.45) << what << " whole gradient";
  }
}

}  // namespace
}  // namespace sdp::nn
