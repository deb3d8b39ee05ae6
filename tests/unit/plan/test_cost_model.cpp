// The cost model of `sdp-train plan` (plan/cost_model.hpp): each algorithm's formula, the
// auto rule, and the reducer's schedule of buckets against backward.
#include <gtest/gtest.h>

#include "plan/cost_model.hpp"

namespace sdp::plan {
namespace {

Network link(double gbit, double latency_us) {
  Network n;
  n.link_bytes_per_s = gbit * 1e9 / 8;
  n.latency_s = latency_us * 1e-6;
  n.intra_bytes_per_s = 10e9;
  n.convert_bytes_per_s = 4e9;
  return n;
}

TEST(CostModel, RingAndHierarchicalFollowTheirFormulas) {
  const Network net = link(1, 100);  // 125 MB/s, 100 us
  const double s = 64e6;
  const Topology two_by_two{2, 2};
  // ring over 4 ranks: 6 steps of s/4, each waits for the inter-node edge.
  EXPECT_NEAR(allreduce_seconds(AllreduceKind::kRing, Compression::kNone, s, two_by_two, net),
              6 * (100e-6 + s / 4 / 125e6), 1e-9);
  // hierarchical: node phase 2(r-1)/r s at 10 GB/s, then 2(N-1) latencies and 2(N-1)/N s on the link.
  EXPECT_NEAR(allreduce_seconds(AllreduceKind::kHierarchical, Compression::kNone, s, two_by_two, net),
              s / 10e9 + 2 * 100e-6 + s / 125e6, 1e-9);
  // Compression halves what crosses nodes and adds two passes over s.
  EXPECT_NEAR(allreduce_seconds(AllreduceKind::kHierarchical, Compression::kFp16, s, two_by_two, net),
              s / 10e9 + 2 * 100e-6 + s / 2 / 125e6 + 2 * s / 4e9, 1e-9);
  // Across nodes the hierarchical algorithm moves fewer bytes per link than a ring of 4.
  EXPECT_LT(allreduce_seconds(AllreduceKind::kHierarchical, Compression::kNone, s, two_by_two, net),
            allreduce_seconds(AllreduceKind::kRing, Compression::kNone, s, two_by_two, net));
}

TEST(CostModel, FlatTakesRecursiveDoublingForSmallBuffers) {
  const Network net = link(10, 50);
  const Topology eight{8, 1};
  const double small = 1024, big = 64e6;
  const double doubling = 3 * (50e-6 + small / 1.25e9);
  EXPECT_NEAR(allreduce_seconds(AllreduceKind::kFlat, Compression::kNone, small, eight, net), doubling, 1e-12);
  EXPECT_NEAR(allreduce_seconds(AllreduceKind::kFlat, Compression::kNone, big, eight, net),
              allreduce_seconds(AllreduceKind::kRing, Compression::kNone, big, eight, net), 1e-12);
}

// With r ranks a node, recursive doubling's first log2 r exchanges stay in the node, and in
// each later one the node's r ranks send their buffers over its one link together.
TEST(CostModel, DoublingsAcrossNodesShareTheNodesLink) {
  const Network net = link(10, 50);  // 1.25 GB/s, 50 us; the node at 10 GB/s
  const double small = 4096;
  const Topology four_by_four{4, 4};  // 16 ranks: 2 exchanges in the node, 2 across
  EXPECT_NEAR(allreduce_seconds(AllreduceKind::kFlat, Compression::kNone, small, four_by_four, net),
              2 * small / 10e9 + 2 * (50e-6 + 4 * small / 1.25e9), 1e-12);
  // Sharing the link costs more than the one rank a node that doubled before.
  EXPECT_GT(allreduce_seconds(AllreduceKind::kFlat, Compression::kNone, small, four_by_four, net),
            allreduce_seconds(AllreduceKind::kFlat, Compression::kNone, small, Topology{4, 1}, net) +
                2 * 3 * small / 1.25e9 - 1e-12);
}

// Host jobs cross nodes through MPI: a message above the eager limit costs a rendezvous round
// trip before its data, and MPI_Allreduce (flat) takes the ring from 10,000 bytes on, as Open
// MPI's fixed rule does. GPU jobs (NCCL) have neither.
TEST(CostModel, MpiMessagesAboveTheEagerLimitPayARendezvous) {
  Network net = link(1, 2000);  // 125 MB/s, 2 ms: a long link
  net.rendezvous_above_bytes = kMpiTcpEagerBytes;
  const Topology two{2, 1};
  const double big = 1e6, small = 4096;
  // ring over 2 ranks: 2 steps of big / 2 (above the limit: 3 latencies each).
  EXPECT_NEAR(allreduce_seconds(AllreduceKind::kRing, Compression::kNone, big, two, net),
              2 * (3 * 2e-3 + big / 2 / 125e6), 1e-12);
  EXPECT_NEAR(allreduce_seconds(AllreduceKind::kFlat, Compression::kNone, big, two, net),
              allreduce_seconds(AllreduceKind::kRing, Compression::kNone, big, two, net), 1e-12)
      << "MPI_Allreduce takes the ring above 10,000 bytes, though doubling would be cheaper here";
  // Below the eager limit and below 10,000 bytes: one doubling step, one latency.
  EXPECT_NEAR(allreduce_seconds(AllreduceKind::kFlat, Compression::kNone, small, two, net), 2e-3 + small / 125e6, 1e-12);
  // The socket ring under hierarchical has no rendezvous.
  EXPECT_NEAR(allreduce_seconds(AllreduceKind::kHierarchical, Compression::kNone, big, two, net),
              2 * 2e-3 + big / 125e6, 1e-12);
  // Without MPI (a GPU job's NCCL): one latency a step, and flat the cheaper of the two.
  net.rendezvous_above_bytes = 0;
  EXPECT_NEAR(allreduce_seconds(AllreduceKind::kFlat, Compression::kNone, big, two, net), 2e-3 + big / 125e6, 1e-12);
}

// A calibration's measured MPI messages replace a + m/B and the rendezvous' 2a for host jobs:
// on a long link a message of some hundred KB costs more round trips than the formula's three
// (TCP's window), which the curve holds. A network that differs from the one it was measured
// on (a busy core's later messages, a lower share of the link) adds the difference.
TEST(CostModel, MeasuredMpiMessagesReplaceTheFormula) {
  Network net = link(1, 4000);  // 125 MB/s, 4 ms one way
  net.rendezvous_above_bytes = kMpiTcpEagerBytes;
  const Topology two{2, 1};
  const double bytes = 256e3;  // a ring of 2: two messages of 128 KB
  const double formula = 2 * (3 * 4e-3 + bytes / 2 / 125e6);
  EXPECT_NEAR(allreduce_seconds(AllreduceKind::kRing, Compression::kNone, bytes, two, net), formula, 1e-12);
  // As measured on the simulated hosts with 2 ms a link: 128 KiB took 16.5 ms one way, 3.9a.
  net.mpi_message = {
      Curve({{8, 4e-3}, {4096, 4.1e-3}, {16e3, 6.4e-3}, {64e3, 7.2e-3}, {65e3, 16e-3}, {512e3, 16.8e-3}, {16e6, 140e-3}}),
      4e-3, 125e6};
  const double measured_step = net.mpi_message.curve.at(bytes / 2);
  EXPECT_GT(measured_step, 3 * 4e-3 + bytes / 2 / 125e6);
  EXPECT_NEAR(allreduce_seconds(AllreduceKind::kRing, Compression::kNone, bytes, two, net), 2 * measured_step, 1e-12);
  EXPECT_NEAR(allreduce_seconds(AllreduceKind::kFlat, Compression::kNone, bytes, two, net), 2 * measured_step, 1e-12);
  // Recursive doubling's one exchange (below 10,000 bytes): the curve at the whole buffer.
  EXPECT_NEAR(allreduce_seconds(AllreduceKind::kFlat, Compression::kNone, 4096, two, net), net.mpi_message.curve.at(4096),
              1e-12);
  // The socket ring under hierarchical is not MPI: the formula.
  EXPECT_NEAR(allreduce_seconds(AllreduceKind::kHierarchical, Compression::kNone, bytes, two, net),
              2 * 4e-3 + bytes / 125e6, 1e-12);
  // On busy cores: each message 1 ms later and half the link.
  net.shared_core.latency_s = 1e-3;
  net.shared_core.link_share[AllreduceKind::kRing] = 0.5;
  const Network busy = net.on_busy_cores(AllreduceKind::kRing);
  EXPECT_NEAR(busy.crossing_seconds(bytes / 2), measured_step + 1e-3 + bytes / 2 / 125e6, 1e-12);
  // A GPU job's NCCL has no MPI messages: the formula, the curve unused.
  net.rendezvous_above_bytes = 0;
  EXPECT_NEAR(net.crossing_seconds(bytes / 2), 4e-3 + bytes / 2 / 125e6, 1e-12);
  // Never below the formula: a ping-pong that crossed faster than the link's rate (a shaped
  // link's saved-up burst) is not what back-to-back ring steps find.
  net.rendezvous_above_bytes = kMpiTcpEagerBytes;
  net.mpi_message.curve = Curve({{8, 4e-3}, {128e3, 5e-3}, {16e6, 140e-3}});
  EXPECT_NEAR(net.crossing_seconds(128e3), 3 * 4e-3 + 128e3 / 125e6, 1e-12);
}

// A calibration's measured socket ring steps replace the hierarchical inter-node phase's
// a + m/B for host jobs, keyed by the bytes a node sends in a step (S / nodes), so that a
// calibration on 2 nodes prices the 2(N-1) steps of N nodes; GPU jobs (NCCL) keep the formula.
TEST(CostModel, MeasuredSocketRingStepsReplaceTheFormula) {
  Network net = link(1, 4000);  // 125 MB/s, 4 ms one way
  net.rendezvous_above_bytes = kMpiTcpEagerBytes;
  const double bytes = 256e3;
  const double formula_step = 4e-3 + bytes / 2 / 125e6;
  EXPECT_NEAR(allreduce_seconds(AllreduceKind::kHierarchical, Compression::kNone, bytes, {2, 1}, net),
              2 * formula_step, 1e-12);
  // As measured on the simulated hosts with 2 ms a link: a step of 128 KiB took 5.8 ms.
  net.socket_step = net.measured_here(Curve({{4e3, 3.9e-3}, {32e3, 4.9e-3}, {128e3, 5.8e-3}, {8e6, 70e-3}}));
  const double step = net.socket_step.curve.at(bytes / 2);
  EXPECT_GT(step, formula_step);
  EXPECT_NEAR(allreduce_seconds(AllreduceKind::kHierarchical, Compression::kNone, bytes, {2, 1}, net), 2 * step,
              1e-12);
  // 4 nodes: 6 steps of a quarter; 2 ranks a node add their node phase, not more steps.
  EXPECT_NEAR(allreduce_seconds(AllreduceKind::kHierarchical, Compression::kNone, bytes, {4, 1}, net),
              6 * net.socket_step.curve.at(bytes / 4), 1e-12);
  EXPECT_NEAR(allreduce_seconds(AllreduceKind::kHierarchical, Compression::kNone, bytes, {4, 2}, net),
              intra_node_seconds(bytes, 2, net) + 6 * net.socket_step.curve.at(bytes / 4), 1e-12);
  // fp16 on the wire: steps of half the bytes.
  EXPECT_NEAR(allreduce_seconds(AllreduceKind::kHierarchical, Compression::kFp16, bytes, {2, 1}, net),
              2 * net.socket_step.curve.at(bytes / 4) + 2 * bytes / net.convert_bytes_per_s, 1e-12);
  // MPI's algorithms keep MPI's messages (here the formula): the ring is not MPI.
  EXPECT_NEAR(allreduce_seconds(AllreduceKind::kRing, Compression::kNone, bytes, {2, 1}, net),
              2 * (3 * 4e-3 + bytes / 2 / 125e6), 1e-12);
  // On busy cores: each step 1 ms later and half the link.
  net.shared_core.latency_s = 1e-3;
  net.shared_core.link_share[AllreduceKind::kHierarchical] = 0.5;
  EXPECT_NEAR(net.on_busy_cores(AllreduceKind::kHierarchical).socket_step_seconds(bytes / 2),
              step + 1e-3 + bytes / 2 / 125e6, 1e-12);
  // Never below the formula (4 KB measured in 3.9 ms: a saved-up burst); a GPU job's NCCL: the formula.
  EXPECT_NEAR(net.socket_step_seconds(4e3), 4e-3 + 4e3 / 125e6, 1e-12);
  net.rendezvous_above_bytes = 0;
  EXPECT_NEAR(net.socket_step_seconds(bytes / 2), formula_step, 1e-12);
}

// A calibration's measured ring and MPI_Allreduce steps (every rank sending and receiving at
// once) price host jobs' ring and flat, each its own, keyed by the bytes a rank sends in a step
// (S / n), wherever they are slower than a message one way; recursive doubling (flat under
// 10,000 bytes) keeps the message curve, and GPU jobs (NCCL) the formula.
TEST(CostModel, MeasuredRingAndMpiAllreduceStepsPriceTheStepsAboveAMessage) {
  Network net = link(10, 60);  // 1.25 GB/s, 60 us one way
  net.rendezvous_above_bytes = kMpiTcpEagerBytes;
  net.mpi_message = net.measured_here(Curve({{8, 60e-6}, {4096, 65e-6}, {128e3, 430e-6}, {16e6, 19.6e-3}}));
  const double bytes = 256e3;
  const double one_way = net.mpi_message.curve.at(bytes / 2);
  EXPECT_NEAR(allreduce_seconds(AllreduceKind::kRing, Compression::kNone, bytes, {2, 1}, net), 2 * one_way, 1e-12);
  // As measured on the simulated hosts' 10 Gbit/s wires: steps of 128 KB took 545 us in the
  // ring and 530 us in MPI_Allreduce, where a message one way took 430 us.
  net.ring_step = net.measured_here(Curve({{8e3, 40e-6}, {32e3, 160e-6}, {128e3, 545e-6}, {8e6, 13e-3}}));
  net.flat_step = net.measured_here(Curve({{8e3, 80e-6}, {32e3, 150e-6}, {128e3, 530e-6}, {8e6, 12e-3}}));
  EXPECT_NEAR(allreduce_seconds(AllreduceKind::kRing, Compression::kNone, bytes, {2, 1}, net), 2 * 545e-6, 1e-12);
  EXPECT_NEAR(allreduce_seconds(AllreduceKind::kFlat, Compression::kNone, bytes, {2, 1}, net), 2 * 530e-6, 1e-12);
  // 4 ranks (2 nodes of 2): 6 steps of a quarter each.
  EXPECT_NEAR(allreduce_seconds(AllreduceKind::kRing, Compression::kNone, bytes, {2, 2}, net),
              6 * net.ring_step.curve.at(bytes / 4), 1e-12);
  // Recursive doubling's exchange keeps the message curve; the socket ring is not MPI.
  EXPECT_NEAR(allreduce_seconds(AllreduceKind::kFlat, Compression::kNone, 4096, {2, 1}, net),
              net.mpi_message.curve.at(4096), 1e-12);
  EXPECT_NEAR(allreduce_seconds(AllreduceKind::kHierarchical, Compression::kNone, bytes, {2, 1}, net),
              2 * (60e-6 + bytes / 2 / 1.25e9), 1e-12);
  // Never below a message one way (8 KB: steps measured in 40 us, a message in 76.5 us).
  EXPECT_NEAR(net.mpi_step_seconds(AllreduceKind::kRing, 8e3), net.mpi_message.curve.at(8e3), 1e-12);
  EXPECT_GT(net.mpi_message.curve.at(8e3), 40e-6);
  // On busy cores: each step 0.1 ms later.
  net.shared_core.latency_s = 1e-4;
  EXPECT_NEAR(net.on_busy_cores(AllreduceKind::kRing).mpi_step_seconds(AllreduceKind::kRing, bytes / 2),
              545e-6 + 1e-4, 1e-12);
  // A GPU job's NCCL: the formula.
  net.rendezvous_above_bytes = 0;
  EXPECT_NEAR(net.mpi_step_seconds(AllreduceKind::kRing, bytes / 2), 60e-6 + bytes / 2 / 1.25e9, 1e-12);
}

TEST(CostModel, AutoResolvesAsTheRunnerDoes) {
  EXPECT_EQ(resolve_auto(1024, {2, 2}), AllreduceKind::kFlat);  // latency-bound across nodes
  EXPECT_EQ(resolve_auto(64e6, {2, 2}), AllreduceKind::kHierarchical);
  EXPECT_EQ(resolve_auto(64e6, {4, 1}), AllreduceKind::kFlat);
  // A host job's gradients are in node-shared memory: the runner's auto takes hierarchical
  // with one rank per node too (AutoAllreduce::choose), small buffers still flat.
  EXPECT_EQ(resolve_auto(64e6, {4, 1}, /*host_gradients=*/true), AllreduceKind::kHierarchical);
  EXPECT_EQ(resolve_auto(1024, {4, 1}, true), AllreduceKind::kFlat);
}

TEST(CostModel, OneNodeCostsTheNodePhaseAndOneRankNothing) {
  Network net = link(1, 100);
  EXPECT_EQ(allreduce_seconds(AllreduceKind::kRing, Compression::kNone, 1e6, {1, 1}, net), 0.0);
  net.intra = Curve({{1e3, 1e-5}, {1e6, 1e-3}});
  net.intra_ranks = 2;
  EXPECT_NEAR(allreduce_seconds(AllreduceKind::kFlat, Compression::kNone, 1e6, {1, 2}, net), 1e-3, 1e-12);
  // A measured curve serves only the rank count it was measured for.
  EXPECT_NEAR(intra_node_seconds(1e6, 4, net), 2 * 0.75 * 1e6 / 10e9, 1e-12);
}

TEST(CostModel, CurveInterpolatesAndExtends) {
  const Curve curve({{1e6, 2e-3}, {1e3, 1e-4}, {4e6, 5e-3}});  // sorted on construction
  EXPECT_DOUBLE_EQ(curve.at(10), 1e-4);  // below the first point: latency-bound
  EXPECT_NEAR(curve.at(2.5e6), 3.5e-3, 1e-12);
  EXPECT_NEAR(curve.at(7e6), 8e-3, 1e-12);  // beyond: the last segment's bandwidth
}

// Three parameters of 1 MiB each; backward finishes the last first, as it runs.
ComputeProfile three_layers() {
  ComputeProfile c;
  c.forward_s = 0.010;
  c.backward_s = 0.030;
  c.optimizer_s = 0.002;
  c.element_size = 4;
  const int64_t mib = (1 << 20) / 4;
  c.params = {{0, mib}, {mib, mib}, {2 * mib, mib}};
  c.arena_elements = 3 * mib;
  c.ready_s = {0.030, 0.020, 0.010};
  return c;
}

TEST(StepModel, BucketsOverlapBackwardAndOnlyTheTailIsExposed) {
  const ComputeProfile c = three_layers();
  // 1 MiB buckets, 8 ms each: ready at 10, 20, 30 ms -> ends 18, 28, 38: 8 ms exposed.
  const StepPrediction small = predict_step(c, 1.0, [](double, bool) { return BucketCost{0.008}; }, 0.001);
  EXPECT_EQ(small.buckets, 3);
  EXPECT_NEAR(small.exposed_s, 0.008, 1e-12);
  EXPECT_NEAR(small.comm_s, 0.024, 1e-12);
  EXPECT_NEAR(small.step_s, 0.010 + 0.030 + 0.008 + 0.002 + 0.001, 1e-12);
  // One bucket waits for the last gradient: all of its time is exposed.
  const StepPrediction one = predict_step(c, 0, [](double bytes, bool) { return BucketCost{bytes / (3 << 20) * 0.024}; }, 0.0);
  EXPECT_EQ(one.buckets, 1);
  EXPECT_NEAR(one.exposed_s, 0.024, 1e-12);
  // Buckets slower than backward queue behind each other: 10+12=22, 34, 46 -> 16 ms exposed.
  const StepPrediction slow = predict_step(c, 1.0, [](double, bool) { return BucketCost{0.012}; }, 0.0);
  EXPECT_NEAR(slow.exposed_s, 0.016, 1e-12);
}

// A CPU rank whose compute threads fill its CPUs cannot communicate while backward computes:
// every bucket waits for backward's end, so small buckets only add their latencies.
TEST(StepModel, WithoutOverlapEveryBucketIsExposed) {
  const ComputeProfile c = three_layers();
  const StepPrediction small = predict_step(c, 1.0, [](double, bool) { return BucketCost{0.008}; }, 0.001, Overlap::kAfterBackward);
  EXPECT_EQ(small.buckets, 3);
  EXPECT_NEAR(small.exposed_s, 0.024, 1e-12);
  EXPECT_NEAR(small.step_s, 0.010 + 0.030 + 0.024 + 0.002 + 0.001, 1e-12);
  // Latency-bound buckets: three of 1 MiB cost more than one of 3 MiB once none overlaps.
  const auto latency_bound = [](double bytes, bool) { return BucketCost{0.004 + bytes / (3 << 20) * 0.003}; };
  EXPECT_GT(predict_step(c, 1.0, latency_bound, 0.0, Overlap::kAfterBackward).step_s, predict_step(c, 0, latency_bound, 0.0, Overlap::kAfterBackward).step_s);
  EXPECT_LT(predict_step(c, 1.0, latency_bound, 0.0, Overlap::kOwnCore).step_s, predict_step(c, 0, latency_bound, 0.0, Overlap::kOwnCore).step_s);
}

// A CPU rank whose threads fill its cores, with the costs of sharing them calibrated: buckets
// still leave as they become ready, but each one sent while backward runs waits longer and
// takes compute from backward, which then ends later.
TEST(StepModel, OnASharedCoreBucketsOverlapAndLengthenBackward) {
  const ComputeProfile c = three_layers();  // 1 MiB ready at 10, 20, 30 ms of a 30 ms backward
  const double mib = 1 << 20;
  // 8 ms a bucket on idle cores, 9 ms when it starts while backward computes; 2 ms of compute
  // lost per MiB AllReduced.
  const auto seconds = [&](double, bool core_busy) { return BucketCost{core_busy ? 0.009 : 0.008, 0.002 / mib}; };
  const StepPrediction shared = predict_step(c, 1.0, seconds, 0.0, Overlap::kSharedCore);
  // Backward B = 30 + stolen. Buckets at 10 -> 19, 20 -> 29 (both within B, 2 ms each), the
  // third ready at 30 * B/30 = B: it starts as backward ends, on idle cores (8 ms, nothing
  // stolen). So B = 34 ms, ready times stretched by 34/30: 11.3 -> 20.3, 22.7 -> 31.7, 34 -> 42.
  EXPECT_NEAR(shared.stolen_s, 0.004, 1e-9);
  EXPECT_NEAR(shared.exposed_s, 0.008, 1e-9);
  EXPECT_NEAR(shared.comm_s, 0.009 + 0.009 + 0.008, 1e-9);
  EXPECT_NEAR(shared.step_s, 0.010 + 0.034 + 0.008 + 0.002, 1e-9);
  // Free of cost, a shared core is an own core; uncalibrated, every bucket waits for backward.
  const auto same = [](double, bool) { return BucketCost{0.008}; };
  EXPECT_NEAR(predict_step(c, 1.0, same, 0.0, Overlap::kSharedCore).step_s,
              predict_step(c, 1.0, same, 0.0, Overlap::kOwnCore).step_s, 1e-12);
  EXPECT_GT(predict_step(c, 1.0, seconds, 0.0, Overlap::kAfterBackward).step_s, shared.step_s);
  // A bucket only partly inside backward takes from it only for that part: one bucket of
  // 3 MiB ready at the end takes nothing.
  EXPECT_NEAR(predict_step(c, 0, seconds, 0.0, Overlap::kSharedCore).stolen_s, 0.0, 1e-12);
}

// A bucket that starts shortly before backward ends runs at the busy cores' pace only until
// then: however slow busy cores make it (a CPU quota the compute fills), it then costs about
// what it costs on idle cores, not the whole of its busy time.
TEST(StepModel, ABucketPartlyInsideBackwardIsSlowOnlyForThatPart) {
  ComputeProfile c = three_layers();  // backward 30 ms; one bucket of 3 MiB when bucket_mb is 0
  c.ready_s.front() = 0.029;          // the last gradient made 1 ms before backward's end
  // 100 ms on busy cores, 8 ms on idle ones; nothing taken from the compute.
  const auto costs = [](double, bool core_busy) { return BucketCost{core_busy ? 0.100 : 0.008, 0.0}; };
  const StepPrediction p = predict_step(c, 0, costs, 0.0, Overlap::kSharedCore);
  // 1 ms busy (1 % of the bucket), then 99 % of 8 ms idle.
  EXPECT_NEAR(p.comm_s, 0.001 + 0.99 * 0.008, 1e-12);
  EXPECT_NEAR(p.exposed_s, 0.99 * 0.008, 1e-12);
  // A bucket whose whole busy time fits inside backward keeps it.
  const auto quick = [](double, bool core_busy) { return BucketCost{core_busy ? 0.0005 : 0.0004, 0.0}; };
  EXPECT_NEAR(predict_step(c, 0, quick, 0.0, Overlap::kSharedCore).comm_s, 0.0005, 1e-12);
}

TEST(StepModel, TheOverlapFollowsTheCoresAndTheCalibration) {
  Network network;
  EXPECT_EQ(which_overlap(/*gpu=*/true, 1, 1, network), Overlap::kOwnCore);
  EXPECT_EQ(which_overlap(false, 3, 4, network), Overlap::kOwnCore);
  EXPECT_EQ(which_overlap(false, 1, 1, network), Overlap::kAfterBackward) << "not calibrated";
  network.shared_core.measured = true;
  EXPECT_EQ(which_overlap(false, 1, 1, network), Overlap::kSharedCore);
  EXPECT_EQ(which_overlap(false, 4, 4, network), Overlap::kSharedCore);
}

TEST(StepModel, CommunicationOverlapsWhereTheRankHasACoreToSpare) {
  EXPECT_TRUE(communication_overlaps_backward(/*gpu=*/true, 16, 16)) << "the GPU computes";
  EXPECT_FALSE(communication_overlaps_backward(false, 2, 2)) << "threads fill the rank's CPUs";
  EXPECT_FALSE(communication_overlaps_backward(false, 1, 1)) << "one rank pinned to one core";
  EXPECT_TRUE(communication_overlaps_backward(false, 3, 4));
}

}  // namespace
}  // namespace sdp::plan
