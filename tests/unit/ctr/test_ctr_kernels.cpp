// The CTR kernels of every ISA this CPU runs give the baseline's bits; the row accumulator
// sums duplicates in the order they come; AUC and log loss against hand-made cases.
#include <gtest/gtest.h>
#include <omp.h>

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
    std::vector<float> first, deep, sums, logit, grad, act, mask, dact, colsums, prob, dl, p, acc, z, n;
    double loss = 0;
  };
  const auto run = [&](const CtrKernels& kern) {
    Out o;
    o.first.resize(pairs);
    o.deep.resize(pairs * k);
    o.sums.resize(batch * k);
    o.logit.resize(batch);
    o.prob.resize(batch);
    o.dl.resize(batch);
    kern.gather_scaled(table.data(), width, ids.data(), values.data(), 0, pairs, o.first.data(), o.deep.data());
    kern.fm_forward(o.first.data(), o.deep.data(), fields, k, 0, batch, o.sums.data(), o.logit.data());
    RowAccumulator acc;
    acc.reset(width, pairs);
    const uint32_t* slots = acc.assign_slots(ids.data(), pairs);
    const auto slot_count = static_cast<uint32_t>(acc.rows().size());
    kern.add_pair_gradients(o.deep.data(), o.sums.data(), dlogit.data(), ddeep.data(), values.data(), fields, k,
                            slots, 0, pairs, 0, slot_count, acc.row(0));
    o.grad = acc.rows().rows;
    // A hidden layer's epilogue and its backward's column sums, on the product [batch, fields * k].
    o.act = o.deep;
    o.mask.resize(o.act.size());
    std::vector<uint64_t> keys(batch);
    for (int64_t i = 0; i < batch; ++i) keys[i] = 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(i + 1);
    kern.bias_relu_dropout(o.act.data(), values.data(), keys.data(), fields * k, 0, batch, 1u << 31, 2.0f,
                           o.mask.data());
    o.dact = ddeep;
    o.colsums.resize(fields * k);
    kern.mask_column_sums(o.dact.data(), o.mask.data(), batch, fields * k, 0, fields * k, o.colsums.data());
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
    EXPECT_EQ(o.act, base.act);
    EXPECT_EQ(o.mask, base.mask);
    EXPECT_EQ(o.dact, base.dact);
    EXPECT_EQ(o.colsums, base.colsums);
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

// The pairs' gradient rows of a batch of `pairs` pairs over `rows` ids, hot ids repeating.
struct PairBatch {
  int fields = 6, k = 5;
  int64_t batch = 0, pairs = 0;
  std::vector<int64_t> ids;
  std::vector<float> deep, sums, dlogit, ddeep, values;
  PairBatch(int64_t samples, int64_t rows) : batch(samples), pairs(samples * fields) {
    std::mt19937 rng(7);
    for (int64_t p = 0; p < pairs; ++p)
      ids.push_back(static_cast<int64_t>(p % 3 == 0 ? rng() % 8 : rng() % static_cast<uint32_t>(rows)));
    deep = random_floats(pairs * k, 11);
    sums = random_floats(batch * k, 12);
    dlogit = random_floats(batch, 13);
    ddeep = random_floats(pairs * k, 14);
    values = random_floats(pairs, 15);
  }
  // pair_gradients as the header states it, pair p's row.
  std::vector<float> gradient(int64_t p) const {
    const int64_t b = p / fields;
    std::vector<float> g(k + 1);
    g[0] = dlogit[b] * values[p];
    for (int j = 0; j < k; ++j)
      g[1 + j] = (dlogit[b] * (sums[b * k + j] - deep[p * k + j]) + ddeep[p * k + j]) * values[p];
    return g;
  }
};

TEST(CtrKernels, PairGradientsSummedPerSlotAreAddInPairOrder) {
  const PairBatch pb(200, 3000);  // 1,200 pairs, hot ids 0..7
  RowAccumulator expected;
  expected.reset(pb.k + 1, 16);
  const float earlier[] = {1, 2, 3, 4, 5, 6};
  expected.add(5, earlier);  // a slot from before: its sum continues
  for (int64_t p = 0; p < pb.pairs; ++p) expected.add(pb.ids[p], pb.gradient(p).data());
  for (CpuIsa isa : supported_cpu_isas()) {
    SCOPED_TRACE(cpu_isa_name(isa));
    const CtrKernels& kern = ctr_kernels(isa);
    RowAccumulator in_order;
    in_order.reset(pb.k + 1, 16);
    in_order.add(5, earlier);
    const uint32_t* slots = in_order.assign_slots(pb.ids.data(), pb.pairs);
    const auto slot_count = static_cast<uint32_t>(in_order.rows().size());
    // One pass over the pairs in order.
    kern.add_pair_gradients(pb.deep.data(), pb.sums.data(), pb.dlogit.data(), pb.ddeep.data(), pb.values.data(),
                            pb.fields, pb.k, slots, 0, pb.pairs, 0, slot_count, in_order.row(0));
    EXPECT_EQ(in_order.rows().ids, expected.rows().ids);
    EXPECT_EQ(in_order.rows().rows, expected.rows().rows);
    // Slots in uneven ranges, the later first, each a pass over every pair (as threads take
    // them): any split, any order of ranges, the same bits.
    RowAccumulator ranged;
    ranged.reset(pb.k + 1, 16);
    ranged.add(5, earlier);
    const uint32_t* ranged_slots = ranged.assign_slots(pb.ids.data(), pb.pairs);
    const uint32_t split = slot_count / 3;
    for (const auto& range : {std::pair<uint32_t, uint32_t>{split + 1, slot_count}, {0, 1}, {1, split + 1}})
      kern.add_pair_gradients(pb.deep.data(), pb.sums.data(), pb.dlogit.data(), pb.ddeep.data(), pb.values.data(),
                              pb.fields, pb.k, ranged_slots, 0, pb.pairs, range.first, range.second, ranged.row(0));
    EXPECT_EQ(ranged.rows().ids, expected.rows().ids);
    EXPECT_EQ(ranged.rows().rows, expected.rows().rows);
  }
}

TEST(RowAccumulator, AddRowsIsAddInOrderOnAnyThreads) {
  const PairBatch pb(400, 5000);
  std::vector<float> rows;
  for (int64_t p = 0; p < pb.pairs; ++p) {
    const std::vector<float> g = pb.gradient(p);
    rows.insert(rows.end(), g.begin(), g.end());
  }
  RowAccumulator expected;
  expected.reset(pb.k + 1, 4);
  for (int64_t p = 0; p < 100; ++p) expected.add(pb.ids[p], rows.data() + p * (pb.k + 1));
  for (int64_t p = 100; p < pb.pairs; ++p) expected.add(pb.ids[p], rows.data() + p * (pb.k + 1));
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE(threads);
    omp_set_num_threads(threads);
    RowAccumulator acc;
    acc.reset(pb.k + 1, 4);  // grows
    acc.add_rows(pb.ids.data(), rows.data(), 100);
    acc.add_rows(pb.ids.data() + 100, rows.data() + 100 * (pb.k + 1), pb.pairs - 100);  // slots from before continue
    EXPECT_EQ(acc.rows().ids, expected.rows().ids);
    EXPECT_EQ(acc.rows().rows, expected.rows().rows);
  }
  omp_set_num_threads(omp_get_num_procs());
}

