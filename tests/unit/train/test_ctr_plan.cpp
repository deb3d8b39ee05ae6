#include <gtest/gtest.h>

#include "ctr/row_exchange.hpp"
#include "train/ctr_plan.hpp"

namespace sdp {
namespace {

// A DeepFM-like profile: 1M rows of 17 floats, batch 4096 of 39 fields, Zipf-like unique ids.
CtrProfile profile() {
  CtrProfile p;
  p.model = "deepfm";
  p.batch_per_rank = 4096;
  p.table_rows = 1000000;
  p.width = 17;
  p.dense_floats = 300000;
  p.compute_s = 0.040;
  p.update_s = 0.010;
  p.update_rows = 30000;
  p.record_s = 50e-9;
  p.unique = {{4096, 30000}, {8192, 50000}, {16384, 80000}, {32768, 120000}};
  return p;
}

plan::Network network(double gbps) {
  plan::Network n;
  n.link_bytes_per_s = gbps * 1e9 / 8;
  n.latency_s = 20e-6;
  n.rendezvous_above_bytes = plan::kMpiTcpEagerBytes;
  n.host_gradients = true;
  return n;
}

TEST(CtrPlan, UniqueIdsFollowTheMeasuredPointsAndStopAtTheTable) {
  const CtrProfile p = profile();
  EXPECT_DOUBLE_EQ(p.unique_among(4096, 39), 30000);
  EXPECT_NEAR(p.unique_among(16384, 39), 80000, 1e-6);
  const double between = p.unique_among(12000, 39);
  EXPECT_GT(between, 50000);
  EXPECT_LT(between, 80000);
  // Beyond the last point: along the last two's slope, growing, never above the table.
  EXPECT_GT(p.unique_among(65536, 39), 120000);
  EXPECT_LE(p.unique_among(1e9, 39), 1000000);
  // Fewer samples than the first point: no more ids than the samples hold.
  EXPECT_LE(p.unique_among(10, 39), 390);
}

TEST(CtrPlan, OneRankIsComputeAndUpdate) {
  CtrProfile p = profile();
  p.data_s = 0.003;
  const CtrStep s = predict_ctr_step(p, network(10), {1, 1}, 39, Compression::kNone, AllreduceKind::kAuto,
                                     RowWay::kSparse);
  EXPECT_DOUBLE_EQ(s.step_s, p.compute_s + p.update_s);  // the batch read is left out
  EXPECT_EQ(s.link_bytes, 0);
}

TEST(CtrPlan, TheUpdateGrowsWithTheRowsTheWorldTouches) {
  const CtrProfile p = profile();
  const CtrStep two = predict_ctr_step(p, network(10), {2, 1}, 39, Compression::kNone, AllreduceKind::kAuto,
                                       RowWay::kSparse);
  EXPECT_NEAR(two.update_s, p.update_s * 50000.0 / 30000.0, 1e-12);
}

TEST(CtrPlan, SparseRowsCrossTheLinkOncePerNodeAndHalfAsManyBytesCompressed) {
  const CtrProfile p = profile();
  const plan::Network net = network(1);
  // 2 nodes of 2 ranks: each node's link carries (N-1) U(2B) records of 8 + 4W bytes.
  const CtrStep f32 = predict_ctr_step(p, net, {2, 2}, 39, Compression::kNone, AllreduceKind::kAuto, RowWay::kSparse);
  EXPECT_NEAR(f32.link_bytes, 50000.0 * (8 + 4 * 17), 1e-6);
  const CtrStep bf16 = predict_ctr_step(p, net, {2, 2}, 39, Compression::kBf16, AllreduceKind::kAuto, RowWay::kSparse);
  EXPECT_NEAR(bf16.link_bytes, 50000.0 * (8 + 2 * 17), 1e-6);
  EXPECT_LT(bf16.rows_s, f32.rows_s);
  // More nodes: more rows cross each link, the exchange takes longer.
  const CtrStep four = predict_ctr_step(p, net, {4, 2}, 39, Compression::kNone, AllreduceKind::kAuto, RowWay::kSparse);
  EXPECT_GT(four.rows_s, f32.rows_s);
}

TEST(CtrPlan, TheDenseWayMovesTheTableWhateverTheBatch) {
  CtrProfile p = profile();
  const plan::Network net = network(1);
  const CtrStep a = predict_ctr_step(p, net, {2, 1}, 39, Compression::kNone, AllreduceKind::kAuto, RowWay::kDense);
  p.unique = {{4096, 300}};
  const CtrStep b = predict_ctr_step(p, net, {2, 1}, 39, Compression::kNone, AllreduceKind::kAuto, RowWay::kDense);
  EXPECT_NEAR(a.link_bytes, b.link_bytes, 1e-6);
  EXPECT_GT(a.link_bytes, 4.0 * 17 * 1e6 * 0.99);  // 2 (N-1)/N of the table's 68 MB
  // At 1 Gbit/s a 68 MB table costs more than a second a step; the sparse rows far less.
  EXPECT_GT(a.rows_s, 0.5);
  const CtrStep sparse = predict_ctr_step(profile(), net, {2, 1}, 39, Compression::kNone, AllreduceKind::kAuto,
                                          RowWay::kSparse);
  EXPECT_LT(sparse.rows_s * 5, a.rows_s);
}

TEST(CtrPlan, AutoTakesTheWayTheRunnerWouldAndTheJobsKeyIsObeyed) {
  CtrPlanSetup setup;
  setup.nodes = {1, 2, 4};
  setup.ranks_per_node = 1;
  setup.fields = 39;
  const auto rows = make_ctr_plan(profile(), network(10), setup);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].scale, 1.0);
  for (const CtrPlanRow& r : rows) {
    const ExchangeBytes bytes = estimate_bytes(std::vector<int>(static_cast<size_t>(r.ranks), 30000), r.nodes, 1, 17,
                                               1000000, 4);
    EXPECT_EQ(r.auto_way, bytes.dense < bytes.sparse ? RowWay::kDense : RowWay::kSparse) << r.nodes;
    EXPECT_EQ(r.job_way, r.auto_way);
    EXPECT_NEAR(r.samples_per_s, r.ranks * 4096 / r.job().step_s, 1e-6);
  }
  // A table smaller than a batch's ids: auto sends the table.
  CtrProfile tiny = profile();
  tiny.table_rows = 100;
  tiny.unique = {{4096, 100}};
  EXPECT_EQ(make_ctr_plan(tiny, network(10), setup)[1].auto_way, RowWay::kDense);
  setup.exchange = "sparse";
  EXPECT_EQ(make_ctr_plan(tiny, network(10), setup)[1].job_way, RowWay::kSparse);
}

TEST(CtrPlan, TheTableNamesItsColumnsAndEveryRow) {
  CtrPlanSetup setup;
  setup.nodes = {1, 2};
  setup.fields = 39;
  setup.samples_per_epoch = 409600;
  const std::string text = format_ctr_plan(profile(), setup, make_ctr_plan(profile(), network(10), setup));
  EXPECT_NE(text.find("nodes ranks   step_ms   samples/s"), std::string::npos) << text;
  EXPECT_NE(text.find("# unique ids among samples"), std::string::npos) << text;
  EXPECT_NE(text.find("\n    2     2 "), std::string::npos) << text;
}

}  // namespace
}  // namespace sdp
