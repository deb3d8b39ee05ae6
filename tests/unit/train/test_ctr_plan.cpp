#include <gtest/gtest.h>

#include <fstream>

#include "core/error.hpp"
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
  p.fields = 39;
  p.width = 17;
  p.samples = 100000;
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
  EXPECT_DOUBLE_EQ(p.unique_among(4096), 30000);
  EXPECT_NEAR(p.unique_among(16384), 80000, 1e-6);
  const double between = p.unique_among(12000);
  EXPECT_GT(between, 50000);
  EXPECT_LT(between, 80000);
  // Beyond the last point: along the last two's slope, growing, never above the table.
  EXPECT_GT(p.unique_among(65536), 120000);
  EXPECT_LE(p.unique_among(1e9), 1000000);
  // Fewer samples than the first point: no more ids than the samples hold.
  EXPECT_LE(p.unique_among(10), 390);
}

TEST(CtrPlan, OneRankIsComputeAndUpdate) {
  CtrProfile p = profile();
  p.data_s = 0.003;
  const CtrStep s = predict_ctr_step(p, network(10), {1, 1}, Compression::kNone, AllreduceKind::kAuto,
                                     RowWay::kSparse);
  EXPECT_DOUBLE_EQ(s.step_s, p.compute_s + p.update_s);  // the batch read is left out
  EXPECT_EQ(s.link_bytes, 0);
}

TEST(CtrPlan, TheUpdateGrowsWithTheRowsTheWorldTouches) {
  const CtrProfile p = profile();
  const CtrStep two = predict_ctr_step(p, network(10), {2, 1}, Compression::kNone, AllreduceKind::kAuto,
                                       RowWay::kSparse);
  EXPECT_NEAR(two.update_s, p.update_s * 50000.0 / 30000.0, 1e-12);
}

TEST(CtrPlan, SparseRowsCrossTheLinkOncePerNodeAndHalfAsManyBytesCompressed) {
  const CtrProfile p = profile();
  const plan::Network net = network(1);
  // 2 nodes of 2 ranks: each node's link carries (N-1) U(2B) records of 8 + 4W bytes.
  const CtrStep f32 = predict_ctr_step(p, net, {2, 2}, Compression::kNone, AllreduceKind::kAuto, RowWay::kSparse);
  EXPECT_NEAR(f32.link_bytes, 50000.0 * (8 + 4 * 17), 1e-6);
  const CtrStep bf16 = predict_ctr_step(p, net, {2, 2}, Compression::kBf16, AllreduceKind::kAuto, RowWay::kSparse);
  EXPECT_NEAR(bf16.link_bytes, 50000.0 * (8 + 2 * 17), 1e-6);
  EXPECT_LT(bf16.rows_s, f32.rows_s);
  // More nodes: more rows cross each link, the exchange takes longer.
  const CtrStep four = predict_ctr_step(p, net, {4, 2}, Compression::kNone, AllreduceKind::kAuto, RowWay::kSparse);
  EXPECT_GT(four.rows_s, f32.rows_s);
}

TEST(CtrPlan, TheDenseWayMovesTheTableWhateverTheBatch) {
  CtrProfile p = profile();
  const plan::Network net = network(1);
  const CtrStep a = predict_ctr_step(p, net, {2, 1}, Compression::kNone, AllreduceKind::kAuto, RowWay::kDense);
  p.unique = {{4096, 300}};
  const CtrStep b = predict_ctr_step(p, net, {2, 1}, Compression::kNone, AllreduceKind::kAuto, RowWay::kDense);
  EXPECT_NEAR(a.link_bytes, b.link_bytes, 1e-6);
  EXPECT_GT(a.link_bytes, 4.0 * 17 * 1e6 * 0.99);  // 2 (N-1)/N of the table's 68 MB
  // At 1 Gbit/s a 68 MB table costs more than a second a step; the sparse rows far less.
  EXPECT_GT(a.rows_s, 0.5);
  const CtrStep sparse = predict_ctr_step(profile(), net, {2, 1}, Compression::kNone, AllreduceKind::kAuto,
                                          RowWay::kSparse);
  EXPECT_LT(sparse.rows_s * 5, a.rows_s);
}

