// The Model contract the training loop relies on: gradients overwritten (not summed),
// the grad-ready hook order, reconfiguration on batch/mode changes, and whole-model
// finite differences of the loss.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>

#include "core/device_info.hpp"
#include "device_params.hpp"
#include "grad_check.hpp"
#include "nn/batchnorm2d.hpp"
#include "nn/conv2d.hpp"
#include "nn/flatten.hpp"
#include "nn/layer_profile.hpp"
#include "nn/linear.hpp"
#include "nn/model.hpp"
#include "nn/pool2d.hpp"
#include "nn/residual_block.hpp"

namespace sdp::nn {
namespace {

std::unique_ptr<Model> tiny_resnet(uint64_t seed = 5, Device device = Device::cpu()) {
  auto m = std::make_unique<Model>("tiny", Shape{3, 8, 8}, 5, seed, device);
  m->add<Conv2d>("conv1", Conv2dOptions{3, 8, 3, 1, 1, false, false});
  m->add<BatchNorm2d>("bn1", BatchNorm2dOptions{8, 1e-5f, 0.1f, true});
  m->add(make_basic_block(m->context(), "layer1.0", 8, 8, 1, ShortcutKind::kPad));
  m->add(make_basic_block(m->context(), "layer2.0", 8, 16, 2, ShortcutKind::kProjection));
  m->add<Pool2d>("avgpool", global_avg_pool());
  m->add<Flatten>("flatten");
  m->add<Linear>("fc", LinearOptions{16, 5, true});
  m->build();
  return m;
}

struct Batch {
  Tensor x;
  std::vector<int32_t> labels;
};

Batch random_batch(int n, const Shape& chw, int classes, uint64_t seed) {
  Shape s = {n};
  s.insert(s.end(), chw.begin(), chw.end());
  Batch b{Tensor(s), {}};
  const auto v = testing::random_vector(b.x.numel(), seed);
  std::copy(v.begin(), v.end(), b.x.data<float>());
  for (int i = 0; i < n; ++i) b.labels.push_back(static_cast<int32_t>((seed + 3 * i) % classes));
  return b;
}

std::vector<float> grads_of(const ParameterStore& store) {
  const Tensor& g = store.grad_arena();
  return std::vector<float>(g.data<float>(), g.data<float>() + g.numel());
}

TEST(Model, BackwardOverwritesGradients) {
  auto m = tiny_resnet();
  const Batch b = random_batch(4, m->input_shape(), 5, 1);
  m->forward(b.x, b.labels.data(), true);
  m->backward();
  const auto first = grads_of(m->store());
  m->forward(b.x, b.labels.data(), true);
  m->backward();
  // BN running stats changed but do not enter training-mode outputs: same gradients.
  EXPECT_EQ(grads_of(m->store()), first);
  double norm = 0;
  for (float g : first) norm += g * g;
  EXPECT_GT(norm, 0.0);
}

TEST(Model, GradReadyHookOncePerParamInReverseRegistrationOrder) {
  auto m = tiny_resnet();
  std::vector<std::string> seen;
  m->set_grad_ready_hook([&](const Param& p) { seen.push_back(p.name); });
  const Batch b = random_batch(2, m->input_shape(), 5, 2);
  m->forward(b.x, b.labels.data(), true);
  m->backward();
  std::vector<std::string> expected;
  for (const Param& p : m->store().params()) expected.push_back(p.name);
  std::reverse(expected.begin(), expected.end());
  EXPECT_EQ(seen, expected);
}

TEST(Model, HookSeesFinalGradient) {
  // When the hook fires for a Param, its gradient must already hold the final value.
  auto m = tiny_resnet();
  const Batch b = random_batch(3, m->input_shape(), 5, 3);
  m->forward(b.x, b.labels.data(), true);
  m->backward();
  const auto final_grads = grads_of(m->store());
  m->store().zero_grad();
  int checked = 0;
  m->set_grad_ready_hook([&](const Param& p) {
    for (int64_t i = 0; i < p.grad.numel(); ++i)
      ASSERT_EQ(p.grad.data<float>()[i], final_grads[p.offset + i]) << p.name;
    ++checked;
  });
  m->forward(b.x, b.labels.data(), true);
  m->backward();
  EXPECT_EQ(checked, static_cast<int>(m->store().params().size()));
}

TEST(Model, GradientsFollowAReboundGradArena) {
  // The data-parallel layer may move the gradient arena (e.g. into shared memory), even
  // after training started; backward must write into the new memory.
  auto m = tiny_resnet();
  const Batch b = random_batch(2, m->input_shape(), 5, 9);
  m->forward(b.x, b.labels.data(), true);
  m->backward();
  const auto expected = grads_of(m->store());
  auto memory_block = allocate_host(m->store().grad_arena().nbytes());
  m->store().rebind_grad_arena(memory_block, memory_block.get());
  ASSERT_EQ(m->store().grad_arena().raw(), memory_block.get());
  m->forward(b.x, b.labels.data(), true);
  m->backward();
  EXPECT_EQ(grads_of(m->store()), expected);
}

TEST(Model, BatchAndModeChanges) {
  auto m = tiny_resnet();
  const Batch big = random_batch(4, m->input_shape(), 5, 4);
  const Batch small = random_batch(3, m->input_shape(), 5, 4);
  int64_t correct = -1;
  const float l1 = m->forward(big.x, big.labels.data(), true, &correct);
  EXPECT_GE(correct, 0);
  m->backward();
  const float e1 = m->forward(small.x, small.labels.data(), false, &correct);
  EXPECT_LE(correct, 3);
  EXPECT_THROW(m->backward(), std::logic_error);  // no backward after an eval forward
  EXPECT_EQ(m->forward(small.x, small.labels.data(), false), e1);
  EXPECT_EQ(m->forward(big.x, big.labels.data(), true), l1);  // back to training
  EXPECT_TRUE(std::isfinite(l1) && std::isfinite(e1));
  const Batch wrong = random_batch(2, {3, 9, 8}, 5, 5);
  EXPECT_THROW(m->forward(wrong.x, wrong.labels.data(), true), InputError);
}

TEST(Model, EvalUsesRunningStatistics) {
  // Eval output must not depend on which other samples share the batch.
  auto m = tiny_resnet();
  const Batch b = random_batch(4, m->input_shape(), 5, 6);
  for (int i = 0; i < 3; ++i) m->forward(b.x, b.labels.data(), true);
  Tensor one = b.x.slice(0, b.x.numel() / 4).reshaped({1, 3, 8, 8});
  Tensor x1({1, 3, 8, 8});
  x1.copy_from(one);
  Batch pair = random_batch(2, m->input_shape(), 5, 7);
  std::copy(x1.data<float>(), x1.data<float>() + x1.numel(), pair.x.data<float>());
  const int32_t label = pair.labels[0];
  const float alone = m->forward(x1, &label, false);
  const float l2_first = m->forward(pair.x, pair.labels.data(), false);
  pair.labels[1] = pair.labels[0];
  std::copy(x1.data<float>(), x1.data<float>() + x1.numel(), pair.x.data<float>() + x1.numel());
  EXPECT_NEAR(m->forward(pair.x, pair.labels.data(), false), alone, 1e-5);
  (void)l2_first;
}

// model.batchnorm: folded asks exactly the BatchNorms between two convolutions of a residual
// branch (each basic block's bn1; not the stem's, nor a branch's last, which takes the block's
// sum), at each configure, training or evaluation, and counts the answers; on the CPU every one
// stays separate and says why, with the same loss and gradients as without asking.
TEST(Model, BatchNormFoldingAsksTheBatchNormsBetweenTwoConvolutions) {
  auto asked = tiny_resnet(), plain = tiny_resnet();
  asked->set_batchnorm_folding(true);
  const Batch b = random_batch(4, asked->input_shape(), 5, 90);
  const float loss = asked->forward(b.x, b.labels.data(), true);
  asked->backward();
  EXPECT_EQ(loss, plain->forward(b.x, b.labels.data(), true));
  plain->backward();
  EXPECT_EQ(testing::host_values(asked->store().grad_arena()), testing::host_values(plain->store().grad_arena()));
  const Context::BatchNormFolding& folding = asked->batchnorm_folding();
  EXPECT_EQ(folding.folded, 0);
  ASSERT_EQ(folding.refused.size(), 2u);
  EXPECT_EQ(folding.refused[0].rfind("layer1.0.bn1: BatchNorm folding is a GPU's", 0), 0u) << folding.refused[0];
  EXPECT_EQ(folding.refused[1].rfind("layer2.0.bn1: ", 0), 0u) << folding.refused[1];
  EXPECT_EQ(folding.summary().rfind("0 of 2 BatchNorms between two convolutions folded into them (cuDNN's graphs "
                                    "built in 0 ms); the others run separately, the first because layer1.0.bn1: ",
                                    0),
            0u)
      << folding.summary();
  asked->forward(b.x, b.labels.data(), false);
  EXPECT_EQ(asked->batchnorm_folding().refused.size(), 2u) << "an evaluation asks them too";
  EXPECT_TRUE(plain->batchnorm_folding().refused.empty()) << "not asked";
  // With the branches' last BatchNorms asked too (model.batchnorm: folded): the CPU fuses no sum
  // into a BatchNorm, so none is asked, and nothing changes.
  auto all = tiny_resnet();
  all->set_batchnorm_folding(true, /*with_residual=*/true);
  EXPECT_EQ(all->forward(b.x, b.labels.data(), true), loss);
  EXPECT_EQ(all->batchnorm_folding().folded_with_residual, 0);
  EXPECT_TRUE(all->batchnorm_folding().refused_with_residual.empty());
}

// model.grad_sum: fused on the CPU: no block fuses its sum into a BatchNorm, so none is asked, and
// the step is the same; the log line's counts.
TEST(Model, GradSumFusionAsksOnlyBlocksWithTheSumFused) {
  auto asked = tiny_resnet(), plain = tiny_resnet();
  asked->set_grad_sum_fused(true);
  const Batch b = random_batch(4, asked->input_shape(), 5, 91);
  EXPECT_EQ(asked->forward(b.x, b.labels.data(), true), plain->forward(b.x, b.labels.data(), true));
  asked->backward();
  plain->backward();
  EXPECT_EQ(testing::host_values(asked->store().grad_arena()), testing::host_values(plain->store().grad_arena()));
  EXPECT_EQ(asked->grad_sum_fusion().fused, 0);
  EXPECT_TRUE(asked->grad_sum_fusion().refused.empty());
  Context::GradSumFusion f;
  f.fused = 15;
  f.refused = {"layer1.0: Conv2d layer1.0.conv1: cuDNN builds no input gradient with the sum (x)"};
  EXPECT_EQ(f.summary(),
            "15 of 16 residual blocks' input gradient sums in their first convolution's pass; the others sum in a pass "
            "of their own, the first because layer1.0: Conv2d layer1.0.conv1: cuDNN builds no input gradient with the "
            "sum (x)");
}

// The trainer's log line for model.batchnorm: folded: both kinds counted, the first refusal of
// either said.
TEST(Model, BatchNormFoldingSummaryCountsBothKinds) {
  Context::BatchNormFolding f;
  f.requested = f.with_residual = true;
  f.folded = 6;
  f.folded_with_residual = 2;
  f.refused_with_residual = {"layer3.0.bn3: cuDNN builds no batchnorm backward through the ReLU's mask (x)"};
  f.folded_shortcuts = 1;
  f.build_seconds = 0.0124;
  EXPECT_EQ(f.summary(),
            "6 of 6 BatchNorms between two convolutions folded into them, 2 of 3 with their block's sum after the "
            "one before, 1 of 1 projection shortcuts' into theirs (cuDNN's graphs built in 12 ms); the others run "
            "separately, the first because layer3.0.bn3: cuDNN builds no batchnorm backward through the ReLU's mask "
            "(x)");
  f.with_residual = false;
  f.refused_with_residual.clear();
  f.folded_shortcuts = 0;
  EXPECT_EQ(f.summary(), "6 of 6 BatchNorms between two convolutions folded into them (cuDNN's graphs built in 12 ms)");
}

TEST(ModelGrad, TinyResNetFiniteDifferences) {
  auto m = tiny_resnet();
  const Batch b = random_batch(3, m->input_shape(), 5, 8);
  m->forward(b.x, b.labels.data(), true);
  m->backward();
  const auto g = grads_of(m->store());
  auto loss = [&] { return static_cast<double>(m->forward(b.x, b.labels.data(), true)); };
  float* values = m->store().param_arena().data<float>();
  testing::check_gradient("tiny_resnet", loss, values, g, {1e-3f, 5e-2, 2e-4, 150, 0.1}, 3);
}

// LayerProfile (sdp-train bench layers): every leaf layer timed once per pass and step, a
// residual block through its parts, and the numbers the same as without it; on each device
// (host clock on the CPU, CUDA events on a GPU). On a GPU the blocks' ReLUs fold into their
// sums (Add::set_relu_fused): no forward of their own; and the next block's gradient sum takes
// layer1.0's derivative (Layer::set_input_grad_relu_gated): no backward either; layer2.0's,
// followed by the pooling, still runs its backward.
SDP_DEVICE_TEST_SUITE(LayerProfiling);

TEST_P(LayerProfiling, TimesEveryLeafLayerOncePerPassAndStep) {
  const bool gpu = !GetParam().is_cpu();
  auto m = tiny_resnet(5, GetParam());
  const Batch b = random_batch(4, m->input_shape(), 5, 1);
  LayerProfile profile(*m->context().stream);
  m->context().profile = &profile;
  for (int step = 0; step < 3; ++step) {
    m->forward(b.x, b.labels.data(), true);
    m->backward();
    profile.collect();
  }
  std::vector<std::string> names, kinds;
  for (const LayerProfile::Unit& unit : profile.units()) {
    names.push_back(unit.name);
    kinds.push_back(unit.kind);
    const bool forward_runs = unit.name.find("grad_sum") == std::string::npos && !(gpu && unit.kind == "relu");
    const bool backward_runs = unit.name != "input";
    EXPECT_EQ(unit.forward_seconds.size(), forward_runs ? 3u : 0u) << unit.name;
    EXPECT_EQ(unit.backward_seconds.size(), backward_runs ? 3u : 0u) << unit.name;
    for (double s : unit.forward_seconds) EXPECT_GE(s, 0.0) << unit.name;
  }
  // Forward order; a block is its parts (no "layer1.0" unit), the gradient sums of the
  // blocks' inputs come first in backward, so last here. The host batch's copy to a GPU is
  // the input unit (forward only); on the CPU there is nothing to time.
  if (gpu) {
    ASSERT_FALSE(names.empty());
    EXPECT_EQ(names.front(), "input");
    EXPECT_EQ(kinds.front(), "input");
    EXPECT_TRUE(profile.units().front().backward_seconds.empty());
    names.erase(names.begin());
    kinds.erase(kinds.begin());
  }
  const std::vector<std::string> expected =
      gpu ? std::vector<std::string>{"conv1", "bn1", "layer1.0.conv1", "layer1.0.bn1", "layer1.0.conv2",
                                     "layer1.0.bn2", "layer1.0.add", "layer2.0.conv1", "layer2.0.bn1",
                                     "layer2.0.conv2", "layer2.0.bn2", "layer2.0.downsample.0",
                                     "layer2.0.downsample.1", "layer2.0.add", "avgpool", "flatten", "fc", "loss",
                                     "layer2.0.relu", "layer2.0.grad_sum", "layer1.0.grad_sum"}
          : std::vector<std::string>{"conv1", "bn1", "layer1.0.conv1", "layer1.0.bn1", "layer1.0.conv2",
                                     "layer1.0.bn2", "layer1.0.add", "layer1.0.relu", "layer2.0.conv1",
                                     "layer2.0.bn1", "layer2.0.conv2", "layer2.0.bn2", "layer2.0.downsample.0",
                                     "layer2.0.downsample.1", "layer2.0.add", "layer2.0.relu", "avgpool",
                                     "flatten", "fc", "loss", "layer2.0.grad_sum", "layer1.0.grad_sum"};
  EXPECT_EQ(names, expected);
  const auto kind_of = [&](const std::string& name) {
    const auto at = std::find(names.begin(), names.end(), name);
    return at == names.end() ? std::string("(absent)") : kinds[at - names.begin()];
  };
  EXPECT_EQ(kind_of("conv1"), "conv");
  EXPECT_EQ(kind_of("bn1"), "batchnorm");
  EXPECT_EQ(kind_of("layer1.0.add"), "add");
  EXPECT_EQ(kind_of("layer2.0.relu"), "relu");
  EXPECT_EQ(kind_of("layer2.0.downsample.0"), "conv");  // the projection shortcut's 1x1 convolution
  EXPECT_EQ(kind_of("avgpool"), "pool");
  EXPECT_EQ(kind_of("fc"), "linear");
  EXPECT_EQ(kind_of("loss"), "loss");

  // Detached: nothing more is recorded.
  m->context().profile = nullptr;
  m->forward(b.x, b.labels.data(), true);
  m->backward();
  profile.collect();
  EXPECT_EQ(profile.units().front().forward_seconds.size(), 3u);
}

// What the timeline's layers track is made of: each pass of the step, placed from begin_step
// in the order the passes ran, inside the step.
TEST_P(LayerProfiling, PlacesEachPassOfTheStepInTime) {
  auto m = tiny_resnet(5, GetParam());
  const Batch b = random_batch(4, m->input_shape(), 5, 1);
  LayerProfile profile(*m->context().stream);
  m->context().profile = &profile;
  for (int step = 0; step < 2; ++step) {
    const auto start = std::chrono::steady_clock::now();
    profile.begin_step();
    m->forward(b.x, b.labels.data(), true);
    m->backward();
    profile.collect();
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const auto& passes = profile.last_step();
    std::size_t forward = 0, backward = 0;
    double last_forward_end = 0, first_backward_start = 1e9;
    for (const LayerProfile::TimedPass& p : passes) {
      EXPECT_GE(p.start_seconds, 0.0) << p.unit->name;
      EXPECT_LE(p.start_seconds + p.seconds, elapsed + 1e-6) << p.unit->name;
      if (p.pass == Pass::kForward) {
        ++forward;
        last_forward_end = std::max(last_forward_end, p.start_seconds + p.seconds);
      } else {
        ++backward;
        first_backward_start = std::min(first_backward_start, p.start_seconds);
      }
    }
    EXPECT_EQ(forward + backward, passes.size());
    EXPECT_EQ(backward, profile.units().size() - (GetParam().is_cpu() ? 0 : 1));  // every unit but a GPU's input
    EXPECT_LE(last_forward_end, first_backward_start + 1e-6) << "backward began before forward ended";
  }
}

TEST_P(LayerProfiling, LeavesLossAndGradientsBitwiseUnchanged) {
  auto plain = tiny_resnet(11, GetParam()), profiled = tiny_resnet(11, GetParam());
  LayerProfile profile(*profiled->context().stream);
  profiled->context().profile = &profile;
  for (int step = 0; step < 2; ++step) {
    const Batch b = random_batch(4, plain->input_shape(), 5, 20 + step);
    const float loss = plain->forward(b.x, b.labels.data(), true);
    plain->backward();
    EXPECT_EQ(profiled->forward(b.x, b.labels.data(), true), loss);
    profiled->backward();
    profile.collect();
    EXPECT_EQ(testing::host_values(profiled->store().grad_arena()), testing::host_values(plain->store().grad_arena()));
  }
}

// train.loss_read: step_end. forward_deferred queues the loss and take_loss reads it later (on
// a GPU without the host waiting for forward in between): the same loss and gradients, bit
// for bit, as forward's, step after step, with the next batch prefetched as the trainer does.
SDP_DEVICE_TEST_SUITE(DeferredLoss);

TEST_P(DeferredLoss, TakesForwardsLossAndGradientsBitwise) {
  auto now = tiny_resnet(13, GetParam()), later = tiny_resnet(13, GetParam());
  std::vector<Batch> batches;
  for (int step = 0; step < 3; ++step) batches.push_back(random_batch(4, now->input_shape(), 5, 30 + step));
  for (int step = 0; step < 3; ++step) {
    const Batch& b = batches[step];
    const float loss = now->forward(b.x, b.labels.data(), true);
    now->backward();
    later->forward_deferred(b.x, b.labels.data());
    later->backward();
    later->wait_input_copied();
    if (step + 1 < 3) {
      now->prefetch(batches[step + 1].x);
      later->prefetch(batches[step + 1].x);
    }
    EXPECT_EQ(later->take_loss(), loss) << "step " << step;
    EXPECT_EQ(testing::host_values(later->store().grad_arena()), testing::host_values(now->store().grad_arena()))
        << "step " << step;
  }
}

// train.cuda_graphs: on. forward_backward_deferred records the layers' forward, the loss and
// the layers' backward at the third step after a configure and replays them from then on: the
// same losses and gradients, bit for bit, as forward_deferred and backward launched, over the
// staged input's two buffers (a prefetch each step, as the trainer does) and a change of the
// loss scale (a second recording). A CPU model has no recording: the same calls, launched.
// `setup` makes both models the variant under test (16-bit channels_last on a GPU).
// `hooked`: both report each gradient to a grad-ready hook, as data parallel does, and the
// replayed one records its forward alone: the hook sees the same gradients in the same order.
// `tail`: device work after backward (the update with optimizer.capturable): launched after
// backward on one model, the other's step tail (recorded with its whole step).
void expect_replays_as_launches(Device device, const std::function<void(Model&)>& setup, int expect_replays,
                                bool hooked = false, const std::function<void(Model&)>& tail = {}) {
  auto launched = tiny_resnet(17, device), replayed = tiny_resnet(17, device);
  setup(*launched);
  setup(*replayed);
  if (tail) replayed->set_step_tail([&] { tail(*replayed); });
  std::vector<std::string> launched_order, replayed_order;
  if (hooked) {
    launched->set_grad_ready_hook([&](const Param& p) { launched_order.push_back(p.name); });
    replayed->set_grad_ready_hook([&](const Param& p) { replayed_order.push_back(p.name); });
  }
  replayed->set_step_graphs(true, /*forward_alone=*/hooked);
  constexpr int kSteps = 7;
  std::vector<Batch> batches;
  for (int step = 0; step < kSteps; ++step) batches.push_back(random_batch(4, launched->input_shape(), 5, 40 + step));
  for (int step = 0; step < kSteps; ++step) {
    const Batch& b = batches[step];
    const float scale = step < 5 ? 1.0f : 4.0f;
    launched->set_loss_scale(scale);
    replayed->set_loss_scale(scale);
    launched->forward_deferred(b.x, b.labels.data());
    launched->backward();
    if (tail) tail(*launched);
    replayed->forward_backward_deferred(b.x, b.labels.data());
    launched->wait_input_copied();
    replayed->wait_input_copied();
    if (step + 1 < kSteps) {
      launched->prefetch(batches[step + 1].x);
      replayed->prefetch(batches[step + 1].x);
    }
    EXPECT_EQ(replayed->take_loss(), launched->take_loss()) << "step " << step;
    EXPECT_EQ(testing::host_values(replayed->store().grad_arena()),
              testing::host_values(launched->store().grad_arena()))
        << "step " << step;
    EXPECT_EQ(replayed_order, launched_order) << "step " << step;
  }
  if (hooked) EXPECT_FALSE(launched_order.empty());
  EXPECT_EQ(replayed->step_graph_failure(), "");
  EXPECT_EQ(replayed->replayed_steps(), expect_replays) << replayed->step_graph_obstacle();
}

SDP_DEVICE_TEST_SUITE(StepGraphs);

TEST_P(StepGraphs, ReplaysGiveTheLaunchesLossAndGradientsBitwise) {
  const bool gpu = GetParam().is_cuda();
  EXPECT_EQ(tiny_resnet(1, GetParam())->step_graph_obstacle().empty(), gpu);
  // Steps 0 and 1 launch; 2 records and replays; 3 and 4 replay (the other input buffer's
  // recording is made at 3); 5 records at the new loss scale; 6 replays.
  expect_replays_as_launches(GetParam(), [](Model&) {}, gpu ? 5 : 0);
}

// The step's tail (the optimizer's update under optimizer.capturable; here the gradients
// halved on the model's stream) is recorded with forward and backward and replayed with them,
// and launched after backward wherever the step is launched (the CPU, the first steps).
TEST_P(StepGraphs, RecordsTheStepsTailWithForwardAndBackward) {
  const auto halve_gradients = [](Model& m) {
    Tensor gradients = m.store().grad_arena();  // shares the arena
    gradients.scale(0.5f, m.context().stream.get());
  };
  expect_replays_as_launches(GetParam(), [](Model&) {}, GetParam().is_cuda() ? 5 : 0, false, halve_gradients);
}

// Data parallel's case: backward hands each gradient to the hook as it is made, so it is
// launched after the replayed forward (train.cuda_graphs: on with several ranks).
TEST_P(StepGraphs, ReplaysTheForwardAloneWhereAHookTakesTheGradients) {
  expect_replays_as_launches(GetParam(), [](Model&) {}, GetParam().is_cuda() ? 5 : 0, /*hooked=*/true);
}

TEST(StepGraphsOnGpu, ReplaysTheSixteenBitChannelsLastStepBitwise) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  for (DType dtype : {DType::kF16, DType::kBF16})
    expect_replays_as_launches(
        Device::cuda(0),
        [dtype](Model& m) {
          m.set_compute_dtype(dtype);
          m.set_channels_last(true);
        },
        5);
}

// model.batchnorm: folded_inner and folded (with model.grad_sum: fused): the folded passes (cuDNN
// frontend graphs, the finalize, residual output and input gradient kernels) record and replay as
// the launches run, bit for bit.
TEST(StepGraphsOnGpu, ReplaysTheFoldedBatchNormStepBitwise) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  for (const bool with_residual : {false, true}) {
    SCOPED_TRACE(with_residual ? "folded" : "folded_inner");
    expect_replays_as_launches(
        Device::cuda(0),
        [with_residual](Model& m) {
          m.set_compute_dtype(DType::kF16);
          m.set_channels_last(true);
          m.set_batchnorm_folding(true, with_residual);
          m.set_grad_sum_fused(with_residual);  // and, with folded, model.grad_sum: fused
        },
        5);
  }
}

