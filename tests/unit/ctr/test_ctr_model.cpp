// The CTR models' backward against finite differences, for every kind and every parameter
// (the table rows a batch touches, the bias, the MLP), with and without dropout.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "ctr/ctr_model.hpp"

namespace sdp {
namespace {

struct SmallBatch {
  std::vector<int64_t> ids, samples;
  std::vector<float> values, labels, prob;
  CtrBatch batch() const { return {static_cast<int64_t>(labels.size()), ids.data(), values.data(), labels.data(), samples.data()}; }
};

SmallBatch make_batch(int fields, int64_t rows) {
  SmallBatch b;
  const int n = 5;
  // Repeated ids inside a sample and across samples: the sparse gradient must sum them.
  const int64_t pattern[] = {0, 3, 3, 7, 1, 2, 9, 0, 4, 5, 6, 7, 8, 3, 2, 1, 0, 9, 9, 5};
  for (int i = 0; i < n * fields; ++i) {
    b.ids.push_back(pattern[i % 20] % rows);
    b.values.push_back(0.5f + 0.1f * static_cast<float>(i % 7));
  }
  b.values[3] = 0.0f;  // a padded pair
  for (int i = 0; i < n; ++i) {
    b.labels.push_back(i % 2 == 0 ? 1.0f : 0.0f);
    b.samples.push_back(100 + i);
  }
  b.prob.resize(n);
  return b;
}

CtrModelShape shape_of(CtrModelKind kind, float dropout = 0.0f) {
  CtrModelShape s;
  s.kind = kind;
  s.fields = 4;
  s.rows = 10;
  s.embedding_size = 3;
  s.hidden = {6, 5};
  s.dropout = dropout;
  return s;
}

// Scaled loss of one forward at a fixed step (the same dropout masks every time), in double.
double loss_of(CtrModel& model, SmallBatch& b, float scale) {
  return scale * model.forward(b.batch(), /*training=*/true, /*step=*/3, b.prob.data());
}

// Checks every dense parameter and every touched row of a model of shape `s`; returns the model
// and its batch for further checks.
CtrModel check_gradients(const CtrModelShape& s, SmallBatch* batch = nullptr) {
  CtrModel model(s, 7);
  // Larger weights than the initialization, so every term moves the loss measurably.
  for (float& v : model.table()) v *= 40.0f;
  SmallBatch b = make_batch(4, 10);
  const float scale = 1.0f / 5.0f;
  loss_of(model, b, scale);
  std::vector<float> dense_grad;
  RowAccumulator rows;
  rows.reset(model.shape().width(), 20);
  model.backward(b.batch(), scale, dense_grad, rows);

  const double eps = 1e-2;
  const auto numeric = [&](float& p) {
    const float keep = p;
    p = keep + static_cast<float>(eps);
    const double up = loss_of(model, b, scale);
    p = keep - static_cast<float>(eps);
    const double down = loss_of(model, b, scale);
    p = keep;
    return (up - down) / (2 * eps);
  };
  const auto expect_close = [](double analytic, double fd, const std::string& what) {
    EXPECT_NEAR(analytic, fd, 2e-3 + 2e-2 * std::fabs(fd)) << what;
  };
  for (size_t i = 0; i < model.dense().size(); ++i)
    expect_close(dense_grad[i], numeric(model.dense()[i]), "dense " + std::to_string(i));
  const SparseRows& g = rows.rows();
  std::vector<bool> touched(10, false);
  const int width = model.shape().width();
  for (int64_t r = 0; r < g.size(); ++r) {
    touched[g.ids[r]] = true;
    for (int j = 0; j < width; ++j)
      expect_close(g.row(r)[j], numeric(model.table()[g.ids[r] * width + j]),
                   "row " + std::to_string(g.ids[r]) + " col " + std::to_string(j));
  }
  // Rows the batch did not touch have no gradient: the loss must not move with them.
  for (int64_t r = 0; r < 10; ++r)
    if (!touched[r]) EXPECT_EQ(numeric(model.table()[r * width + width - 1]), 0.0) << "row " << r;
  if (batch != nullptr) *batch = b;
  return model;
}

void check_gradients(CtrModelKind kind, float dropout) { check_gradients(shape_of(kind, dropout)); }

TEST(CtrModel, DeepFmBackwardMatchesFiniteDifferences) { check_gradients(CtrModelKind::kDeepFm, 0.0f); }
TEST(CtrModel, DeepFmWithDropoutBackwardMatchesFiniteDifferences) { check_gradients(CtrModelKind::kDeepFm, 0.3f); }
TEST(CtrModel, FmBackwardMatchesFiniteDifferences) { check_gradients(CtrModelKind::kFm, 0.0f); }
TEST(CtrModel, LogisticRegressionBackwardMatchesFiniteDifferences) { check_gradients(CtrModelKind::kLr, 0.0f); }

// Our backward's threads split the table rows' sums and the MLP's columns, never an order of
// summation: one thread and three give the same bits (hundreds of ids, so several blocks).
TEST(CtrModel, BackwardGivesTheSameBitsOnAnyThreads) {
  CtrModelShape s = shape_of(CtrModelKind::kDeepFm, 0.3f);
  s.rows = 5000;
  s.hidden = {40, 24};
  const int64_t n = 300;
  std::vector<int64_t> ids, samples;
  std::vector<float> values, labels, prob(n);
  for (int64_t i = 0; i < n * s.fields; ++i) {
    ids.push_back(i % 5 == 0 ? i % 7 : (i * 7919) % s.rows);
    values.push_back(0.25f + 0.125f * static_cast<float>(i % 5));
  }
  for (int64_t i = 0; i < n; ++i) {
    labels.push_back(static_cast<float>(i % 3 == 0));
    samples.push_back(i);
  }
  const CtrBatch batch{n, ids.data(), values.data(), labels.data(), samples.data()};
  const auto run = [&](int threads) {
    omp_set_num_threads(threads);
    CtrModel model(s, 11);
    model.forward(batch, /*training=*/true, /*step=*/5, prob.data());
    std::vector<float> dense_grad;
    RowAccumulator rows;
    rows.reset(model.shape().width(), n * s.fields);
    model.backward(batch, 1.0f / static_cast<float>(n), dense_grad, rows);
    // oneDNN's products may split their sums by the threads: the weights' gradients are left out.
    std::vector<float> ours;
    for (const DenseSegment& seg : model.segments())
      if (seg.shape.size() == 1)
        ours.insert(ours.end(), dense_grad.begin() + seg.offset, dense_grad.begin() + seg.offset + seg.size);
    return std::make_tuple(ours, rows.rows().ids, rows.rows().rows);
  };
  const auto one = run(1), three = run(3);
  omp_set_num_threads(omp_get_num_procs());
  EXPECT_GT(std::get<1>(one).size(), 600u);
  EXPECT_EQ(std::get<0>(one), std::get<0>(three));
  EXPECT_EQ(std::get<1>(one), std::get<1>(three));
  EXPECT_EQ(std::get<2>(one), std::get<2>(three));
}

TEST(CtrModel, FmTermIsTheSampleFormula) {
  // fm: logit = bias + sum_f w x + 0.5 sum_k ((sum_f v x)^2 - sum_f (v x)^2), checked by hand.
  CtrModelShape s = shape_of(CtrModelKind::kFm);
  s.fields = 2;
  CtrModel model(s, 1);
  std::vector<float>& t = model.table();
  const int w = model.shape().width();
  for (int j = 0; j < w; ++j) {
    t[1 * w + j] = 0.1f * (j + 1);  // w=0.1, v=(0.2,0.3,0.4)
    t[2 * w + j] = -0.2f * (j + 1);  // w=-0.2, v=(-0.4,-0.6,-0.8)
  }
  model.dense()[0] = 0.05f;
  std::vector<int64_t> ids = {1, 2}, samples = {0};
  std::vector<float> values = {2.0f, 0.5f}, prob(1);
  CtrBatch b{1, ids.data(), values.data(), nullptr, samples.data()};
  model.forward(b, false, 0, prob.data());
  double linear = 0.1 * 2 + -0.2 * 0.5, fm = 0;
  for (int k = 0; k < 3; ++k) {
    const double a = 0.1 * (k + 2) * 2, c = -0.2 * (k + 2) * 0.5;
    fm += 0.5 * ((a + c) * (a + c) - a * a - c * c);
  }
  const double logit = 0.05 + linear + fm;
  EXPECT_NEAR(prob[0], 1.0 / (1.0 + std::exp(-logit)), 1e-6);
}

TEST(CtrModel, SameSeedSameModelAndTensorsRoundTrip) {
  CtrModel a(shape_of(CtrModelKind::kDeepFm), 11), b(shape_of(CtrModelKind::kDeepFm), 11),
      c(shape_of(CtrModelKind::kDeepFm), 12);
  EXPECT_EQ(a.table(), b.table());
  EXPECT_EQ(a.dense(), b.dense());
  EXPECT_NE(a.table(), c.table());
  c.load(a.named_tensors(), "test");
  EXPECT_EQ(a.table(), c.table());
  EXPECT_EQ(a.dense(), c.dense());
  std::vector<std::string> names;
  for (const NamedTensor& t : a.named_tensors()) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"bias", "first_order.weight", "embedding.weight", "mlp.0.weight",
                                              "mlp.0.bias", "mlp.1.weight", "mlp.1.bias", "output.weight",
                                              "output.bias"}));
}

