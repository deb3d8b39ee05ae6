// The CTR kernels of every ISA this CPU runs give the baseline's bits; the row accumulator
// sums duplicates in the order they come; AUC and log loss against hand-made cases.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "ctr/ctr_data.hpp"
#include "ctr/ctr_kernels.hpp"
#include "ctr/ctr_metrics.hpp"
#include "ctr/sparse_rows.hpp"

namespace sdp {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(CtrKernels, EveryIsaGivesTheBaselinesBits) {
  const int fields = 5, k = 7, width = k + 1;
  const int64_t batch = 9, rows = 30, pairs = batch * fields;
  const std::vector<float> table = random_floats(rows * width, 1);
  std::vector<int64_t> ids(pairs);
  for (int64_t p = 0; p < pairs; ++p) ids[p] = (p * 7) % rows;
  const std::vector<float> values = random_floats(pairs, 2), dlogit = random_floats(batch, 3),
                           ddeep = random_floats(pairs * k, 4), labels(batch, 1.0f);
  struct Out {
    std::vector<float> first, deep, sums, logit, grad, prob, dl, p, acc, z, n;
    double loss = 0;
  };
  const auto run = [&](const CtrKernels& kern) {
    Out o;
    o.first.resize(pairs);
    o.deep.resize(pairs * k);
    o.sums.resize(batch * k);
    o.logit.resize(batch);
    o.grad.resize(pairs * width);
    o.prob.resize(batch);
    o.dl.resize(batch);
    kern.gather_scaled(table.data(), width, ids.data(), values.data(), 0, pairs, o.first.data(), o.deep.data());
    kern.fm_forward(o.first.data(), o.deep.data(), fields, k, 0, batch, o.sums.data(), o.logit.data());
    kern.pair_gradients(o.deep.data(), o.sums.data(), dlogit.data(), ddeep.data(), values.data(), fields, k, 0, batch,
                        o.grad.data());
    o.loss = kern.sigmoid_log_loss(o.logit.data(), labels.data(), 0, batch, 0.5f, o.prob.data(), o.dl.data());
    o.p = table;
    o.acc.assign(table.size(), 0.1f);
    kern.adagrad(o.p.data(), o.grad.data(), o.acc.data(), static_cast<int64_t>(table.size()), 0.1f, 0.01f, 1e-8f);
    o.z.assign(table.size(), 0.0f);
    o.n.assign(table.size(), 0.1f);
    kern.ftrl(o.p.data(), o.grad.data(), o.z.data(), o.n.data(), static_cast<int64_t>(table.size()), 0.1f, 0.001f,
              0.01f);
    return o;
  };
  const Out base = run(ctr_kernels(CpuIsa::baseline));
  for (CpuIsa isa : supported_cpu_isas()) {
    const Out o = run(ctr_kernels(isa));
    SCOPED_TRACE(cpu_isa_name(isa));
    EXPECT_EQ(o.first, base.first);
    EXPECT_EQ(o.deep, base.deep);
    EXPECT_EQ(o.sums, base.sums);
    EXPECT_EQ(o.logit, base.logit);
    EXPECT_EQ(o.grad, base.grad);
    EXPECT_EQ(o.prob, base.prob);
    EXPECT_EQ(o.dl, base.dl);
    EXPECT_EQ(o.loss, base.loss);
    EXPECT_EQ(o.p, base.p);
    EXPECT_EQ(o.acc, base.acc);
    EXPECT_EQ(o.z, base.z);
  }
}

TEST(RowAccumulator, SumsDuplicatesInFirstSeenOrderAndGrows) {
  RowAccumulator acc;
  acc.reset(2, 2);  // fewer than it will get: the hash grows
  const float a[] = {1, 2}, b[] = {10, 20}, c[] = {100, 200};
  for (int i = 0; i < 50; ++i) acc.add(1000 - i, a);
  acc.add(7, b);
  acc.add(1000, c);
  acc.add(7, a);
  const SparseRows& r = acc.rows();
  ASSERT_EQ(r.size(), 51);
  EXPECT_EQ(r.ids[0], 1000);
  EXPECT_EQ(r.row(0)[0], 101.0f);
  EXPECT_EQ(r.ids[50], 7);
  EXPECT_EQ(r.row(50)[1], 22.0f);
  acc.reset(2, 4);
  EXPECT_EQ(acc.rows().size(), 0);
}

TEST(CtrMetrics, AucCountsPairsWithTiesAsHalf) {
  const float labels[] = {0, 0, 1, 1};
  const float perfect[] = {0.1f, 0.2f, 0.8f, 0.9f}, reversed[] = {0.9f, 0.8f, 0.2f, 0.1f}, ties[] = {0.5f, 0.5f, 0.5f, 0.5f};
  EXPECT_DOUBLE_EQ(binary_auc(perfect, labels, 4), 1.0);
  EXPECT_DOUBLE_EQ(binary_auc(reversed, labels, 4), 0.0);
  EXPECT_DOUBLE_EQ(binary_auc(ties, labels, 4), 0.5);
  // 3 of the 4 (positive, negative) pairs ordered right, one tied: (3 + 0.5) / 4.
  const float mixed[] = {0.3f, 0.6f, 0.6f, 0.9f};
  EXPECT_DOUBLE_EQ(binary_auc(mixed, labels, 4), 3.5 / 4);
  EXPECT_TRUE(std::isnan(binary_auc(perfect, ties, 4)));  // one class only
  const float prob[] = {0.25f, 0.75f};
  const float two[] = {0, 1};
  EXPECT_NEAR(binary_log_loss(prob, two, 2), -std::log(0.75), 1e-7);
}

TEST(PlantedCtrSource, SameSamplesForTheSameIndicesAndIdsInTheirFields) {
  PlantedCtrOptions o;
  o.samples = 2000;
  o.fields = 4;
  o.rows = 400;
  o.seed = 3;
  PlantedCtrSource source(o);
  std::vector<int64_t> idx = {5, 1999, 0}, ids(12), again(12);
  std::vector<float> values(12), labels(3), labels2(3);
  source.fill(idx.data(), 3, ids.data(), values.data(), labels.data());
  source.fill(idx.data(), 3, again.data(), values.data(), labels2.data());
  EXPECT_EQ(ids, again);
  EXPECT_EQ(labels, labels2);
  for (int i = 0; i < 12; ++i) {
    const int f = i % 4;
    EXPECT_GE(ids[i], 100 * f);
    EXPECT_LT(ids[i], 100 * (f + 1));
  }
  const double auc = source.planted_auc();
  EXPECT_GT(auc, 0.6);  // the labels follow the planted model
  EXPECT_LT(auc, 1.0);
}

}  // namespace
}  // namespace sdp
