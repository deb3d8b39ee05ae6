// Every AllReduce algorithm against an independent reference (the sum of the known inputs of
// every rank, computed locally), on every topology the world size allows (1x4, 2x2, 4x1 at
// np 4), with buffers in node-shared memory and on the heap.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "config/choices.hpp"
#include "core/error.hpp"
#include "core/parameter_store.hpp"
#include "distributed/allreduce.hpp"
#include "distributed/local_communicator.hpp"
#include "distributed/mpi_communicator.hpp"
#include "distributed/replica_check.hpp"
#include "distributed/shm_collectives.hpp"
#include "distributed/world.hpp"

namespace sdp {
namespace {

// distributed.allreduce and .compression as the job spec spells them.
AllreduceSetup spec_setup(const std::string& algorithm, const std::string& compression,
                          std::shared_ptr<SharedArena> arena) {
  return {parse_choice<AllreduceKind>(algorithm), parse_choice<Compression>(compression),
          std::move(arena)};
}

int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// Small integers: every partial sum is exact in f32 (and in fp16 / bf16 up to 256).
float value(int rank, int64_t i) { return static_cast<float>((i * 7 + rank * 13) % 17 - 8); }

float reference_sum(int n, int64_t i) {
  float s = 0;
  for (int r = 0; r < n; ++r) s += value(r, i);
  return s;
}

constexpr int64_t kLengths[] = {0, 1, 7, 1000003};

// Runs `algorithm` on `data` and checks the result on every element; returns failures.
void check_algorithm(AllreduceAlgorithm& algorithm, float* data, const World& world, ReduceOp op, double tolerance,
                     const std::string& what) {
  const int n = world.size();
  for (int64_t count : kLengths) {
    for (int64_t i = 0; i < count; ++i) data[i] = value(world.rank(), i);
    algorithm.run(CommBuffer::host(data, count), op);
    int64_t bad = -1;
    for (int64_t i = 0; i < count && bad < 0; ++i) {
      const float sum = reference_sum(n, i);
      const double expected = op == ReduceOp::kSum ? sum : static_cast<double>(sum) / n;
      const double err = std::fabs(data[i] - expected);
      if (tolerance == 0 ? (op == ReduceOp::kSum ? data[i] != sum : err > 1e-6 * (std::fabs(expected) + 1))
                         : err > tolerance * (std::fabs(expected) + 1))
        bad = i;
    }
    EXPECT_LT(bad, 0) << what << " count " << count << " op " << reduce_op_name(op) << ": element " << bad
                      << " is " << (bad >= 0 ? data[bad] : 0) << " expected sum " << reference_sum(n, bad);
    // Every rank holds bitwise the same result.
    EXPECT_TRUE(check_replicas(world.comm(), data, count * sizeof(float)).empty()) << what << " count " << count;
  }
}

class AllreduceTopologies : public ::testing::Test {
 protected:
  // ranks_per_node values that divide the ranks sharing memory with me (on one machine,
  // the world: 4 ranks -> 1x4, 2x2, 4x1; across hosts, as on scripts/simcluster.sh, a node
  // cannot span hosts: 2 hosts x 2 ranks -> 4x1, 2x2).
  std::vector<int> topologies() const {
    MPI_Comm shared;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shared);
    int machine = 1;
    MPI_Comm_size(shared, &machine);
    MPI_Comm_free(&shared);
    std::vector<int> out;
    for (int rpn = 1; rpn <= machine; ++rpn)
      if (machine % rpn == 0) out.push_back(rpn);
    return out;
  }
};

TEST_F(AllreduceTopologies, EveryAlgorithmGivesTheExactSumAndAverage) {
  for (int rpn : topologies()) {
    World world = World::create({rpn, std::nullopt});
    auto arena = SharedArena::create(world.intra(), 1000003 * sizeof(float));
    std::vector<float> heap(1000003);
    for (const std::string& name : {"flat", "ring", "hierarchical", "auto"}) {
      auto algorithm = make_allreduce(world, spec_setup(name, "none", arena));
      for (bool shared : {true, false}) {
        float* data = shared ? static_cast<float*>(arena->data()) : heap.data();
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg})
          check_algorithm(*algorithm, data, world, op, 0.0,
                          name + (shared ? " (shared memory)" : " (heap)") + " rpn " + std::to_string(rpn));
      }
    }
  }
}

