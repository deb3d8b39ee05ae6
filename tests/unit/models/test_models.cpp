// The model zoo: exact parameter counts (weights and biases, not BN running buffers),
// determinism of initialization, the registry's errors, and finite differences of the
// loss of whole models at tiny batches.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <random>
#include <tuple>

#include "config/model_names.hpp"
#include "core/error.hpp"
#include "models/registry.hpp"
#include "nn/conv2d.hpp"
#include "nn/flatten.hpp"
#include "nn/linear.hpp"
#include "nn/pool2d.hpp"
#include "nn/relu.hpp"

namespace sdp::models {
namespace {

ModelOptions options(const std::string& name, int classes, int c, int h, int w) {
  ModelOptions o;
  o.name = name;
  o.num_classes = classes;
  o.in_channels = c;
  o.height = h;
  o.width = w;
  return o;
}

int64_t count(const ModelOptions& o) {
  return make_model(o)->store().num_parameters();
}

TEST(ParameterCounts, MnistModels) {
  EXPECT_EQ(count(options("mlp", 10, 1, 28, 28)), 669706);
  EXPECT_EQ(count(options("lenet5", 10, 1, 28, 28)), 61706);
}

TEST(ParameterCounts, CifarResNets) {
  // He et al. 2016 Table 6 (0.27M ... 0.85M); option A shortcuts have no parameters.
  EXPECT_EQ(count(options("resnet20", 10, 3, 32, 32)), 269722);
  EXPECT_EQ(count(options("resnet32", 10, 3, 32, 32)), 464154);
  EXPECT_EQ(count(options("resnet44", 10, 3, 32, 32)), 658586);
  EXPECT_EQ(count(options("resnet56", 10, 3, 32, 32)), 853018);
}

TEST(ParameterCounts, ImageNetResNets) {
  // torchvision.models.resnet{18,34,50}() with 1000 classes.
  EXPECT_EQ(count(options("resnet18", 1000, 3, 224, 224)), 11689512);
  EXPECT_EQ(count(options("resnet34", 1000, 3, 224, 224)), 21797672);
  EXPECT_EQ(count(options("resnet50", 1000, 3, 224, 224)), 25557032);
  // Small inputs keep the architecture; only the classifier follows num_classes.
  EXPECT_EQ(count(options("resnet18", 10, 3, 32, 32)), 11689512 - 990 * 513);
}

TEST(ParameterCounts, MlpWidthsFollowOptions) {
  ModelOptions o = options("mlp", 10, 1, 28, 28);
  o.hidden = {100};
  EXPECT_EQ(count(o), 784 * 100 + 100 + 100 * 10 + 10);
}

TEST(Registry, ListsEveryModel) {
  const auto names = model_names();
  for (const char* n : {"mlp", "lenet5", "resnet20", "resnet32", "resnet44", "resnet56", "resnet18",
                        "resnet34", "resnet50"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
}

// The job spec validates model.name against config/model_names.hpp: the registry is the
// source and must list the same names (registry.cpp also static_asserts this).
TEST(Registry, AgreesWithTheJobSpecModelNames) {
  EXPECT_EQ(model_names(), std::vector<std::string>(kModelNames.begin(), kModelNames.end()));
}

TEST(Registry, UnknownNameListsKnownNames) {
  try {
    make_model(options("vgg16", 10, 3, 32, 32));
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("vgg16"), std::string::npos);
    EXPECT_NE(msg.find("resnet20"), std::string::npos);
    EXPECT_NE(msg.find("lenet5"), std::string::npos);
  }
}

TEST(Registry, InputTooSmallIsAnInputError) {
  EXPECT_THROW(make_model(options("lenet5", 10, 1, 8, 8)), InputError);
  EXPECT_THROW(make_model(options("resnet20", 0, 3, 32, 32)), InputError);
}

std::vector<float> params_of(const nn::Model& m) {
  const Tensor& a = m.store().param_arena();
  return std::vector<float>(a.data<float>(), a.data<float>() + a.numel());
}

TEST(Determinism, SameSeedSameParametersDifferentSeedDifferent) {
  for (const char* name : {"mlp", "lenet5", "resnet20"}) {
    ModelOptions o = std::string(name) == "resnet20" ? options(name, 10, 3, 32, 32)
                                                     : options(name, 10, 1, 28, 28);
    o.seed = 123;
    const auto a = params_of(*make_model(o));
    const auto b = params_of(*make_model(o));
    EXPECT_EQ(a, b) << name;
    o.seed = 124;
    EXPECT_NE(a, params_of(*make_model(o))) << name;
    EXPECT_EQ(make_model(o)->store().fingerprint(), make_model(o)->store().fingerprint());
  }
}

// Goyal et al.'s zero-gamma init: exactly the last BN of each residual branch starts at 0
// (resnet20: bn2 of 9 blocks; resnet50: bn3 of 16), every other BN gamma at 1.
TEST(ZeroInitResidual, OnlyEachBranchsLastBatchNormStartsAtZero) {
  for (auto [name, last_bn, blocks] : {std::tuple{"resnet20", ".bn2.weight", 9},
                                       std::tuple{"resnet50", ".bn3.weight", 16}}) {
    ModelOptions o = std::string(name) == "resnet20" ? options(name, 10, 3, 32, 32)
                                                     : options(name, 10, 3, 64, 64);
    o.zero_init_residual = true;
    const auto model = make_model(o);
    int zeroed = 0;
    for (const Param& p : model->store().params()) {
      const bool is_last_bn = p.name.size() > std::strlen(last_bn) &&
                              p.name.compare(p.name.size() - std::strlen(last_bn),
                                             std::string::npos, last_bn) == 0;
      const bool is_bn_gamma = p.name.find("bn") != std::string::npos &&
                               p.name.find(".weight") != std::string::npos;
      if (!is_bn_gamma) continue;
      const float* v = p.value.data<float>();
      const float expected = is_last_bn ? 0.0f : 1.0f;
      for (int64_t i = 0; i < p.value.numel(); ++i) ASSERT_EQ(v[i], expected) << name << " " << p.name;
      zeroed += is_last_bn;
    }
    EXPECT_EQ(zeroed, blocks) << name;
    o.zero_init_residual = false;
    const auto plain = make_model(o);
    for (const Param& p : plain->store().params())
      if (p.name.find(last_bn) != std::string::npos) EXPECT_EQ(p.value.data<float>()[0], 1.0f);
  }
}

struct Batch {
  Tensor x;
  std::vector<int32_t> labels;
};

Batch random_batch(const nn::Model& m, int n, uint64_t seed) {
  Shape s = {n};
  for (int64_t d : m.input_shape()) s.push_back(d);
  Batch b{Tensor(s), {}};
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  for (int64_t i = 0; i < b.x.numel(); ++i) b.x.data<float>()[i] = dist(rng);
  for (int i = 0; i < n; ++i) b.labels.push_back(static_cast<int32_t>(rng() % m.num_classes()));
  return b;
}

// Central differences of the mean loss against the analytic gradient on a sample of
// parameters. ReLU / max-pool kinks make a few coordinates unreliable; the error over the
// whole sample must still be small, which a wrong sign or a missing term would break.
void check_model_gradient(nn::Model& m, int batch, int samples, float eps, double max_rel_error) {
  const Batch b = random_batch(m, batch, 17);
  m.forward(b.x, b.labels.data(), true);
  m.backward();
  const Tensor& g = m.store().grad_arena();
  const std::vector<float> grad(g.data<float>(), g.data<float>() + g.numel());
  float* values = m.store().param_arena().data<float>();
  // Sample per parameter tensor so every layer is covered, not only the big ones.
  int bad = 0, total = 0;
  double err2 = 0, ref2 = 0;
  std::mt19937_64 rng(5);
  for (const Param& p : m.store().params()) {
    for (int s = 0; s < samples; ++s) {
      const int64_t i = p.offset + static_cast<int64_t>(rng() % p.value.numel());
      const float v = values[i];
      values[i] = v + eps;
      const double fp = m.forward(b.x, b.labels.data(), true);
      values[i] = v - eps;
      const double fm = m.forward(b.x, b.labels.data(), true);
      values[i] = v;
      const double fd = (fp - fm) / (static_cast<double>(v + eps) - static_cast<double>(v - eps));
      err2 += (fd - grad[i]) * (fd - grad[i]);
      ref2 += fd * fd;
      ++total;
      if (std::abs(fd - grad[i]) >
          3e-4 + 0.05 * std::max(std::abs(fd), std::abs(double{grad[i]}))) {
        ++bad;
        std::cout << "  off: " << p.name << "[" << i - p.offset << "]: analytic " << grad[i]
                  << " numeric " << fd << "\n";
      }
    }
  }
  // float32 differences through a deep net with batch statistics are noisy (PyTorch's own
  // float32 gradients differ from float64 by ~1e-2 on such nets); a real bug is far off.
  EXPECT_LT(std::sqrt(err2), max_rel_error * std::sqrt(ref2));
  EXPECT_LE(bad, total / 5);
}

TEST(ModelGradient, Lenet5) {
  auto m = make_model(options("lenet5", 10, 1, 28, 28));
  check_model_gradient(*m, 2, 4, 1e-3f, 0.05);
}

TEST(Lenet5, MatchesReferenceLayerOrder) {
  // lenet5 runs conv -> maxpool+ReLU with NHWC activations; the textbook order is
  // conv+ReLU -> maxpool with oneDNN's layouts. Same seed, same parameters: the loss and
  // every gradient must agree to float rounding.
  const ModelOptions o = options("lenet5", 10, 1, 28, 28);
  auto fast = make_model(o);
  nn::Model ref("lenet5_ref", Shape{1, 28, 28}, 10, o.seed);
  ref.add<nn::Conv2d>("conv1", nn::Conv2dOptions{1, 6, 5, 1, 2, true, /*fuse_relu=*/true});
  ref.add<nn::Pool2d>("pool1", nn::max_pool(2, 2));
  ref.add<nn::Conv2d>("conv2", nn::Conv2dOptions{6, 16, 5, 1, 0, true, true});
  ref.add<nn::Pool2d>("pool2", nn::max_pool(2, 2));
  ref.add<nn::Flatten>("flatten");
  ref.add<nn::Linear>("fc1", nn::LinearOptions{400, 120, true});
  ref.add<nn::ReLU>("fc1.relu");
  ref.add<nn::Linear>("fc2", nn::LinearOptions{120, 84, true});
  ref.add<nn::ReLU>("fc2.relu");
  ref.add<nn::Linear>("fc3", nn::LinearOptions{84, 10, true});
  ref.build();
  ASSERT_EQ(params_of(*fast), params_of(ref));

  for (int batch : {5, 64}) {
    const Batch b = random_batch(ref, batch, 31 + batch);
    int64_t hits_fast = 0, hits_ref = 0;
    const float loss_fast = fast->forward(b.x, b.labels.data(), true, &hits_fast);
    const float loss_ref = ref.forward(b.x, b.labels.data(), true, &hits_ref);
    EXPECT_NEAR(loss_fast, loss_ref, 1e-5f * std::abs(loss_ref));
    EXPECT_EQ(hits_fast, hits_ref);
    fast->backward();
    ref.backward();
    const Tensor& gf = fast->store().grad_arena();
    const Tensor& gr = ref.store().grad_arena();
    ASSERT_EQ(gf.numel(), gr.numel());
    double err2 = 0, ref2 = 0, max_err = 0;
    for (int64_t i = 0; i < gr.numel(); ++i) {
      const double d = gf.data<float>()[i] - gr.data<float>()[i];
      err2 += d * d;
      ref2 += double{gr.data<float>()[i]} * gr.data<float>()[i];
      max_err = std::max(max_err, std::abs(d));
    }
    EXPECT_LT(std::sqrt(err2), 1e-5 * std::sqrt(ref2)) << "batch " << batch;
    EXPECT_LT(max_err, 1e-5) << "batch " << batch;
  }
}

TEST(ModelGradient, Resnet20) {
  // 16x16 keeps 4x4 maps in the last stage, so batch statistics are not degenerate.
  auto m = make_model(options("resnet20", 10, 3, 16, 16));
  check_model_gradient(*m, 8, 2, 1e-3f, 0.1);
}

TEST(ModelGradient, Mlp) {
  ModelOptions o = options("mlp", 10, 1, 6, 6);
  o.hidden = {16, 12};
  auto m = make_model(o);
  check_model_gradient(*m, 3, 5, 1e-3f, 0.05);
}

TEST(GradReadyHook, ResNet18ReverseRegistrationOrder) {
  auto m = make_model(options("resnet18", 10, 3, 32, 32));
  std::vector<const Param*> seen;
  m->set_grad_ready_hook([&](const Param& p) { seen.push_back(&p); });
  const Batch b = random_batch(*m, 2, 3);
  m->forward(b.x, b.labels.data(), true);
  m->backward();
  ASSERT_EQ(seen.size(), m->store().params().size());
  for (std::size_t i = 0; i < seen.size(); ++i)
    EXPECT_EQ(seen[i], &m->store().params()[seen.size() - 1 - i]) << seen[i]->name;
}

TEST(Training, Resnet20LossDecreasesWithPlainSgd) {
  // A smoke test that the pieces fit: a few SGD steps on one batch must lower its loss.
  auto m = make_model(options("resnet20", 10, 3, 16, 16));
  const Batch b = random_batch(*m, 8, 9);
  const float first = m->forward(b.x, b.labels.data(), true);
  for (int step = 0; step < 10; ++step) {
    m->backward();
    float* w = m->store().param_arena().data<float>();
    const float* g = m->store().grad_arena().data<float>();
    for (int64_t i = 0; i < m->store().param_arena().numel(); ++i) w[i] -= 0.05f * g[i];
    m->forward(b.x, b.labels.data(), true);
  }
  EXPECT_LT(m->forward(b.x, b.labels.data(), true), 0.7f * first);
}

// The gradient plan (nn/gradient_plan.hpp) shares backward's buffers between layers; the
// same model with every buffer separate must give bit-identical gradients, step after step
// (a buffer reused while still needed would change them), with far fewer bytes.
void expect_plan_matches_separate_buffers(const ModelOptions& o, int batch, double max_ratio) {
  auto planned = make_model(o);
  auto separate = make_model(o);
  separate->set_gradient_plan_enabled(false);
  for (int step = 0; step < 2; ++step) {
    const Batch b = random_batch(*planned, batch, 40 + step);
    const float loss_planned = planned->forward(b.x, b.labels.data(), true);
    const float loss_separate = separate->forward(b.x, b.labels.data(), true);
    EXPECT_EQ(loss_planned, loss_separate) << o.name << " step " << step;
    planned->backward();
    separate->backward();
    const Tensor& gp = planned->store().grad_arena();
    const Tensor& gs = separate->store().grad_arena();
    ASSERT_EQ(gp.numel(), gs.numel());
    EXPECT_EQ(0, std::memcmp(gp.raw(), gs.raw(), gp.nbytes())) << o.name << " step " << step;
  }
  const nn::GradientPlan& plan = planned->gradient_plan();
  EXPECT_EQ(separate->gradient_plan().arena_bytes(), 0u);
  EXPECT_GT(plan.buffer_count(), 2u);
  std::cout << "  " << o.name << ": planned " << plan.arena_bytes() << " of "
            << plan.separate_bytes() << " bytes\n";
  EXPECT_LT(static_cast<double>(plan.arena_bytes()), max_ratio * plan.separate_bytes())
      << o.name << ": " << plan.arena_bytes() << " of " << plan.separate_bytes() << " bytes";
}

TEST(GradientPlan, Resnet20SharesBuffersBitIdentical) {
  expect_plan_matches_separate_buffers(options("resnet20", 10, 3, 16, 16), 4, 0.2);
}

TEST(GradientPlan, Resnet18ProjectionShortcutsBitIdentical) {
  expect_plan_matches_separate_buffers(options("resnet18", 10, 3, 32, 32), 2, 0.35);
}

TEST(GradientPlan, Resnet50BottlenecksBitIdentical) {
  expect_plan_matches_separate_buffers(options("resnet50", 10, 3, 32, 32), 2, 0.2);
}

TEST(GradientPlan, Lenet5AndMlpBitIdentical) {
  expect_plan_matches_separate_buffers(options("lenet5", 10, 1, 28, 28), 8, 1.0);
  ModelOptions o = options("mlp", 10, 1, 6, 6);
  o.hidden = {16, 12};
  expect_plan_matches_separate_buffers(o, 3, 1.0);
}

}  // namespace
}  // namespace sdp::models
