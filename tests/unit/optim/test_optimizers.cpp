#include <gtest/gtest.h>

#include <array>

#include "config/choices.hpp"
#include "core/error.hpp"
#include "optim/adam.hpp"
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
  Sgd opt(m.store, {});
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
  Sgd opt(m.store, o);
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
  Sgd opt(m.store, o);
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
  Sgd opt(m.store, o);
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
  Sgd opt(m.store, o);
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
  Sgd opt(m.store, o);
  const Values expected[3] = {
      {0.99, -2.02, 0.53}, {0.991, -2.043, 0.537}, {0.9769, -2.0587, 0.5408}};
  run_and_check(opt, m, expected);
}

TEST(Sgd, RejectsWhatPyTorchRejects) {
  Model m;
  SgdOptions o;
  o.nesterov = true;
  EXPECT_THROW(Sgd(m.store, o), InputError);  // nesterov without momentum
  o.momentum = 0.9f;
  o.dampening = 0.1f;
  EXPECT_THROW(Sgd(m.store, o), InputError);  // nesterov with dampening
}

TEST(Adam, NoWeightDecay) {
  // Step 1: m = .1 g, v = .001 g^2; m / (1 - .9) = g, sqrt(v / (1 - .999)) = |g|, so
  // p -= .1 g / (|g| + 1e-8) ~ .1 sign(g): [.9 -2.1 .6] (up to 1e-8 from eps).
  Model m;
  Adam opt(m.store, {});
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
  Adam opt(m.store, o);
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
  Adam opt(m.store, o);
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
  Adam opt(m.store, o);
  const Values expected[3] = {{0.89000001, -2.079999995, 0.5999999967},
                              {0.9177103603, -2.152417953, 0.5806489563},
                              {0.8742091502, -2.170564295, 0.5594041667}};
  run_and_check(opt, m, expected);
}

TEST(Optimizer, StateTensorsArePerParameterViewsForCheckpoints) {
  Model m;
  SgdOptions o;
  o.momentum = 0.9f;
  Sgd opt(m.store, o);
  m.set_grads(kGrads[0]);
  opt.step(0.1f);
  auto state = opt.state_tensors();
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(state[0].name, "w.momentum_buffer");
  EXPECT_EQ(state[0].tensor.shape(), (Shape{2}));
  EXPECT_EQ(state[1].name, "b.momentum_buffer");
  EXPECT_FLOAT_EQ(state[1].tensor.data<float>()[0], -0.3f);

  // Restoring state + step count into a fresh optimizer continues the same trajectory.
  Model m2;
  Sgd opt2(m2.store, o);
  for (std::size_t i = 0; i < state.size(); ++i)
    opt2.state_tensors()[i].tensor.copy_from(state[i].tensor);
  opt2.set_step_count(opt.step_count());
  Tensor arena = m2.store.param_arena();  // a handle sharing the storage
  arena.copy_from(m.store.param_arena());
  m.set_grads(kGrads[1]);
  m2.set_grads(kGrads[1]);
  opt.step(0.1f);
  opt2.step(0.1f);
  EXPECT_EQ(m.values(), m2.values());
}

TEST(OptimizerFactory, BuildsByName) {
  Model m;
  OptimizerOptions spec;
  for (const char* name : {"sgd", "adam", "adamw"}) {
    spec.kind = parse_choice<OptimizerKind>(name);
    EXPECT_STREQ(make_optimizer(spec, m.store)->name(), name);
  }
  EXPECT_THROW(parse_choice<OptimizerKind>("lamb"),
               InputError);  // unknown names stop at the loader
}

}  // namespace
}  // namespace sdp
