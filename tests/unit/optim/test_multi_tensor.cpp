// The CPU optimizers' multi-tensor pass (optim/multi_tensor.hpp): tensors larger than a
// chunk, parameters with and without weight decay, any thread count. The update's bits must
// not depend on how the work is split, must equal the per-tensor serial loops the pass
// replaced (LAMB, LARS: their norms included), and the finiteness check folded into the pass
// must see a NaN or infinity wherever it is.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "optim/lamb.hpp"
#include "optim/lars.hpp"
#include "optim/multi_tensor.hpp"
#include "optim/norms.hpp"
#include "optim/optimizer_factory.hpp"
#include "optim/update_rules.hpp"

namespace sdp {
namespace {

// Two tensors of several chunks each, with decay, and two small ones without.
struct BigModel {
  ParameterStore store;
  explicit BigModel(uint32_t seed) {
    store.add_parameter("conv.weight", {3 * multi_tensor::kChunkElements + 123});
    store.add_parameter("conv.bias", {300}, /*weight_decay=*/false);
    store.add_parameter("fc.weight", {multi_tensor::kChunkElements + 7});
    store.add_parameter("bn.weight", {17}, /*weight_decay=*/false);
    store.finalize();
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (Param& p : store.params()) {
      float* w = p.value.data<float>();
      for (int64_t i = 0; i < p.value.numel(); ++i) w[i] = normal(rng);
    }
    set_grads(seed + 1);
  }
  void set_grads(uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.01f);
    for (Param& p : store.params()) {
      float* g = p.grad.data<float>();
      for (int64_t i = 0; i < p.grad.numel(); ++i) g[i] = normal(rng);
    }
  }
};

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() && std::memcmp(a.raw(), b.raw(), a.numel() * sizeof(float)) == 0;
}

OptimizerOptions options_for(OptimizerKind kind) {
  OptimizerOptions o;
  o.kind = kind;
  o.weight_decay = 0.01f;
  o.decay_all = false;  // segments of both kinds
  o.nesterov = kind == OptimizerKind::kSgd;
  o.trust_coefficient = 0.02f;
  o.eps = 1e-6f;
  return o;
}

// Three steps of `kind` with `threads` OpenMP threads; the model after them.
std::unique_ptr<BigModel> three_steps(OptimizerKind kind, int threads, std::unique_ptr<Optimizer>* out = nullptr) {
  auto model = std::make_unique<BigModel>(7);
  auto opt = make_optimizer(options_for(kind), model->store);
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  for (int s = 0; s < 3; ++s) {
    model->set_grads(100 + s);
    EXPECT_TRUE(opt->step_checking_gradients(0.05f));
  }
  omp_set_num_threads(before);
  if (out) *out = std::move(opt);
  return model;
}

const OptimizerKind kAll[] = {OptimizerKind::kSgd, OptimizerKind::kAdam, OptimizerKind::kAdamW, OptimizerKind::kLars,
                              OptimizerKind::kLamb};

TEST(MultiTensor, ChunksCoverEveryGroupWithoutCrossingIt) {
  const auto chunks = multi_tensor::split_into_chunks({{0, 2 * multi_tensor::kChunkElements + 5}, {40000, 3}, {50000, 0}});
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(chunks[0].begin, 0);
  EXPECT_EQ(chunks[1].begin, multi_tensor::kChunkElements);
  EXPECT_EQ(chunks[2].count, 5);
  EXPECT_EQ(chunks[2].group, 0);
  EXPECT_EQ(chunks[3].begin, 40000);
  EXPECT_EQ(chunks[3].count, 3);
  EXPECT_EQ(chunks[3].group, 1);
}

TEST(MultiTensor, BitsDoNotDependOnTheThreadCount) {
  for (OptimizerKind kind : kAll) {
    std::unique_ptr<Optimizer> opt1, opt3;
    auto one = three_steps(kind, 1, &opt1);
    auto three = three_steps(kind, 3, &opt3);
    EXPECT_TRUE(same_bits(one->store.param_arena(), three->store.param_arena())) << opt1->name();
    ASSERT_EQ(opt1->state_arenas().size(), opt3->state_arenas().size());
    for (std::size_t k = 0; k < opt1->state_arenas().size(); ++k)
      EXPECT_TRUE(same_bits(opt1->state_arenas()[k].tensor, opt3->state_arenas()[k].tensor))
          << opt1->name() << " " << opt1->state_arenas()[k].name;
  }
}

