// The files `sdp-train plan` reads (plan/plan_inputs.hpp): round trips, and bad input named
// by file and key. And the plan's choice over algorithms and buckets (plan/scaling_plan.hpp).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.hpp"
#include "plan/calibration.hpp"
#include "plan/plan_inputs.hpp"
#include "plan/scaling_plan.hpp"

namespace sdp::plan {
namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

ComputeProfile profile() {
  ComputeProfile c;
  c.model = "resnet20";
  c.precision = "fp32";
  c.device = "cpu";
  c.measured_on = "test";
  c.batch_per_rank = 32;
  c.forward_s = 0.01;
  c.backward_s = 0.02;
  c.optimizer_s = 0.001;
  c.element_size = 4;
  c.arena_elements = 3000;
  c.params = {{0, 1000}, {1024, 1000}, {2048, 900}};
  c.ready_s = {0.02, 0.015, 0.005};
  return c;
}

// A calibration of `nodes` nodes (h1, h2, ...) of `ranks_per_node` ranks, nothing measured yet.
Calibration calibration_of(int nodes, int ranks_per_node) {
  Calibration c;
  c.date = "2026-11-28";
  for (int n = 1; n <= nodes; ++n) c.hosts += (n > 1 ? ",h" : "h") + std::to_string(n);
  c.nodes = nodes;
  c.ranks_per_node = ranks_per_node;
  return c;
}

void expect_input_error(const std::function<void()>& f, const std::string& fragment) {
  try {
    f();
    FAIL() << "no error; expected one naming " << fragment;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(PlanInputs, ComputeProfileRoundTrips) {
  const std::string path = write_temp("compute.json", compute_profile_to_json(profile()).dump());
  const ComputeProfile back = read_compute_profile(path);
  EXPECT_EQ(back.model, "resnet20");
  EXPECT_EQ(back.batch_per_rank, 32);
  ASSERT_EQ(back.params.size(), 3u);
  EXPECT_EQ(back.params[1].offset, 1024);
  EXPECT_DOUBLE_EQ(back.ready_s[2], 0.005);
}

TEST(PlanInputs, BadComputeFilesNameTheKey) {
  nlohmann::json doc = compute_profile_to_json(profile());
  doc.erase("backward_s");
  const std::string missing = write_temp("missing.json", doc.dump());
  expect_input_error([&] { read_compute_profile(missing); }, "key 'backward_s' is missing");
  doc = compute_profile_to_json(profile());
  doc["params"][1]["offset"] = 10;  // overlaps the first
  const std::string overlap = write_temp("overlap.json", doc.dump());
  expect_input_error([&] { read_compute_profile(overlap); }, "params[1].offset");
  doc = compute_profile_to_json(profile());
  doc["version"] = 99;
  const std::string version = write_temp("version.json", doc.dump());
  expect_input_error([&] { read_compute_profile(version); }, "key 'version'");
  expect_input_error([&] { read_compute_profile("/nonexistent/compute.json"); }, "compute file");
}

TEST(PlanInputs, CalibrationRoundTrips) {
  Calibration c = calibration_of(2, 2);
  c.link_measured = c.intra_measured = c.convert_measured = true;
  c.network.link_bytes_per_s = 1.1e8;
  c.network.latency_s = 9e-5;
  c.network.intra = Curve({{4096, 1e-5}, {65536, 4e-5}});
  c.network.intra_ranks = 2;
  c.network.convert_bytes_per_s = 3e9;
  c.network.mpi_message.curve = Curve({{8, 9e-5}, {131072, 2.1e-3}, {16 << 20, 0.15}});
  c.network.socket_step.curve = Curve({{4096, 1.2e-4}, {131072, 1.4e-3}});
  c.network.ring_step.curve = Curve({{8192, 1.5e-4}, {131072, 1.6e-3}, {8 << 20, 0.08}});
  c.network.flat_step.curve = Curve({{8192, 1.4e-4}});
  const Calibration back = read_calibration(write_temp("cal.json", calibration_to_json(c).dump()));
  EXPECT_DOUBLE_EQ(back.network.link_bytes_per_s, 1.1e8);
  EXPECT_EQ(back.network.intra.points().size(), 2u);
  EXPECT_EQ(back.network.intra_ranks, 2);
  // The message curve comes back with the link it was measured on.
  ASSERT_EQ(back.network.mpi_message.curve.points().size(), 3u);
  EXPECT_DOUBLE_EQ(back.network.mpi_message.curve.at(131072), 2.1e-3);
  EXPECT_DOUBLE_EQ(back.network.mpi_message.latency_s, 9e-5);
  EXPECT_DOUBLE_EQ(back.network.mpi_message.bytes_per_s, 1.1e8);
  ASSERT_EQ(back.network.socket_step.curve.points().size(), 2u);
  EXPECT_DOUBLE_EQ(back.network.socket_step.curve.at(131072), 1.4e-3);
  EXPECT_DOUBLE_EQ(back.network.socket_step.latency_s, 9e-5);
  EXPECT_DOUBLE_EQ(back.network.socket_step.bytes_per_s, 1.1e8);
  ASSERT_EQ(back.network.ring_step.curve.points().size(), 3u);
  EXPECT_DOUBLE_EQ(back.network.ring_step.curve.at(131072), 1.6e-3);
  EXPECT_DOUBLE_EQ(back.network.ring_step.latency_s, 9e-5);
  ASSERT_EQ(back.network.flat_step.curve.points().size(), 1u);
  EXPECT_DOUBLE_EQ(back.network.flat_step.curve.at(8192), 1.4e-4);
  EXPECT_DOUBLE_EQ(back.network.flat_step.bytes_per_s, 1.1e8);
  nlohmann::json doc = calibration_to_json(c);
  doc["link"]["bytes_per_s"] = "fast";
  const std::string bad = write_temp("badcal.json", doc.dump());
  expect_input_error([&] { read_calibration(bad); }, "key 'link.bytes_per_s' has the wrong type");
  doc = calibration_to_json(c);
  doc["link"]["mpi_message"][1][1] = -1;
  const std::string negative = write_temp("badcurve.json", doc.dump());
  expect_input_error([&] { read_calibration(negative); }, "key 'link.mpi_message' must hold [bytes > 0, seconds >= 0]");
  doc = calibration_to_json(c);
  doc["link"]["socket_step"][0] = "slow";
  const std::string bad_step = write_temp("badstep.json", doc.dump());
  expect_input_error([&] { read_calibration(bad_step); }, "key 'link.socket_step' must hold [bytes > 0, seconds >= 0]");
  doc = calibration_to_json(c);
  doc["link"]["flat_step"][0][0] = 0;
  const std::string bad_flat = write_temp("badflat.json", doc.dump());
  expect_input_error([&] { read_calibration(bad_flat); }, "key 'link.flat_step' must hold [bytes > 0, seconds >= 0]");
  // A calibration written before the curves existed: the plan takes the formula.
  doc = calibration_to_json(c);
  doc["link"].erase("mpi_message");
  doc["link"].erase("socket_step");
  doc["link"].erase("ring_step");
  doc["link"].erase("flat_step");
  const Calibration older = read_calibration(write_temp("nocurve.json", doc.dump()));
  EXPECT_TRUE(older.network.mpi_message.empty());
  EXPECT_TRUE(older.network.socket_step.empty());
  EXPECT_TRUE(older.network.ring_step.empty());
  EXPECT_TRUE(older.network.flat_step.empty());
}

TEST(PlanInputs, TheSharedCoreCostsRoundTripAndOlderCalibrationsLackThem) {
  Calibration c = calibration_of(2, 1);
  c.link_measured = c.convert_measured = true;
  c.network.link_bytes_per_s = 1.2e8;
  c.network.latency_s = 2e-5;
  c.network.shared_core.measured = true;
  c.network.shared_core.latency_s = 9e-5;
  c.network.shared_core.s_per_byte = {
      {AllreduceKind::kFlat, 1.2e-9}, {AllreduceKind::kRing, 2.5e-9}, {AllreduceKind::kHierarchical, 1.4e-9}};
  c.network.shared_core.link_share = {
      {AllreduceKind::kFlat, 0.6}, {AllreduceKind::kRing, 0.5}, {AllreduceKind::kHierarchical, 0.95}};
  const Calibration back = read_calibration(write_temp("shared.json", calibration_to_json(c).dump()));
  EXPECT_TRUE(back.network.shared_core.measured);
  EXPECT_DOUBLE_EQ(back.network.shared_core.latency_s, 9e-5);
  EXPECT_DOUBLE_EQ(back.network.shared_core.cost(AllreduceKind::kRing), 2.5e-9);
  EXPECT_DOUBLE_EQ(back.network.shared_core.cost(AllreduceKind::kHierarchical), 1.4e-9);
  EXPECT_DOUBLE_EQ(back.network.shared_core.link_share.at(AllreduceKind::kFlat), 0.6);
  // On busy cores a flat bucket sees 60 % of the link, and each message later.
  const Network busy = back.network.on_busy_cores(AllreduceKind::kFlat);
  EXPECT_DOUBLE_EQ(busy.link_bytes_per_s, 0.6 * 1.2e8);
  EXPECT_DOUBLE_EQ(busy.latency_s, 2e-5 + 9e-5);
  nlohmann::json doc = calibration_to_json(c);
  doc.erase("shared_core");  // a calibration written before the figures existed
  const Calibration old = read_calibration(write_temp("old.json", doc.dump()));
  EXPECT_FALSE(old.network.shared_core.measured);
  EXPECT_EQ(old.network.shared_core.cost(AllreduceKind::kFlat), 0.0);
  doc = calibration_to_json(c);
  doc["shared_core"]["s_per_byte"]["ring"] = -1;
  const std::string negative = write_temp("negative.json", doc.dump());
  expect_input_error([&] { read_calibration(negative); }, "key 'shared_core.s_per_byte.ring' must be a time");
}

// Simulated hosts (network namespaces, distributed.ranks_per_node) share one machine's CPUs,
// and the plan says so wherever its figures were measured on them.
TEST(PlanInputs, TheMachinesACalibrationRanOnRoundTripAndSayWhenNodesShareThem) {
  Calibration c = calibration_of(4, 2);
  c.machines = {1, 8, 2};
  const Calibration back = read_calibration(write_temp("machines.json", calibration_to_json(c).dump()));
  EXPECT_EQ(back.machines.count, 1);
  EXPECT_EQ(back.machines.ranks, 8);
  EXPECT_EQ(back.machines.cpus, 2);
  EXPECT_EQ(shared_machines(back.machines, back.nodes), "4 nodes on 1 machine, 8 ranks on its 2 CPU(s)");
  EXPECT_EQ(shared_machines({2, 4, 2}, 4), "4 nodes on 2 machines, 4 ranks on the most crowded one's 2 CPU(s)");
  EXPECT_EQ(shared_machines({4, 2, 16}, 4), "") << "a machine for each node";
  nlohmann::json doc = calibration_to_json(c);
  doc.erase("machines");  // a calibration written before they were recorded
  const Calibration old = read_calibration(write_temp("nomachines.json", doc.dump()));
  EXPECT_EQ(old.machines.count, 0);
  EXPECT_EQ(shared_machines(old.machines, old.nodes), "") << "not known, not said";
  doc = calibration_to_json(c);
  doc["machines"]["cpus"] = 0;
  const std::string zero = write_temp("zero.json", doc.dump());
  expect_input_error([&] { read_calibration(zero); }, "key 'machines' must hold counts >= 1");
  doc = calibration_to_json(c);
  doc["machines"]["count"] = "one";
  const std::string text = write_temp("text.json", doc.dump());
  expect_input_error([&] { read_calibration(text); }, "key 'machines.count' has the wrong type");
}

TEST(PlanInputs, TheShippedInstanceTableReads) {
  const InstanceTable table = read_instance_table(SDP_SOURCE_DIR "/configs/plan/instances.yaml");
  EXPECT_FALSE(table.source.empty());
  EXPECT_FALSE(table.date.empty());
  const InstanceType& p4d = find_instance(table, "p4d.24xlarge");
  EXPECT_EQ(p4d.accelerators, 8);
  EXPECT_GT(p4d.usd_per_hour, 0);
  expect_input_error([&] { find_instance(table, "p9.huge"); }, "--instance: 'p9.huge'");
  const std::string broken = write_temp("instances.yaml", "source: s\ndate: d\nregion: r\ninstances:\n  x: {gpus: 8}\n");
  expect_input_error([&] { read_instance_table(broken); }, "instances.x.gpu");
}

TEST(ScalingPlan, PicksTheCheapestAlgorithmAndBucketAndChecksNodeCounts) {
  Network net;
  net.link_bytes_per_s = 1.25e8;
  net.latency_s = 1e-4;
  PlanSetup setup;
  setup.nodes = {1, 4};
  setup.ranks_per_node = 2;
  setup.samples_per_epoch = 6400;
  setup.epochs = 2;
  setup.usd_per_node_hour = 3.6;
  const Plan plan = make_plan(profile(), net, setup);
  ASSERT_EQ(plan.rows.size(), 2u);
  for (const PlanRow& row : plan.rows) {
    // The best, or the job's own setting when nothing beats it by kMinimumGain.
    for (const AlgorithmChoice& a : row.per_algorithm) EXPECT_LE(row.best.step.step_s, a.step.step_s * (1 + kMinimumGain));
    EXPECT_LE(row.best.step.step_s, row.job.step.step_s);
    if (row.best.algorithm != row.job.algorithm || row.best.bucket_mb != row.job.bucket_mb)
      EXPECT_LT(row.best.step.step_s * (1 + kMinimumGain), row.job.step.step_s);
  }
  const PlanRow& four = plan.rows[1];
  EXPECT_EQ(four.topology.ranks(), 8);
  EXPECT_NEAR(four.images_per_s, 32.0 * 8 / four.best.step.step_s, 1e-6);
  EXPECT_NEAR(four.epoch_s, 25 * four.best.step.step_s, 1e-9);  // 6400 / 256 steps
  EXPECT_NEAR(four.usd_per_job, 2 * four.epoch_s / 3600 * 3.6 * 4, 1e-9);
  EXPECT_LE(four.efficiency, 1.0);
  // One node of one rank: nothing to communicate, every setting ties, the job's stays.
  setup.nodes = {1};
  setup.ranks_per_node = 1;
  setup.job_algorithm = AllreduceKind::kAuto;
  setup.job_bucket_mb = 25;
  const Plan single = make_plan(profile(), net, setup);
  EXPECT_EQ(single.rows[0].best.algorithm, AllreduceKind::kAuto);
  EXPECT_EQ(single.rows[0].best.bucket_mb, 25);
  // One node of two ranks: every algorithm costs the node phase. A tie with the job's
  // setting keeps it; among algorithms, the tie goes to what auto runs there.
  setup.ranks_per_node = 2;
  net.intra_bytes_per_s = 1e8;  // a slow node: smaller buckets overlap better than one
  EXPECT_EQ(make_plan(profile(), net, setup).rows[0].best.algorithm, AllreduceKind::kAuto);
  ComputeProfile big = profile();  // three 4 MiB gradients: buckets of a few MB differ from one
  big.params = {{0, 1 << 20}, {1 << 20, 1 << 20}, {2 << 20, 1 << 20}};
  big.arena_elements = 3 << 20;
  setup.job_bucket_mb = 0;
  const Plan one_bucket = make_plan(big, net, setup);
  EXPECT_EQ(one_bucket.rows[0].best.algorithm, AllreduceKind::kHierarchical);
  EXPECT_LT(one_bucket.rows[0].best.step.step_s, one_bucket.rows[0].job.step.step_s);
  setup.nodes = {0};
  expect_input_error([&] { make_plan(profile(), net, setup); }, "--nodes");
}

TEST(ScalingPlan, AHostJobsLastBucketCarriesTheAgreementAGpuJobPaysForIt) {
  Network net;
  net.link_bytes_per_s = 1.25e8;
  net.latency_s = 2e-3;  // latency-bound: the agreement's cost shows
  PlanSetup setup;
  setup.nodes = {4};
  const auto fixed_s = [&](bool host, Compression compression) {
    net.host_gradients = host;
    setup.compression = compression;
    return make_plan(profile(), net, setup).rows[0].best.step.fixed_s;
  };
  // A host job without compression: the loss and stop flag ride in the last bucket (DataParallel).
  EXPECT_EQ(fixed_s(true, Compression::kNone), 0.0);
  // A 16-bit wire or a GPU job: one small flat AllReduce, two doublings of 4 nodes.
  const double agreement = allreduce_seconds(AllreduceKind::kFlat, Compression::kNone, 16, {4, 1}, net);
  EXPECT_GE(agreement, 2 * 2e-3);
  EXPECT_DOUBLE_EQ(fixed_s(true, Compression::kFp16), agreement);
  EXPECT_DOUBLE_EQ(fixed_s(false, Compression::kNone), agreement);
  // The plan says which, and its JSON gives the agreement's seconds.
  setup.compression = Compression::kNone;
  net.host_gradients = true;
  Plan plan = make_plan(profile(), net, setup);
  EXPECT_NE(format_plan(plan).find("# the step's agreement (loss, stop): carried in the last gradient bucket"),
            std::string::npos)
      << format_plan(plan);
  EXPECT_EQ(nlohmann::json::parse(plan_to_json(plan))["rows"][0]["best"]["agreement_s"].get<double>(), 0.0);
  net.host_gradients = false;
  plan = make_plan(profile(), net, setup);
  EXPECT_NE(format_plan(plan).find("one 16-byte flat AllReduce per step"), std::string::npos) << format_plan(plan);
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(plan_to_json(plan))["rows"][0]["best"]["agreement_s"].get<double>(), agreement);
}

}  // namespace
}  // namespace sdp::plan
