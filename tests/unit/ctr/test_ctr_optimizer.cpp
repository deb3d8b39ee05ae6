// The sparse optimizers: lazy on the table (untouched rows and their state keep their bits),
// each rule against a scalar reference, state through a checkpoint round trip.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "ctr/ctr_optimizer.hpp"

namespace sdp {
namespace {

CtrModelShape tiny_fm() {
  CtrModelShape s;
  s.kind = CtrModelKind::kFm;
  s.fields = 2;
  s.rows = 6;
  s.embedding_size = 2;
  return s;
}

SparseRows rows_of(const std::vector<int64_t>& ids, int width, float value) {
  SparseRows r;
  r.width = width;
  r.ids = ids;
  r.rows.assign(ids.size() * width, value);
  return r;
}

OptimizerSpec spec_of(OptimizerKind kind) {
  OptimizerSpec o;
  o.name = kind;
  o.momentum = 0.9;
  o.initial_accumulator = 0.1;
  return o;
}

class EveryOptimizer : public ::testing::TestWithParam<OptimizerKind> {};

TEST_P(EveryOptimizer, UpdatesOnlyTheTouchedRows) {
  CtrModel model(tiny_fm(), 5);
  const std::vector<float> before = model.table();
  CtrOptimizer opt(spec_of(GetParam()), 0.01, model);
  const int width = model.shape().width();
  std::vector<float> dense_grad(model.dense().size(), 0.5f);
  opt.step(0.1f, dense_grad, rows_of({1, 4}, width, 0.25f));
  opt.step(0.1f, dense_grad, rows_of({4}, width, -0.5f));
  for (int64_t r = 0; r < 6; ++r)
    for (int j = 0; j < width; ++j) {
      const size_t i = r * width + j;
      if (r == 1 || r == 4)
        EXPECT_NE(model.table()[i], before[i]) << "row " << r;
      else
        EXPECT_EQ(model.table()[i], before[i]) << "row " << r;
    }
  // The state of an untouched row is still its start: a third step on row 2 alone moves it
  // exactly as a first step would on a fresh optimizer.
  CtrModel fresh(tiny_fm(), 5);
  CtrOptimizer fresh_opt(spec_of(GetParam()), 0.01, fresh);
  fresh_opt.step(0.1f, dense_grad, rows_of({2}, width, 0.25f));
  opt.step(0.1f, dense_grad, rows_of({2}, width, 0.25f));
  if (GetParam() != OptimizerKind::kAdam) {  // Adam's bias correction follows the global step count
    for (int j = 0; j < width; ++j) EXPECT_EQ(model.table()[2 * width + j], fresh.table()[2 * width + j]);
  }
}

TEST_P(EveryOptimizer, StateRoundTripsThroughTensors) {
  CtrModel a(tiny_fm(), 5), b(tiny_fm(), 5);
  CtrOptimizer oa(spec_of(GetParam()), 0.0, a), ob(spec_of(GetParam()), 0.0, b);
  const int width = a.shape().width();
  std::vector<float> dense_grad(a.dense().size(), 0.5f);
  oa.step(0.1f, dense_grad, rows_of({1, 3}, width, 0.25f));
  ob.load_state(oa.state_tensors(), "test");
  b.load(a.named_tensors(), "test");
  oa.step(0.1f, dense_grad, rows_of({3, 5}, width, -0.75f));
  ob.step(0.1f, dense_grad, rows_of({3, 5}, width, -0.75f));
  EXPECT_EQ(a.table(), b.table());
  EXPECT_EQ(a.dense(), b.dense());
  EXPECT_EQ(oa.steps(), ob.steps());
}

// The memory check before a model exists counts the state the optimizer then keeps.
TEST_P(EveryOptimizer, TableStateFloatsAreWhatItKeeps) {
  CtrModel model(tiny_fm(), 5);
  for (double momentum : {0.0, 0.9}) {
    OptimizerSpec spec = spec_of(GetParam());
    spec.momentum = momentum;
    const CtrOptimizer opt(spec, 0.0, model);
    const auto floats = static_cast<int64_t>(model.table().size() + model.dense().size());
    EXPECT_EQ(opt.state_bytes(), floats * 4 * CtrOptimizer::table_state_floats(spec)) << "momentum " << momentum;
  }
}

INSTANTIATE_TEST_SUITE_P(Ctr, EveryOptimizer,
                         ::testing::Values(OptimizerKind::kSgd, OptimizerKind::kAdam, OptimizerKind::kAdagrad,
                                           OptimizerKind::kFtrl),
                         [](const auto& info) { return to_string(info.param); });

// One parameter, one gradient, each rule by hand.
float one_step(OptimizerKind kind, float p0, float g, double l2, int steps, OptimizerSpec o = {}) {
  CtrModelShape s;
  s.kind = CtrModelKind::kLr;
  s.fields = 1;
  s.rows = 1;
  CtrModel model(s, 1);
  model.table()[0] = p0;
  o.name = kind;
  CtrOptimizer opt(o, l2, model);
  std::vector<float> dense_grad(model.dense().size(), 0.0f);
  for (int i = 0; i < steps; ++i) opt.step(0.1f, dense_grad, rows_of({0}, 1, g));
  return model.table()[0];
}

TEST(CtrOptimizerRules, AdagradFtrlAdamSgdMomentumByHand) {
  OptimizerSpec o;
  o.initial_accumulator = 0.1;
  o.eps = 1e-8;
  // adagrad: g' = g + l2 p; acc = 0.1 + g'^2; p -= lr g' / (sqrt(acc) + eps)
  {
    const double gp = 0.3 + 0.01 * 2.0, acc = 0.1 + gp * gp;
    EXPECT_NEAR(one_step(OptimizerKind::kAdagrad, 2.0f, 0.3f, 0.01, 1, o), 2.0 - 0.1 * gp / (std::sqrt(acc) + 1e-8), 1e-6);
  }
  // ftrl: n' = 0.1 + g^2; z = g - (sqrt(n') - sqrt(0.1)) / lr * p; p = -z / (sqrt(n') / lr) (l1 = 0)
  {
    const double g = 0.3, n = 0.1 + g * g, z = g - (std::sqrt(n) - std::sqrt(0.1)) / 0.1 * 2.0;
    EXPECT_NEAR(one_step(OptimizerKind::kFtrl, 2.0f, 0.3f, 0.0, 1, o), -z / (std::sqrt(n) / 0.1), 1e-5);
    o.l1 = 100.0;  // |z| <= l1: the weight is exactly 0 (FTRL's sparsity)
    EXPECT_EQ(one_step(OptimizerKind::kFtrl, 2.0f, 0.3f, 0.0, 1, o), 0.0f);
    o.l1 = 0.0;
  }
  // adam, two steps: bias-corrected moments
  {
    double m = 0, v = 0, p = 2.0;
    for (int t = 1; t <= 2; ++t) {
      m = 0.9 * m + 0.1 * 0.3;
      v = 0.999 * v + 0.001 * 0.09;
      p -= 0.1 * (m / (1 - std::pow(0.9, t))) / (std::sqrt(v / (1 - std::pow(0.999, t))) + 1e-8);
    }
    EXPECT_NEAR(one_step(OptimizerKind::kAdam, 2.0f, 0.3f, 0.0, 2, o), p, 1e-5);
  }
  // momentum (TensorFlow's): buf = 0.9 buf + g; p -= lr buf, twice
  {
    o.momentum = 0.9;
    const double p = 2.0 - 0.1 * 0.3 - 0.1 * (0.9 * 0.3 + 0.3);
    EXPECT_NEAR(one_step(OptimizerKind::kSgd, 2.0f, 0.3f, 0.0, 2, o), p, 1e-6);
    o.momentum = 0.0;
    EXPECT_NEAR(one_step(OptimizerKind::kSgd, 2.0f, 0.3f, 0.0, 1, o), 2.0 - 0.03, 1e-6);
  }
}

TEST(CtrOptimizerRules, MissingStateNamesTheSlot) {
  CtrModel a(tiny_fm(), 5);
  CtrOptimizer adam(spec_of(OptimizerKind::kAdam), 0.0, a);
  try {
    adam.load_state({}, "ckpt-000000010.safetensors");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer.m.table"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sdp