// Data parallel's stream-ordered buckets (distributed.stream_ordered): a recordable hook runs
// while a step is launched or recorded, never on a replay (its device work is in the
// recording), and backward is recorded with it. Recording is collective across ranks: when the
// agreement says another rank's failed, this rank drops its recording and launches, with the
// same gradients, and says why.
TEST(StepGraphsOnGpu, RecordsBackwardWithARecordableHookAndDropsItWhenARankDidNot) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  for (const bool others_recorded : {true, false}) {
    SCOPED_TRACE(others_recorded ? "every rank recorded" : "another rank's recording failed");
    auto launched = tiny_resnet(19, Device::cuda(0)), replayed = tiny_resnet(19, Device::cuda(0));
    int hooked = 0, agreements = 0;
    replayed->set_grad_ready_hook([&](const Param&) { ++hooked; }, /*recordable=*/true);
    replayed->set_recording_agreement([&](bool recorded) {
      EXPECT_TRUE(recorded);
      ++agreements;
      return others_recorded;
    });
    replayed->set_step_graphs(true);
    EXPECT_EQ(replayed->backward_graph_obstacle(), "");
    EXPECT_EQ(replayed->step_recording(), Model::StepRecording::kForwardAndBackward);
    const int params = static_cast<int>(replayed->store().params().size());
    for (int step = 0; step < 6; ++step) {
      const Batch b = random_batch(4, launched->input_shape(), 5, 80 + step);
      launched->forward_deferred(b.x, b.labels.data());
      launched->backward();
      replayed->forward_backward_deferred(b.x, b.labels.data());
      EXPECT_EQ(replayed->take_loss(), launched->take_loss()) << "step " << step;
      EXPECT_EQ(testing::host_values(replayed->store().grad_arena()),
                testing::host_values(launched->store().grad_arena()))
          << "step " << step;
    }
    // The staged input alternates between two buffers: a recording for each (steps 2 and 3).
    EXPECT_EQ(agreements, others_recorded ? 2 : 1) << "one agreement per recording attempt";
    if (others_recorded) {
      EXPECT_EQ(replayed->replayed_steps(), 4);
      EXPECT_EQ(hooked, 4 * params) << "two launched steps and two recordings; no replay runs the hook";
    } else {
      EXPECT_EQ(replayed->replayed_steps(), 0);
      EXPECT_NE(replayed->step_graph_failure().find("another rank's recording failed"), std::string::npos);
      EXPECT_EQ(hooked, 7 * params) << "the recording, and the six steps launched";
    }
  }
}