TEST(CtrPlan, AutoTakesTheWayTheRunnerWouldAndTheJobsKeyIsObeyed) {
  CtrPlanSetup setup;
  setup.nodes = {1, 2, 4};
  setup.ranks_per_node = 1;
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
  setup.samples_per_epoch = 409600;
  const std::string text = format_ctr_plan(profile(), setup, make_ctr_plan(profile(), network(10), setup));
  EXPECT_NE(text.find("nodes ranks   step_ms   samples/s"), std::string::npos) << text;
  EXPECT_NE(text.find("# unique ids among samples"), std::string::npos) << text;
  EXPECT_NE(text.find("\n    2     2 "), std::string::npos) << text;
}

// Sharded: each node's unique ids cross to the other nodes' owners, 8 + 8W bytes an id (id
// out, row back, gradient out); each owner updates its share of the world's rows.
TEST(CtrPlan, ShardedRowsCrossOnceEachWayAndTheOwnersShareTheUpdate) {
  const CtrProfile p = profile();
  const plan::Network net = network(1);
  const CtrStep two = predict_ctr_step(p, net, {2, 1}, Compression::kNone, AllreduceKind::kAuto, RowWay::kSharded);
  EXPECT_NEAR(two.link_bytes, 0.5 * 30000 * (8 + 8 * 17), 1e-6);
  EXPECT_NEAR(two.update_s, p.update_s * (50000.0 / 2) / 30000.0, 1e-12);
  const CtrStep replicated = predict_ctr_step(p, net, {2, 1}, Compression::kNone, AllreduceKind::kAuto,
                                              RowWay::kSparse);
  EXPECT_LT(two.update_s, replicated.update_s);
  // One node: nothing crosses a link; 2 nodes of 2 ranks: half the node's unique ids U(2B),
  // deduplicated by its forwarders.
  EXPECT_EQ(predict_ctr_step(p, net, {1, 2}, Compression::kNone, AllreduceKind::kAuto, RowWay::kSharded).link_bytes, 0);
  EXPECT_NEAR(predict_ctr_step(p, net, {2, 2}, Compression::kNone, AllreduceKind::kAuto, RowWay::kSharded).link_bytes,
              0.5 * 50000 * (8 + 8 * 17), 1e-6);
}

