#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>
#include <vector>

#include "config/choices.hpp"
#include "core/error.hpp"
#include "optim/adam.hpp"
#include "optim/lamb.hpp"
#include "optim/lars.hpp"
#include "optim/optimizer_factory.hpp"
#include "optim/sgd.hpp"

namespace sdp {
namespace {

// Three scalars in two parameters: w = [1, -2] (weight_decay flag on) and b = [0.5]
// (flag off), the same three gradients every test, lr 0.1.
//
// Reference values: worked by hand below for SGD and the first Adam step; the later Adam
// steps follow the formulas in optim/adam.hpp. All were cross-checked against
// torch.optim (1.13, float64) with the same parameters and gradients.
using Values = std::array<double, 3>;
const Values kGrads[3] = {{0.1, 0.2, -0.3}, {-0.2, 0.1, 0.4}, {0.3, -0.1, 0.05}};

struct Model {
  ParameterStore store;
  Param* w;
  Param* b;
  Model() {
    w = &store.add_parameter("w", {2});
    b = &store.add_parameter("b", {1}, /*weight_decay=*/false);
    store.finalize();
    w->value.data<float>()[0] = 1.0f;
    w->value.data<float>()[1] = -2.0f;
    b->value.data<float>()[0] = 0.5f;
  }
  void set_grads(const Values& g) {
    w->grad.data<float>()[0] = static_cast<float>(g[0]);
    w->grad.data<float>()[1] = static_cast<float>(g[1]);
    b->grad.data<float>()[0] = static_cast<float>(g[2]);
  }
  Values values() const {
    return {w->value.data<float>()[0], w->value.data<float>()[1], b->value.data<float>()[0]};
  }
};

// Runs three steps and compares after each with `expected`.
void run_and_check(Optimizer& opt, Model& m, const Values (&expected)[3], double tol = 2e-6) {
  for (int s = 0; s < 3; ++s) {
    m.set_grads(kGrads[s]);
    opt.step(0.1f);
    Values got = m.values();
    for (int k = 0; k < 3; ++k)
      EXPECT_NEAR(got[k], expected[s][k], tol) << opt.name() << " step " << s + 1 << " value " << k;
  }
  EXPECT_EQ(opt.step_count(), 3);
}

TEST(Sgd, Plain) {
  // p -= 0.1 g: 1 - .01 = .99, -2 - .02 = -2.02, .5 + .03 = .53; then .99 + .02 = 1.01, ...
  Model m;
  SgdCpu opt(m.store, {});
  const Values expected[3] = {{0.99, -2.02, 0.53}, {1.01, -2.03, 0.49}, {0.98, -2.02, 0.485}};
  run_and_check(opt, m, expected);
  EXPECT_TRUE(opt.state_arenas().empty());
}

TEST(Sgd, Momentum) {
  // buf1 = g1 = [.1 .2 -.3] -> p = [.99 -2.02 .53]
  // buf2 = .9 buf1 + g2 = [-.11 .28 .13] -> p = [1.001 -2.048 .517]
  // buf3 = .9 buf2 + g3 = [.201 .152 .167] -> p = [.9809 -2.0632 .5003]
  Model m;
  SgdOptions o;
  o.momentum = 0.9f;
  SgdCpu opt(m.store, o);
  const Values expected[3] = {
      {0.99, -2.02, 0.53}, {1.001, -2.048, 0.517}, {0.9809, -2.0632, 0.5003}};
  run_and_check(opt, m, expected);
}

TEST(Sgd, MomentumWeightDecayOnAllParams) {
  // wd .1 on every param (decay_all, PyTorch's default):
  // g1' = g1 + .1 p = [.2 0 -.25] = buf1 -> p = [.98 -2 .525]
  // g2' = [-.102 -.1 .4525], buf2 = [.078 -.1 .2275] -> p = [.9722 -1.99 .50225]
  // g3' = [.39722 -.299 .100225], buf3 = [.46742 -.389 .304975] -> [.925458 -1.9511 .4717525]
  Model m;
  SgdOptions o;
  o.momentum = 0.9f;
  o.weight_decay = 0.1f;
  SgdCpu opt(m.store, o);
  const Values expected[3] = {
      {0.98, -2.0, 0.525}, {0.9722, -1.99, 0.50225}, {0.925458, -1.9511, 0.4717525}};
  run_and_check(opt, m, expected);
}

TEST(Sgd, WeightDecayOnlyOnFlaggedParams) {
  // decay_all = false: w as above, b (flag off) follows plain momentum: .53, .517, .5003.
  Model m;
  SgdOptions o;
  o.momentum = 0.9f;
  o.weight_decay = 0.1f;
  o.decay_all = false;
  SgdCpu opt(m.store, o);
  const Values expected[3] = {
      {0.98, -2.0, 0.53}, {0.9722, -1.99, 0.517}, {0.925458, -1.9511, 0.5003}};
  run_and_check(opt, m, expected);
}

TEST(Sgd, NesterovWeightDecay) {
  // d = g' + .9 buf with the buffers of MomentumWeightDecayOnAllParams' recurrence:
  // step 1: buf = g' = [.2 0 -.25], d = 1.9 g' = [.38 0 -.475] -> p = [.962 -2 .5475]
  // step 2: g' = [-.1038 -.1 .45475], buf = [.0762 -.1 .22975],
  //         d = [-.03522 -.19 .661525] -> p = [.965522 -1.981 .4813475]
  Model m;
  SgdOptions o;
  o.momentum = 0.9f;
  o.weight_decay = 0.1f;
  o.nesterov = true;
  SgdCpu opt(m.store, o);
  const Values expected[3] = {
      {0.962, -2.0, 0.5475}, {0.965522, -1.981, 0.4813475}, {0.884004882, -1.916261, 0.4440921475}};
  run_and_check(opt, m, expected);
}

TEST(Sgd, Dampening) {
  // buf1 = g1 (no dampening on the first step); buf2 = .9 buf1 + .5 g2 = [-.01 .23 -.07]
  Model m;
  SgdOptions o;
  o.momentum = 0.9f;
  o.dampening = 0.5f;
  SgdCpu opt(m.store, o);
  const Values expected[3] = {
      {0.99, -2.02, 0.53}, {0.991, -2.043, 0.537}, {0.9769, -2.0587, 0.5408}};
  run_and_check(opt, m, expected);
}

TEST(Sgd, RejectsWhatPyTorchRejects) {
  Model m;
  SgdOptions o;
  o.nesterov = true;
  EXPECT_THROW(SgdCpu(m.store, o), InputError);  // nesterov without momentum
  o.momentum = 0.9f;
  o.dampening = 0.1f;
  EXPECT_THROW(SgdCpu(m.store, o), InputError);  // nesterov with dampening
}

TEST(Adam, NoWeightDecay) {
  // Step 1: m = .1 g, v = .001 g^2; m / (1 - .9) = g, sqrt(v / (1 - .999)) = |g|, so
  // p -= .1 g / (|g| + 1e-8) ~ .1 sign(g): [.9 -2.1 .6] (up to 1e-8 from eps).
  Model m;
  AdamCpu opt(m.store, {});
  const Values expected[3] = {{0.90000001, -2.099999995, 0.5999999967},
                              {0.9366103604, -2.193217953, 0.5806489563},
                              {0.9022862539, -2.232888474, 0.5594041667}};
  run_and_check(opt, m, expected);
  ASSERT_EQ(opt.state_arenas().size(), 2u);
  EXPECT_EQ(opt.state_arenas()[0].name, "exp_avg");
}

TEST(Adam, L2WeightDecay) {
  // Step 1: g' = g + .1 p = [.2 0 -.25]; w[1] has g' = 0, so m = v = 0 and it stays -2.
  Model m;
  AdamOptions o;
  o.weight_decay = 0.1f;
  AdamCpu opt(m.store, o);
  const Values expected[3] = {{0.900000005, -2.0, 0.599999996},
                              {0.8771703825, -1.925586328, 0.5665946751},
                              {0.8131607474, -1.846538969, 0.5285328033}};
  run_and_check(opt, m, expected);
}

TEST(AdamW, DecoupledWeightDecay) {
  // Step 1: p *= 1 - .1 * .1 = .99 -> [.99 -1.98 .495], then the Adam step of
  // NoWeightDecay (-.1 sign(g)): [.89 -2.08 .595].
  Model m;
  AdamOptions o;
  o.weight_decay = 0.1f;
  o.decoupled = true;
  AdamCpu opt(m.store, o);
  EXPECT_STREQ(opt.name(), "adamw");
  const Values expected[3] = {{0.89000001, -2.079999995, 0.5949999967},
                              {0.9177103603, -2.152417953, 0.5696989563},
                              {0.8742091502, -2.170564295, 0.5427571772}};
  run_and_check(opt, m, expected);
}

TEST(AdamW, DecayOnlyOnFlaggedParams) {
  // b (flag off) follows plain Adam: the third column of Adam.NoWeightDecay.
  Model m;
  AdamOptions o;
  o.weight_decay = 0.1f;
  o.decoupled = true;
  o.decay_all = false;
  AdamCpu opt(m.store, o);
  const Values expected[3] = {{0.89000001, -2.079999995, 0.5999999967},
                              {0.9177103603, -2.152417953, 0.5806489563},
                              {0.8742091502, -2.170564295, 0.5594041667}};
  run_and_check(opt, m, expected);
}

// --- LARS ------------------------------------------------------------------------------
// Model: ||w|| = sqrt(5) and ||g1|| = sqrt(.05) = .1 sqrt(5) on step 1, so with
// trust_coefficient .5 and weight_decay .1 (eps 0) the local LR is .5 sqrt5 / (.1 sqrt5 +
// .1 sqrt5) = 2.5.

TEST(Lars, HandComputedUpdates) {
  // Step 1, w: g' = g + .1 w = [.2 0]; v = .1 * 2.5 * g' = [.05 0] -> w = [.95 -2].
  //         b (excluded): v = .1 * -.3 = -.03 -> b = .53.
  // Steps 2 and 3 follow the formula of optim/lars.hpp (local LR 2.48769, 2.04232), worked
  // in float64 outside this code; b follows Sgd.Momentum's b column (.517, .5003) because
  // lr is constant.
  Model m;
  LarsOptions o;
  o.momentum = 0.9f;
  o.weight_decay = 0.1f;
  o.trust_coefficient = 0.5f;
  o.eps = 0.0f;
  LarsCpu opt(m.store, o);
  const Values expected[3] = {
      {0.95, -2.0, 0.53}, {0.9311207681, -1.975123078, 0.517}, {0.8338434006, -1.89197232, 0.5003}};
  run_and_check(opt, m, expected);
  ASSERT_EQ(opt.state_arenas().size(), 1u);
  EXPECT_EQ(opt.state_arenas()[0].name, "momentum_buffer");
}

TEST(Lars, DefaultTrustCoefficient) {
  // trust .001, weight decay 5e-4, eps 1e-8: local LR .001 sqrt5 / (sqrt.05 + 5e-4 sqrt5) =
  // .001 / (.1 + 5e-4) = .00995025; w moves by 1e-4 on step 1, b as plain momentum SGD.
  Model m;
  LarsOptions o;
  o.weight_decay = 5e-4f;
  LarsCpu opt(m.store, o);
  const Values expected[3] = {{0.9999, -2.00019801, 0.53},
                              {1.000008519, -2.000474732, 0.517},
                              {0.9998944091, -2.000652602, 0.5003}};
  run_and_check(opt, m, expected);
}

TEST(Lars, ZeroWeightNormOrGradientNormUsesLocalLrOne) {
  LarsOptions o;
  o.momentum = 0.9f;
  o.weight_decay = 0.1f;
  o.trust_coefficient = 0.5f;
  {
    // ||w|| = 0 (a zero-initialized layer): local LR 1, v = .1 (g + .1 * 0) = [.01 .02].
    Model m;
    m.w->value.data<float>()[0] = 0.0f;
    m.w->value.data<float>()[1] = 0.0f;
    LarsCpu opt(m.store, o);
    m.set_grads(kGrads[0]);
    opt.step(0.1f);
    EXPECT_FLOAT_EQ(m.values()[0], -0.01f);
    EXPECT_FLOAT_EQ(m.values()[1], -0.02f);
  }
  {
    // ||g|| = 0: local LR 1, the decay alone: v = .1 * .1 w = [.01 -.02] -> w = [.99 -1.98].
    Model m;
    LarsCpu opt(m.store, o);
    m.set_grads({0.0, 0.0, 0.0});
    opt.step(0.1f);
    EXPECT_FLOAT_EQ(m.values()[0], 0.99f);
    EXPECT_FLOAT_EQ(m.values()[1], -1.98f);
    EXPECT_FLOAT_EQ(m.values()[2], 0.5f);  // excluded: no decay
  }
}

TEST(Lars, RejectsInvalidOptions) {
  Model m;
  LarsOptions o;
  o.trust_coefficient = 0.0f;
  EXPECT_THROW(LarsCpu(m.store, o), InputError);
  o = {};
  o.momentum = 1.0f;
  EXPECT_THROW(LarsCpu(m.store, o), InputError);
  o = {};
  o.weight_decay = -1.0f;
  EXPECT_THROW(LarsCpu(m.store, o), InputError);
}

// --- LAMB ------------------------------------------------------------------------------

TEST(Lamb, HandComputedUpdates) {
  // Step 1: m_hat = g, v_hat = g^2, so with eps 0 and no decay r = sign(g): w gets
  // r = [1 1], ratio ||w|| / ||r|| = sqrt5 / sqrt2 = 1.58114 -> w = [.841886 -2.158114];
  // b (excluded, ratio 1): r = -1 -> b = .6. Later steps worked in float64 by the formula
  // of optim/lamb.hpp (ratios 2.31306, 4.85748).
  Model m;
  LambOptions o;
  o.eps = 0.0f;
  LambCpu opt(m.store, o);
  const Values expected[3] = {{0.841886117, -2.158113883, 0.6},
                              {0.9265679045, -2.373732232, 0.5806489591},
                              {0.7598391585, -2.566431099, 0.5594041688}};
  run_and_check(opt, m, expected);
  ASSERT_EQ(opt.state_arenas().size(), 2u);
  EXPECT_EQ(opt.state_arenas()[0].name, "exp_avg");
  EXPECT_EQ(opt.state_arenas()[1].name, "exp_avg_sq");
}

TEST(Lamb, WeightDecayAndBiasCorrection) {
  // Step 1, w: r = sign(g) + .1 w = [1.1 .8] (eps 1e-8 aside), ratio sqrt5 / sqrt1.85 =
  // 1.64399 -> w = [.819161 -2.131519]. b is excluded from decay and adaptation: it follows
  // plain Adam, the third column of Adam.NoWeightDecay.
  Model m;
  LambOptions o;
  o.weight_decay = 0.1f;
  LambCpu opt(m.store, o);
  const Values expected[3] = {{0.8191611157, -2.131519192, 0.5999999967},
                              {0.9030959681, -2.34388428, 0.5806489563},
                              {0.667857208, -2.431955185, 0.5594041667}};
  run_and_check(opt, m, expected, 5e-6);
}

TEST(Lamb, ZeroNormsUseRatioOne) {
  {
    // ||w|| = 0: ratio 1, so w -= .1 r with r = sign(g): [-.1 -.1].
    Model m;
    m.w->value.data<float>()[0] = 0.0f;
    m.w->value.data<float>()[1] = 0.0f;
    LambCpu opt(m.store, {});
    m.set_grads(kGrads[0]);
    opt.step(0.1f);
    EXPECT_NEAR(m.values()[0], -0.1, 1e-6);
    EXPECT_NEAR(m.values()[1], -0.1, 1e-6);
  }
  {
    // ||r|| = 0 (zero gradient, no decay): ratio 1 and nothing moves, no NaN.
    Model m;
    LambCpu opt(m.store, {});
    m.set_grads({0.0, 0.0, 0.0});
    opt.step(0.1f);
    EXPECT_EQ(m.values(), (Values{1.0, -2.0, 0.5}));
  }
}

TEST(Lamb, RejectsInvalidOptions) {
  Model m;
  LambOptions o;
  o.beta1 = 1.0f;
  EXPECT_THROW(LambCpu(m.store, o), InputError);
  o = {};
  o.eps = -1.0f;
  EXPECT_THROW(LambCpu(m.store, o), InputError);
}

// --- LARS and LAMB against a float64 reference on a larger model ---------------------------
// Four tensors (two adapted, two excluded, sizes that do not divide by 8 so the norms'
// remainder loop runs), ten steps with a changing LR, random values: every value within a
// relative 1e-4 of the reference written here from the formulas of the headers.

using Tensors = std::vector<std::vector<double>>;  // one vector per parameter

struct RandomModel {
  ParameterStore store;
  std::vector<Param*> params;
  std::mt19937 rng{7};
  RandomModel() {
    params.push_back(&store.add_parameter("conv.weight", {3, 7}));
    params.push_back(&store.add_parameter("conv.bias", {3}, false));
    params.push_back(&store.add_parameter("bn.weight", {5}, false));
    params.push_back(&store.add_parameter("fc.weight", {4, 9}));
    store.finalize();
    std::normal_distribution<float> normal(0.0f, 0.5f);
    for (Param* p : params)
      for (int64_t i = 0; i < p->value.numel(); ++i) p->value.data<float>()[i] = normal(rng);
  }
  Tensors random_grads() {
    std::normal_distribution<float> normal(0.0f, 0.1f);
    Tensors g;
    for (Param* p : params) {
      g.emplace_back();
      for (int64_t i = 0; i < p->grad.numel(); ++i) {
        p->grad.data<float>()[i] = normal(rng);
        g.back().push_back(p->grad.data<float>()[i]);
      }
    }
    return g;
  }
  Tensors values() const {
    Tensors w;
    for (Param* p : params)
      w.emplace_back(p->value.data<float>(), p->value.data<float>() + p->value.numel());
    return w;
  }
};

double norm(const std::vector<double>& x) {
  double s = 0;
  for (double e : x) s += e * e;
  return std::sqrt(s);
}

template <typename ReferenceStep>
void compare_with_reference(Optimizer& opt, RandomModel& model, ReferenceStep reference_step) {
  Tensors w = model.values();
  for (int t = 1; t <= 10; ++t) {
    const double lr = 0.05 * t;  // a warm-up, so lr is not constant
    const Tensors g = model.random_grads();
    opt.step(static_cast<float>(lr));
    reference_step(w, g, lr, t);
    const Tensors got = model.values();
    for (std::size_t k = 0; k < w.size(); ++k)
      for (std::size_t i = 0; i < w[k].size(); ++i)
        ASSERT_NEAR(got[k][i], w[k][i], 1e-4 * (1 + std::abs(w[k][i])))
            << opt.name() << " step " << t << " " << model.params[k]->name << "[" << i << "]";
  }
}

TEST(Lars, MatchesFloat64ReferenceOverTenSteps) {
  RandomModel model;
  LarsOptions o;
  o.momentum = 0.9f;
  o.weight_decay = 1e-3f;
  o.trust_coefficient = 0.02f;
  LarsCpu opt(model.store, o);
  Tensors buf;
  for (Param* p : model.params) buf.emplace_back(p->value.numel(), 0.0);
  compare_with_reference(opt, model, [&](Tensors& w, const Tensors& g, double lr, int) {
    for (std::size_t k = 0; k < w.size(); ++k) {
      const bool adapted = model.params[k]->weight_decay;
      const double wd = adapted ? 1e-3 : 0.0;
      double local = 1.0;
      const double wn = norm(w[k]), gn = norm(g[k]);
      if (adapted && wn > 0 && gn > 0) local = 0.02 * wn / (gn + wd * wn + 1e-8);
      for (std::size_t i = 0; i < w[k].size(); ++i) {
        buf[k][i] = 0.9 * buf[k][i] + lr * local * (g[k][i] + wd * w[k][i]);
        w[k][i] -= buf[k][i];
      }
    }
  });
}

TEST(Lamb, MatchesFloat64ReferenceOverTenSteps) {
  RandomModel model;
  LambOptions o;
  o.weight_decay = 0.01f;
  o.eps = 1e-6f;
  LambCpu opt(model.store, o);
  Tensors m, v;
  for (Param* p : model.params) {
    m.emplace_back(p->value.numel(), 0.0);
    v.emplace_back(p->value.numel(), 0.0);
  }
  compare_with_reference(opt, model, [&](Tensors& w, const Tensors& g, double lr, int t) {
    const double b1 = 0.9, b2 = 0.999;
    for (std::size_t k = 0; k < w.size(); ++k) {
      const bool adapted = model.params[k]->weight_decay;
      std::vector<double> r(w[k].size());
      for (std::size_t i = 0; i < r.size(); ++i) {
        m[k][i] = b1 * m[k][i] + (1 - b1) * g[k][i];
        v[k][i] = b2 * v[k][i] + (1 - b2) * g[k][i] * g[k][i];
        const double m_hat = m[k][i] / (1 - std::pow(b1, t));
        const double v_hat = v[k][i] / (1 - std::pow(b2, t));
        r[i] = m_hat / (std::sqrt(v_hat) + 1e-6) + (adapted ? 0.01 * w[k][i] : 0.0);
      }
      double ratio = 1.0;
      const double wn = norm(w[k]), rn = norm(r);
      if (adapted && wn > 0 && rn > 0) ratio = wn / rn;
      for (std::size_t i = 0; i < r.size(); ++i) w[k][i] -= lr * ratio * r[i];
    }
  });
}

// --- State for checkpoints -----------------------------------------------------------------

// One step, then the state views copied into a fresh optimizer of the same kind (the
// checkpoint's round trip): the next step gives the same bits in both.
template <typename Opt, typename Options>
void check_state_round_trip(const Options& o, const std::vector<std::string>& expected_names) {
  Model m;
  Opt opt(m.store, o);
  m.set_grads(kGrads[0]);
  opt.step(0.1f);
  const auto state = opt.state_tensors();
  std::vector<std::string> names;
  for (const auto& s : state) names.push_back(s.name);
  EXPECT_EQ(names, expected_names);

  Model m2;
  Opt opt2(m2.store, o);
  const auto state2 = opt2.state_tensors();
  ASSERT_EQ(state2.size(), state.size());
  for (std::size_t i = 0; i < state.size(); ++i) {
    EXPECT_EQ(state2[i].tensor.shape(), state[i].tensor.shape());
    Tensor view = state2[i].tensor;  // a handle sharing the arena's storage
    view.copy_from(state[i].tensor);
  }
  opt2.set_step_count(opt.step_count());
  Tensor arena = m2.store.param_arena();
  arena.copy_from(m.store.param_arena());
  for (int s = 1; s < 3; ++s) {
    m.set_grads(kGrads[s]);
    m2.set_grads(kGrads[s]);
    opt.step(0.1f);
    opt2.step(0.1f);
    EXPECT_EQ(m.values(), m2.values()) << opt.name() << " step " << s + 1;
  }
}

TEST(Optimizer, StateTensorsArePerParameterViewsForCheckpoints) {
  Model m;
  SgdOptions o;
  o.momentum = 0.9f;
  SgdCpu opt(m.store, o);
  m.set_grads(kGrads[0]);
  opt.step(0.1f);
  auto state = opt.state_tensors();
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(state[0].tensor.shape(), (Shape{2}));
  EXPECT_FLOAT_EQ(state[1].tensor.data<float>()[0], -0.3f);
  check_state_round_trip<SgdCpu>(o, {"w.momentum_buffer", "b.momentum_buffer"});
}

TEST(Optimizer, LarsAndLambStateRoundTrips) {
  LarsOptions lars;
  lars.weight_decay = 0.1f;
  lars.trust_coefficient = 0.5f;
  check_state_round_trip<LarsCpu>(lars, {"w.momentum_buffer", "b.momentum_buffer"});
  LambOptions lamb;
  lamb.weight_decay = 0.1f;
  check_state_round_trip<LambCpu>(lamb, {"w.exp_avg", "b.exp_avg", "w.exp_avg_sq", "b.exp_avg_sq"});
}

TEST(OptimizerFactory, BuildsByName) {
  Model m;
  OptimizerOptions spec;
  for (const char* name : {"sgd", "adam", "adamw", "lars", "lamb"}) {
    spec.kind = parse_choice<OptimizerKind>(name);
    EXPECT_STREQ(make_optimizer(spec, m.store)->name(), name);
  }
  EXPECT_THROW(parse_choice<OptimizerKind>("lion"),
               InputError);  // unknown names stop at the loader
}

}  // namespace
}  // namespace sdp