// The loops the multi-tensor pass replaced: one parameter at a time, serial, the norm of r
// over a recomputed direction. The pass must give these bits exactly (checkpoints and
// bitwise resume across versions rely on it).
TEST(MultiTensor, LambEqualsThePerTensorSerialLoop) {
  auto model = three_steps(OptimizerKind::kLamb, 2);
  BigModel ref(7);
  const LambOptions o{0.9f, 0.999f, 1e-6f, 0.01f};
  std::vector<float> m(ref.store.param_arena().numel()), v(m.size());
  for (int64_t t = 1; t <= 3; ++t) {
    ref.set_grads(100 + static_cast<uint32_t>(t) - 1);
    const float bias1 = static_cast<float>(update_rules::bias_correction(o.beta1, t));
    const float bias2 = static_cast<float>(update_rules::bias_correction(o.beta2, t));
    for (Param& param : ref.store.params()) {
      const int64_t n = param.value.numel();
      float* p = param.value.data<float>();
      const float* g = param.grad.data<float>();
      float* pm = m.data() + param.offset;
      float* pv = v.data() + param.offset;
      for (int64_t i = 0; i < n; ++i) {
        pm[i] = update_rules::first_moment(pm[i], g[i], o.beta1);
        pv[i] = update_rules::second_moment(pv[i], g[i], o.beta2);
      }
      const float wd = param.weight_decay ? o.weight_decay : 0.0f;
      auto r = [=](int64_t i) { return update_rules::lamb_direction(pm[i], pv[i], p[i], bias1, bias2, o.eps, wd); };
      const float ratio = param.weight_decay ? update_rules::lamb_ratio(l2_norm(p, n), l2_norm_of(n, r)) : 1.0f;
      const float step = 0.05f * ratio;
      for (int64_t i = 0; i < n; ++i) p[i] = update_rules::lamb_step(p[i], r(i), step);
    }
  }
  EXPECT_TRUE(same_bits(model->store.param_arena(), ref.store.param_arena()));
}

TEST(MultiTensor, LarsEqualsThePerTensorSerialLoop) {
  auto model = three_steps(OptimizerKind::kLars, 2);
  BigModel ref(7);
  const OptimizerOptions o = options_for(OptimizerKind::kLars);
  std::vector<float> vel(ref.store.param_arena().numel());
  for (int t = 1; t <= 3; ++t) {
    ref.set_grads(100 + static_cast<uint32_t>(t) - 1);
    for (Param& param : ref.store.params()) {
      const int64_t n = param.value.numel();
      float* p = param.value.data<float>();
      const float* g = param.grad.data<float>();
      float* pv = vel.data() + param.offset;
      float scale = 0.05f, wd = 0.0f;
      if (param.weight_decay) {
        wd = o.weight_decay;
        const double local_lr =
            update_rules::lars_local_lr(l2_norm(p, n), l2_norm(g, n), o.trust_coefficient, wd, o.eps);
        scale = static_cast<float>(double{0.05f} * local_lr);
      }
      for (int64_t i = 0; i < n; ++i) {
        pv[i] = update_rules::lars_velocity(pv[i], g[i], p[i], o.momentum, scale, wd);
        p[i] -= pv[i];
      }
    }
  }
  EXPECT_TRUE(same_bits(model->store.param_arena(), ref.store.param_arena()));
}

// A NaN or an infinity in any gradient, in a big tensor's last chunk or in a small tensor
// without decay, makes step_checking_gradients say so; finite gradients never do.
TEST(MultiTensor, FoldedFinitenessCheckFindsEveryBadGradient) {
  const float bad_values[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity()};
  for (OptimizerKind kind : kAll) {
    for (const char* where : {"conv.weight", "bn.weight"}) {
      for (float bad : bad_values) {
        BigModel model(3);
        auto opt = make_optimizer(options_for(kind), model.store);
        EXPECT_TRUE(opt->step_checking_gradients(0.05f)) << opt->name();
        Param* target = nullptr;
        for (Param& p : model.store.params())
          if (p.name == where) target = &p;
        ASSERT_NE(target, nullptr);
        target->grad.data<float>()[target->grad.numel() - 1] = bad;
        EXPECT_FALSE(opt->step_checking_gradients(0.05f)) << opt->name() << " " << where << " " << bad;
      }
    }
  }
}

}  // namespace
}  // namespace sdp