// What stops a recording is said, not met as a wrong replay: a hook that takes each gradient
// as backward makes it (data parallel), and layers timed one by one.
TEST(StepGraphsOnGpu, NamesWhatKeepsTheStepFromBeingRecorded) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  auto m = tiny_resnet(3, Device::cuda(0));
  EXPECT_EQ(m->step_graph_obstacle(), "");
  EXPECT_EQ(m->backward_graph_obstacle(), "");
  m->set_grad_ready_hook([](const Param&) {});
  EXPECT_EQ(m->step_graph_obstacle(), "") << "the forward can still be recorded";
  EXPECT_NE(m->backward_graph_obstacle().find("handed on as backward makes it"), std::string::npos);
  m->set_grad_ready_hook({});
  LayerProfile profile(*m->context().stream);
  m->context().profile = &profile;
  EXPECT_NE(m->step_graph_obstacle().find("timed one by one"), std::string::npos);
  m->context().profile = nullptr;
  // A hook without forward_alone: the step is launched, as without graphs.
  m->set_step_graphs(true);
  m->set_grad_ready_hook([](const Param&) {});
  EXPECT_EQ(m->step_recording(), Model::StepRecording::kNone);
  for (int step = 0; step < 4; ++step) {
    const Batch b = random_batch(4, m->input_shape(), 5, 60 + step);
    m->forward_backward_deferred(b.x, b.labels.data());
    m->take_loss();
  }
  EXPECT_EQ(m->replayed_steps(), 0);
}

TEST(LayerProfileMedian, OfSamples) {
  EXPECT_EQ(median_seconds({}), 0.0);
  EXPECT_EQ(median_seconds({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(median_seconds({5.0, 1.0, 2.0, 4.0}), 4.0);  // the upper middle of an even count
}

}  // namespace
}  // namespace sdp::nn