TEST(CtrKernels, DropoutDropsItsShareAndKeepsTheRest) {
  const int64_t batch = 64, width = 100;
  std::vector<float> out(batch * width, 1.0f), mask(out.size()), bias(width, 0.0f);
  std::vector<uint64_t> keys(batch);
  for (int64_t i = 0; i < batch; ++i) keys[i] = 0xabcdef12345ULL * static_cast<uint64_t>(i + 3);
  const uint32_t quarter = 1u << 30;  // drop 0.25
  ctr_kernels().bias_relu_dropout(out.data(), bias.data(), keys.data(), width, 0, batch, quarter, 4.0f / 3.0f,
                                  mask.data());
  int64_t dropped = 0;
  for (int64_t i = 0; i < batch * width; ++i) {
    dropped += mask[i] == 0.0f;
    EXPECT_EQ(out[i], mask[i]);
    EXPECT_EQ(mask[i] == 0.0f, dropout_bits(keys[i / width], i % width) < quarter);
  }
  EXPECT_NEAR(static_cast<double>(dropped) / (batch * width), 0.25, 0.02);
  // Negative pre-activations are cut by the ReLU whatever the dropout said.
  std::fill(out.begin(), out.end(), -1.0f);
  ctr_kernels().bias_relu_dropout(out.data(), bias.data(), keys.data(), width, 0, batch, quarter, 4.0f / 3.0f,
                                  mask.data());
  for (float m : mask) EXPECT_EQ(m, 0.0f);
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