// The plan says each placement's memory a rank and takes the faster that fits.
TEST(CtrPlan, BestIsTheFasterPlacementThatFits) {
  CtrPlanSetup setup;
  setup.nodes = {1, 2, 4};
  setup.state_floats = 2;  // Adam
  const double table = 4.0 * 17 * 1e6 * 3;
  setup.rank_memory_bytes = 1e12;
  auto rows = make_ctr_plan(profile(), network(10), setup);
  for (const CtrPlanRow& r : rows) {
    EXPECT_NEAR(r.replicated_bytes, table, 1);
    EXPECT_NEAR(r.sharded_bytes, table / r.ranks, table * 1e-6);
    const bool sharded_faster = r.sharded.step_s < r.step(r.auto_way).step_s;
    EXPECT_STREQ(r.best, sharded_faster ? "sharded" : "replicated") << r.nodes;
  }
  // A rank with room for a third of the table: replicated never fits, sharded from 4 ranks on.
  setup.rank_memory_bytes = table / 3;
  rows = make_ctr_plan(profile(), network(10), setup);
  EXPECT_EQ(rows[0].best, nullptr);
  EXPECT_EQ(rows[1].best, nullptr);
  EXPECT_STREQ(rows[2].best, "sharded");
  setup.sharding = "rows";
  rows = make_ctr_plan(profile(), network(10), setup);
  EXPECT_EQ(rows[1].job_way, RowWay::kSharded);
  const std::string text = format_ctr_plan(profile(), setup, rows);
  EXPECT_NE(text.find("neither-fits"), std::string::npos) << text;
  EXPECT_NE(text.find("table rows (model.embedding_sharding)"), std::string::npos) << text;
}

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(CtrPlan, TheProfileFileGivesBackWhatWasWritten) {
  CtrProfile p = profile();
  p.measured_on = "host, cpu, 2 thread(s)";
  p.data_s = 0.002;
  const CtrProfile back = plan::read_ctr_profile(write_temp("ctr.json", plan::ctr_profile_to_json(p).dump()));
  EXPECT_EQ(back.model, p.model);
  EXPECT_EQ(back.measured_on, p.measured_on);
  EXPECT_EQ(back.batch_per_rank, p.batch_per_rank);
  EXPECT_EQ(back.table_rows, p.table_rows);
  EXPECT_EQ(back.fields, p.fields);
  EXPECT_EQ(back.width, p.width);
  EXPECT_EQ(back.dense_floats, p.dense_floats);
  EXPECT_EQ(back.samples, p.samples);
  EXPECT_EQ(back.data_s, p.data_s);
  EXPECT_EQ(back.compute_s, p.compute_s);
  EXPECT_EQ(back.update_s, p.update_s);
  EXPECT_EQ(back.update_rows, p.update_rows);
  EXPECT_EQ(back.record_s, p.record_s);
  EXPECT_EQ(back.unique, p.unique);
  // The same plan from the file as from the measured profile.
  CtrPlanSetup setup;
  setup.nodes = {1, 2, 4};
  EXPECT_EQ(format_ctr_plan(back, setup, make_ctr_plan(back, network(1), setup)),
            format_ctr_plan(p, setup, make_ctr_plan(p, network(1), setup)));
}

TEST(CtrPlan, AProfileFileNotWrittenBySdpTrainNamesTheKey) {
  const auto expect_error = [](nlohmann::json doc, const std::string& key) {
    const std::string path = write_temp("bad-ctr.json", doc.dump());
    try {
      plan::read_ctr_profile(path);
      ADD_FAILURE() << "no error for " << key;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  const nlohmann::json good = plan::ctr_profile_to_json(profile());
  nlohmann::json doc = good;
  doc.erase("table_rows");
  expect_error(doc, "key 'table_rows' is missing");
  doc = good;
  doc["kind"] = "sdp-train compute profile";  // an image job's step
  expect_error(doc, "key 'kind'");
  doc = good;
  doc["fields"] = "39";
  expect_error(doc, "key 'fields' has the wrong type");
  doc = good;
  doc["table_rows"] = 1e50;  // json's own cast to an integer would be undefined
  expect_error(doc, "key 'table_rows' has the wrong type (number, not an integer)");
  doc = good;
  doc["fields"] = int64_t{1} << 40;  // beyond an int
  expect_error(doc, "key 'fields' is out of range");
  doc = good;
  doc["compute_s"] = -1.0;
  expect_error(doc, "key 'compute_s'");
  doc = good;
  doc["unique"] = nlohmann::json::array({{8192, 50000}, {4096, 30000}});  // not ascending
  expect_error(doc, "key 'unique[1]'");
  doc = good;
  doc["unique"] = nlohmann::json::array({{4096, 4096.0 * 39 + 1}});  // more ids than the samples hold
  expect_error(doc, "key 'unique[0]'");
  doc = good;
  doc["unique"] = nlohmann::json::array();
  expect_error(doc, "key 'unique'");
  doc = good;
  doc["samples"] = 100;  // below one batch
  expect_error(doc, "key 'samples'");
  // And an image job's file is not a CTR profile.
  doc = good;
  doc["kind"] = "sdp-train plan calibration";
  expect_error(doc, "not a sdp-train CTR step profile");
}

}  // namespace
}  // namespace sdp