TEST(CtrModel, LoadRejectsAnotherShapeNamingTheTensor) {
  CtrModel a(shape_of(CtrModelKind::kDeepFm), 1);
  CtrModelShape other = shape_of(CtrModelKind::kDeepFm);
  other.rows = 11;
  CtrModel b(other, 1);
  try {
    b.load(a.named_tensors(), "model.safetensors");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("first_order.weight"), std::string::npos) << e.what();
  }
}

TEST(CtrModel, DropoutMasksFollowTheSampleNotTheBatch) {
  // The same sample at the same step gets the same mask in any batch: a global batch split
  // over ranks trains the same model.
  CtrModel model(shape_of(CtrModelKind::kDeepFm, 0.5f), 3);
  SmallBatch all = make_batch(4, 10);
  model.forward(all.batch(), true, 9, all.prob.data());
  SmallBatch tail = all;
  tail.ids.erase(tail.ids.begin(), tail.ids.begin() + 2 * 4);
  tail.values.erase(tail.values.begin(), tail.values.begin() + 2 * 4);
  tail.labels.erase(tail.labels.begin(), tail.labels.begin() + 2);
  tail.samples.erase(tail.samples.begin(), tail.samples.begin() + 2);
  tail.prob.resize(3);
  model.forward(tail.batch(), true, 9, tail.prob.data());
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(tail.prob[i], all.prob[i + 2], 1e-6);
}

}  // namespace
}  // namespace sdp

namespace sdp {
namespace {

TEST(CtrModel, DeepFmWithBatchNormBackwardMatchesFiniteDifferences) {
  // check_gradients with BatchNorm (and dropout) after each hidden layer.
  CtrModelShape s = shape_of(CtrModelKind::kDeepFm, 0.2f);
  s.batch_norm = true;
  SmallBatch b;
  CtrModel model = check_gradients(s, &b);
  // Running statistics: the model's names, a round trip, and used at test time.
  std::vector<std::string> names;
  for (const NamedTensor& t : model.named_tensors()) names.push_back(t.name);
  EXPECT_NE(std::find(names.begin(), names.end(), "mlp.1.bn.running_var"), names.end());
  model.update_running_stats(model.batch_stats().data());
  CtrModel copy(s, 99);
  copy.load(model.named_tensors(), "test");
  std::vector<float> p1(5), p2(5);
  CtrBatch eval = b.batch();
  eval.labels = nullptr;
  model.forward(eval, false, 0, p1.data());
  copy.forward(eval, false, 0, p2.data());
  EXPECT_EQ(p1, p2);
}

}  // namespace
}  // namespace sdp