TEST_F(AllreduceTopologies, CompressionStaysWithinTolerance) {
  for (int rpn : topologies()) {
    World world = World::create({rpn, std::nullopt});
    auto arena = SharedArena::create(world.intra(), 1000003 * sizeof(float));
    for (const std::string& compression : {"fp16", "bf16"}) {
      // bf16 keeps 8 significant bits, fp16 11; n - 1 rounded adds plus two conversions.
      const double tolerance = (compression == "bf16" ? 1.0 / 64 : 1.0 / 512) * world.size();
      for (const std::string& name : {"flat", "ring", "hierarchical"}) {
        auto algorithm = make_allreduce(world, spec_setup(name, compression, arena));
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg})
          check_algorithm(*algorithm, static_cast<float*>(arena->data()), world, op, tolerance,
                          name + " " + compression + " rpn " + std::to_string(rpn));
      }
    }
  }
}

// Where the rank runs under a CPU quota its send/recv waits nap between tests instead of
// spinning in MPI (MpiWait): the ring over such waits gives the same exact sums, bit for bit
// what the polling waits give, also when a peer is late (a wait that outlasts the spin).
TEST(Algorithms, TheRingOverNappingWaitsGivesThePollingRingsBits) {
  World world = World::create({});
  const int n = world.size();
  RingAllreduce polling(std::make_shared<MpiCommunicator>(world.comm(), "world", MpiWait::kPoll));
  RingAllreduce napping(std::make_shared<MpiCommunicator>(world.comm(), "world", MpiWait::kNap));
  for (int64_t count : kLengths) {
    std::vector<float> a(static_cast<std::size_t>(count)), b(a.size());
    for (int64_t i = 0; i < count; ++i) a[i] = b[i] = value(world.rank(), i) / 3.0f;  // inexact sums: order shows
    polling.run(CommBuffer::host(a.data(), count), ReduceOp::kAvg);
    // The last rank starts 5 ms late: the others' first waits nap.
    if (world.rank() == n - 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    napping.run(CommBuffer::host(b.data(), count), ReduceOp::kAvg);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "count " << count;
  }
  float sum = static_cast<float>(world.rank());
  napping.run(CommBuffer::host(&sum, 1), ReduceOp::kSum);
  EXPECT_EQ(sum, static_cast<float>(n * (n - 1) / 2));
}

// And for MPI_Allreduce (flat), which under a quota first meets every rank at a napping
// barrier: the same bits as without it, also with a rank 5 ms late.
TEST(Algorithms, TheFlatAllreduceAfterANappingBarrierGivesThePollingOnesBits) {
  World world = World::create({});
  const int n = world.size();
  MpiCommunicator polling(world.comm(), "world", MpiWait::kPoll);
  MpiCommunicator napping(world.comm(), "world", MpiWait::kNap);
  for (int64_t count : kLengths) {
    std::vector<float> a(static_cast<std::size_t>(count)), b(a.size());
    for (int64_t i = 0; i < count; ++i) a[i] = b[i] = value(world.rank(), i) / 3.0f;
    polling.allreduce(CommBuffer::host(a.data(), count), {ReduceOp::kAvg})->wait();
    if (world.rank() == n - 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    napping.allreduce(CommBuffer::host(b.data(), count), {ReduceOp::kAvg})->wait();
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "count " << count;
  }
}

// The same under a CPU quota for the node phase: a rank that reaches the shared arena's
// barrier first naps, and the node's sums are still bit for bit the polling barrier's, also
// when a rank of the node arrives 5 ms late (a sync that did not wait would read its
// gradients before they were written).
TEST(Algorithms, TheNodePhaseOverANappingBarrierGivesThePollingOnesBits) {
  World world = World::create({});  // one node: the node phase is the whole AllReduce
  const int n = world.local_size();
  const int64_t count = 1000003;
  auto polling = SharedArena::create(world.intra(), count * 4, MpiWait::kPoll);
  auto napping = SharedArena::create(world.intra(), count * 4, MpiWait::kNap);
  float* a = static_cast<float*>(polling->data());
  float* b = static_cast<float*>(napping->data());
  for (int round = 0; round < 2; ++round) {
    for (int64_t i = 0; i < count; ++i) a[i] = value(world.local_rank(), i + round) / 3.0f;
    shm_allreduce(*polling, CommBuffer::host(a, count), 1.0f / n);
    if (world.local_rank() == n - 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    for (int64_t i = 0; i < count; ++i) b[i] = value(world.local_rank(), i + round) / 3.0f;
    shm_allreduce(*napping, CommBuffer::host(b, count), 1.0f / n);
    EXPECT_EQ(0, std::memcmp(a, b, count * sizeof(float))) << "round " << round;
  }
}

TEST(Compression, PreScalingKeepsFp16SumsFromOverflowing) {
  World world = World::create({1, std::nullopt});  // every rank its own node: the inter phase is compressed
  const int n = world.size();
  for (const std::string& name : {"flat", "ring", "hierarchical"}) {
    auto algorithm = make_allreduce(world, spec_setup(name, "fp16", nullptr));
    std::vector<float> data(33, 60000.0f);  // n * 60000 > 65504 for n > 1
    algorithm->run(CommBuffer::host(data.data(), 33), ReduceOp::kSum);
    for (float v : data) ASSERT_NEAR(v, 60000.0 * n, 60000.0 * n / 512) << name;
    std::fill(data.begin(), data.end(), 60000.0f);
    algorithm->run(CommBuffer::host(data.data(), 33), ReduceOp::kAvg);
    for (float v : data) ASSERT_NEAR(v, 60000.0, 60000.0 / 512) << name;
  }
}

TEST(SharedMemory, NodePhasesEqualTheReference) {
  World world = World::create({});
  auto arena = SharedArena::create(world.intra(), 4096 * sizeof(float));
  float* data = static_cast<float*>(arena->data());
  const int local = world.local_size();
  for (int64_t count : {0, 1, 7, 100, 4096}) {
    // Fused reduce + broadcast with an average's scale.
    for (int64_t i = 0; i < count; ++i) data[i] = value(world.local_rank(), i);
    shm_allreduce(*arena, CommBuffer::host(data, count), 0.5f);
    for (int64_t i = 0; i < count; ++i) ASSERT_EQ(data[i], reference_sum(local, i) * 0.5f) << i;
    // The two halves separately, with a marker written in between (the inter-node slot).
    const auto counts = split_counts(count, local, kShmAlign);
    const int64_t begin = part_offsets(counts)[world.local_rank()];
    for (int64_t i = 0; i < count; ++i) data[i] = value(world.local_rank(), i);
    shm_reduce_part(*arena, CommBuffer::host(data, count), counts, 1.0f);
    for (int64_t i = begin; i < begin + counts[world.local_rank()]; ++i) {
      ASSERT_EQ(data[i], reference_sum(local, i)) << i;
      data[i] += 1000.0f;
    }
    shm_broadcast_part(*arena, CommBuffer::host(data, count), counts);
    for (int64_t i = 0; i < count; ++i) ASSERT_EQ(data[i], reference_sum(local, i) + 1000.0f) << i;
  }
  std::vector<float> outside(8);
  EXPECT_THROW(shm_allreduce(*arena, CommBuffer::host(outside.data(), 8), 1.0f), std::logic_error);
}

TEST(SharedMemory, GradientArenaCanLiveInTheWindow) {
  World world = World::create({});
  ParameterStore store;
  store.add_parameter("w", {3, 5});
  store.add_parameter("b", {5}, false);
  store.finalize();
  auto arena = SharedArena::create(world.intra(), static_cast<int64_t>(store.grad_arena().nbytes()));
  store.rebind_grad_arena(arena->owner(), arena->data());
  EXPECT_EQ(store.grad_arena().data<float>(), arena->data());
  EXPECT_EQ(store.params()[1].grad.data<float>(), static_cast<float*>(arena->data()) + store.params()[1].offset);
  std::fill_n(store.grad_arena().data<float>(), store.grad_arena().numel(), static_cast<float>(world.rank() + 1));
  auto algorithm = make_allreduce(world, spec_setup("auto", "none", arena));
  const CommBuffer grads = CommBuffer::host(store.grad_arena().data<float>(), store.grad_arena().numel());
  // A few bytes: shared memory on one node; across nodes (scripts/simcluster.sh) one flat
  // MPI call, faster than two node phases for buffers under kAutoFlatBelowBytes.
  if (world.local_size() > 1)
    EXPECT_EQ(dynamic_cast<AutoAllreduce&>(*algorithm).choice(grads), world.nodes() > 1 ? "flat" : "hierarchical");
  algorithm->run(grads, ReduceOp::kAvg);
  const float mean = (world.size() + 1) / 2.0f;
  for (int64_t i = 0; i < store.grad_arena().numel(); ++i) ASSERT_EQ(store.grad_arena().data<float>()[i], mean);
}

// Host buffers are reduced when run returns: the Work it hands back is already complete.
TEST(Algorithms, WorkOverALocalCommunicator) {
  auto local = std::make_shared<LocalCommunicator>();
  std::vector<float> data = {1, 2, 3};
  EXPECT_TRUE(FlatAllreduce(local).run(CommBuffer::host(data.data(), 3), ReduceOp::kAvg)->test());
  EXPECT_TRUE(RingAllreduce(local).run(CommBuffer::host(data.data(), 3), ReduceOp::kSum)->test());
  EXPECT_TRUE(HierarchicalAllreduce(local, local).run(CommBuffer::host(data.data(), 3), ReduceOp::kAvg)->test());
  EXPECT_TRUE(CompressedAllreduce(std::make_unique<FlatAllreduce>(local), DType::kBF16, 1)
                  .run(CommBuffer::host(data.data(), 3), ReduceOp::kAvg)
                  ->test());
  EXPECT_EQ(data, (std::vector<float>{1, 2, 3}));  // small integers: exact in bf16 too
}

// GPU buffers never reach host arithmetic: the ring and 16-bit compression refuse them with
// a clear error before touching the memory (the pointer here is never dereferenced).
TEST(Algorithms, HostOnlyPathsRefuseGpuBuffers) {
  auto local = std::make_shared<LocalCommunicator>();
  float never_read = 0;
  const CommBuffer on_gpu{&never_read, 1, DType::kF32, Device::cuda(0)};
  EXPECT_THROW(RingAllreduce(local).run(on_gpu, ReduceOp::kSum), InputError);
  // GPU buffers are compressed around the algorithm (CompressedAllreduce, casting on the
  // device: test_mpi_nccl), never by the hierarchical phase's host casts.
  EXPECT_THROW(HierarchicalAllreduce(local, local, nullptr, DType::kBF16).run(on_gpu, ReduceOp::kAvg),
               std::logic_error);
}

// The communicators an algorithm runs over are reported, so the trainer's watchdog can abort
// the NCCL ones on a timeout: flat has the world's, hierarchical the node's and the cross-node
// one, auto both; each is alive as long as the algorithm.
TEST(Algorithms, ReportTheCommunicatorsTheyRunOver) {
  World world = World::create({});
  for (const auto& [name, expected] : std::vector<std::pair<std::string, std::size_t>>{
           {"flat", 1}, {"ring", 1}, {"hierarchical", 2}, {"auto", 3}}) {
    std::vector<std::weak_ptr<Communicator>> made;
    AllreduceSetup setup = spec_setup(name, "none", nullptr);
    setup.communicators = &made;
    auto algorithm = make_allreduce(world, setup);
    ASSERT_EQ(made.size(), expected) << name;
    for (const auto& weak : made) EXPECT_NE(weak.lock(), nullptr) << name;
    algorithm.reset();
    for (const auto& weak : made) EXPECT_EQ(weak.lock(), nullptr) << name << ": kept alive elsewhere";
  }
}

TEST(Algorithms, UnknownNamesAreInputErrors) {
  World world = World::create({});
  EXPECT_THROW(make_allreduce(world, spec_setup("tree", "none", nullptr)), InputError);
  EXPECT_THROW(make_allreduce(world, spec_setup("ring", "int8", nullptr)), InputError);
}

}  // namespace
}  // namespace sdp
