// GradientReducer: the bucket plan, and reduction during a simulated backward (hooks in
// reverse registration order, sometimes shuffled, sometimes missing) against a plain flat
// AllReduce of the same gradients.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "config/choices.hpp"
#include "distributed/allreduce.hpp"
#include "distributed/gradient_reducer.hpp"
#include "distributed/local_communicator.hpp"
#include "distributed/communicator_factory.hpp"
#include "distributed/shared_arena.hpp"
#include "distributed/world.hpp"

namespace sdp {
namespace {

// Parameters laid out like ParameterStore does: offsets rounded up to 16 elements.
std::vector<ParamExtent> layout(const std::vector<int64_t>& sizes, int64_t* arena_count) {
  std::vector<ParamExtent> out;
  int64_t offset = 0;
  for (int64_t s : sizes) {
    out.push_back({offset, s});
    offset = (offset + s + 15) / 16 * 16;
  }
  *arena_count = offset;
  return out;
}

TEST(PlanBuckets, ReverseOrderTilesTheArenaAndRespectsTheCap) {
  int64_t arena = 0;
  // 4-byte elements: 1 MiB = 262144 elements.
  const auto params = layout({100000, 300000, 5, 200000, 70000, 262144}, &arena);
  const auto buckets = plan_buckets(arena, 4, params, 1.0);
  ASSERT_FALSE(buckets.empty());
  // First bucket holds the LAST parameter (backward produces it first).
  EXPECT_EQ(buckets.front().last_param, 5);
  EXPECT_EQ(buckets.front().first_param, 5);  // 262144 elements = 1 MiB reaches the cap alone
  EXPECT_EQ(buckets.front().begin + buckets.front().count, arena);
  EXPECT_EQ(buckets.back().first_param, 0);
  EXPECT_EQ(buckets.back().begin, 0);
  int expected_hi = 5;
  for (std::size_t k = 0; k < buckets.size(); ++k) {
    EXPECT_EQ(buckets[k].last_param, expected_hi);  // consecutive, descending, nothing skipped
    expected_hi = buckets[k].first_param - 1;
    if (k + 1 < buckets.size()) EXPECT_EQ(buckets[k + 1].begin + buckets[k + 1].count, buckets[k].begin);
    // A bucket closes at the first parameter that reaches the cap.
    int64_t bytes_before_last = 0;
    for (int i = buckets[k].last_param; i > buckets[k].first_param; --i) bytes_before_last += params[i].count * 4;
    EXPECT_LT(bytes_before_last, 1 << 20);
  }
  EXPECT_EQ(expected_hi, -1);
  // bucket_mb = 0: one bucket over everything.
  const auto one = plan_buckets(arena, 4, params, 0.0);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].begin, 0);
  EXPECT_EQ(one[0].count, arena);
  // A small first bucket (PyTorch: 1 MB first, 25 MB after).
  const auto small_first = plan_buckets(arena, 4, params, 25.0, 0.0001);
  ASSERT_EQ(small_first.size(), 2u);
  EXPECT_EQ(small_first[0].first_param, 5);
  EXPECT_TRUE(plan_buckets(0, 4, {}, 1.0).empty());
}

void fill_grads(float* arena, const std::vector<ParamExtent>& params, int param, int rank, int step) {
  for (int64_t j = 0; j < params[param].count; ++j)
    arena[params[param].offset + j] = static_cast<float>((j + 3 * param + 5 * rank + step) % 13 - 6);
}

void run_steps(const World& world, float* arena, int64_t arena_count, const std::vector<ParamExtent>& params,
               GradientReducerOptions options, const std::string& algorithm_name, bool shuffle, bool skip_some,
               std::shared_ptr<SharedArena> shm, bool stream_ordered = false) {
  std::shared_ptr<AllreduceAlgorithm> algorithm =
      make_allreduce(world, {parse_choice<AllreduceKind>(algorithm_name), Compression::kNone, shm});
  FlatAllreduce reference(make_communicator(CommBackend::kMpi, world.comm()));
  GradientReducer reducer(CommBuffer::host(arena, arena_count), params, algorithm, options);
  if (stream_ordered) reducer.order_on_device(host_stream());
  std::vector<float> expected(arena_count);
  std::mt19937 rng(world.rank() + 1);  // a different hook order on every rank
  const int steps = 3;
  for (int step = 0; step < steps; ++step) {
    std::fill_n(arena, arena_count, 0.0f);
    reducer.begin_step(step);
    std::vector<int> order(params.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(order.size() - 1 - i);  // backward
    if (shuffle) std::shuffle(order.begin(), order.end(), rng);
    for (int i : order) {
      fill_grads(arena, params, i, world.rank(), step);
      if (skip_some && i % 3 == 1) continue;  // an unused parameter: never reported
      reducer.on_grad_ready(i);
      std::this_thread::sleep_for(std::chrono::microseconds(50));  // "compute"
    }
    // Reference: the same gradients, one flat AllReduce, after the reducer is done.
    if (stream_ordered)
      reducer.join_on_device();
    else
      reducer.wait_all();
    std::vector<float> mine(arena_count, 0.0f);
    for (std::size_t i = 0; i < params.size(); ++i) fill_grads(mine.data(), params, static_cast<int>(i), world.rank(), step);
    reference.run(CommBuffer::host(mine.data(), arena_count), options.op);
    for (int64_t j = 0; j < arena_count; ++j) ASSERT_EQ(arena[j], mine[j]) << algorithm_name << " step " << step << " element " << j;
    EXPECT_EQ(reducer.last_step().buckets, static_cast<int>(reducer.buckets().size()));
    EXPECT_EQ(reducer.last_step().step, step);
    EXPECT_GE(reducer.last_step().exposed_s, 0.0);
  }
  for (int64_t n : reducer.reductions_per_bucket()) EXPECT_EQ(n, steps);  // each bucket once per step
}

TEST(GradientReducer, BucketsEqualAFlatAllreduceOnEveryTopology) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int64_t arena_count = 0;
  const auto params = layout({1000, 37, 4096, 1, 20000, 333, 7}, &arena_count);
  for (int rpn = 1; rpn <= size; ++rpn) {
    if (size % rpn) continue;
    World world = World::create({rpn, std::nullopt});
    auto shm = SharedArena::create(world.intra(), arena_count * 4);
    std::vector<float> heap(arena_count);
    GradientReducerOptions options;
    options.bucket_mb = 16.0 * 1024 / (1 << 20);  // 16 KiB buckets: several per step
    for (const char* name : {"flat", "ring", "hierarchical", "auto"}) {
      run_steps(world, static_cast<float*>(shm->data()), arena_count, params, options, name, false, false, shm);
      run_steps(world, heap.data(), arena_count, params, options, name, true, true, shm);
    }
    // distributed.stream_ordered's order: each bucket starts on the reporting thread as its last
    // gradient is reported (host collectives here, after the host stream), in bucket order on
    // every rank whatever order the hooks fire in, unused parameters at the join.
    for (const char* name : {"flat", "hierarchical", "auto"}) {
      run_steps(world, heap.data(), arena_count, params, options, name, false, false, shm, /*stream_ordered=*/true);
      run_steps(world, heap.data(), arena_count, params, options, name, true, true, shm, /*stream_ordered=*/true);
    }
    options.op = ReduceOp::kSum;
    options.bucket_mb = 0;
    run_steps(world, static_cast<float*>(shm->data()), arena_count, params, options, "auto", true, false, shm);
    options.overlap = false;
    options.bucket_mb = 0.01;
    run_steps(world, heap.data(), arena_count, params, options, "hierarchical", false, true, shm);
  }
}

// A recording that failed midway: the step's reports and started buckets are forgotten, the step
// keeps its number, and the step launched again reduces as a fresh one. wait_all is refused once
// the buckets are stream-ordered, and so is a switch in the middle of a step.
TEST(GradientReducer, StreamOrderedStepsCanBeAbandonedAndLaunchedAgain) {
  auto algorithm = std::make_shared<FlatAllreduce>(std::make_shared<LocalCommunicator>());
  std::vector<float> arena(64, 2.0f);
  GradientReducerOptions options;
  options.bucket_mb = 1e-6;  // a bucket per parameter: bucket 0 holds parameter 1
  GradientReducer reducer(CommBuffer::host(arena.data(), 64), {{0, 10}, {16, 10}}, algorithm, options);
  ASSERT_EQ(reducer.buckets().size(), 2u);
  reducer.on_grad_ready(1);
  EXPECT_THROW(reducer.order_on_device(host_stream()), std::logic_error) << "in the middle of a step";
  reducer.wait_all();
  reducer.order_on_device(host_stream());
  EXPECT_TRUE(reducer.ordered_on_device());
  EXPECT_THROW(reducer.wait_all(), std::logic_error);
  reducer.begin_step(7);
  reducer.on_grad_ready(1);  // bucket 0 (the last parameter) starts at once
  EXPECT_EQ(reducer.reductions_per_bucket()[0], 2);
  reducer.abandon_step();
  reducer.on_grad_ready(1);  // not a double report: the step starts over
  reducer.on_grad_ready(0);
  EXPECT_EQ(reducer.reductions_per_bucket()[0], 3);
  reducer.join_on_device();
  EXPECT_EQ(reducer.last_step().step, 7);
  EXPECT_EQ(arena[0], 2.0f);
}

TEST(GradientReducer, RejectsDoubleReports) {
  auto algorithm = std::make_shared<FlatAllreduce>(std::make_shared<LocalCommunicator>());
  std::vector<float> arena(64, 1.0f);
  GradientReducer reducer(CommBuffer::host(arena.data(), 64), {{0, 10}, {16, 10}}, algorithm);
  reducer.on_grad_ready(1);
  EXPECT_THROW(reducer.on_grad_ready(1), std::logic_error);
  EXPECT_THROW(reducer.on_grad_ready(7), std::logic_error);
  reducer.wait_all();
  EXPECT_EQ(arena[0], 1.0f);  // an average over one rank
  reducer.on_grad_ready(1);  // the next step starts clean
  reducer.wait_all();
}

// A device-style readiness event: the gradient counts as produced only once released, as a
// CUDA event completes after the kernels recorded before it.
class GatedReady final : public Event {
 public:
  void record() override {}
  bool query() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return released_;
  }
  void block(Stream& /*stream*/) const override { synchronize(); }
  void synchronize() const override {
    std::unique_lock<std::mutex> lock(mutex_);
    ++waits_;
    released_cv_.wait(lock, [&] { return released_; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    released_ = true;
    released_cv_.notify_all();
  }
  int waits() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return waits_;
  }

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable released_cv_;
  mutable int waits_ = 0;
  bool released_ = false;
};

// An algorithm whose Works complete only when the test says so, as a device's do (allreduce.hpp:
// GPU buffers return before the device has reduced them).
class DeferredAllreduce final : public AllreduceAlgorithm {
 public:
  std::string name() const override { return "deferred"; }
  // Blocks until `n` buckets were started, or 10 s passed; returns how many were.
  std::size_t wait_started(std::size_t n) {
    std::unique_lock<std::mutex> lock(mutex_);
    started_cv_.wait_for(lock, std::chrono::seconds(10), [&] { return works_.size() >= n; });
    return works_.size();
  }
  void finish(std::size_t i) {
    std::lock_guard<std::mutex> lock(mutex_);
    works_.at(i)->complete();
  }

 private:
  std::shared_ptr<Work> start(const CommBuffer&, ReduceOp, Stream&) override {
    auto work = std::make_shared<HostWork>();
    std::lock_guard<std::mutex> lock(mutex_);
    works_.push_back(work);
    started_cv_.notify_all();
    return work;
  }
  std::mutex mutex_;
  std::condition_variable started_cv_;
  std::vector<std::shared_ptr<HostWork>> works_;
};

// Buckets pipeline: the communication thread starts bucket 1 while bucket 0's Work is still in
// flight, and completes the buckets in order, each only when its own Work has.
TEST(GradientReducer, StartsTheNextBucketWhileTheLastOneIsInFlight) {
  auto algorithm = std::make_shared<DeferredAllreduce>();
  std::vector<float> arena(64, 1.0f);
  GradientReducerOptions options;
  options.bucket_mb = 1e-6;  // one bucket per parameter
  GradientReducer reducer(CommBuffer::host(arena.data(), 64), {{0, 10}, {16, 10}}, algorithm, options);
  ASSERT_EQ(reducer.buckets().size(), 2u);
  reducer.on_grad_ready(1);
  reducer.on_grad_ready(0);
  ASSERT_EQ(algorithm->wait_started(2), 2u) << "bucket 1 did not start while bucket 0 was in flight";
  algorithm->finish(1);  // out of order: bucket 1 may not complete before bucket 0
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(reducer.reductions_per_bucket()[1], 0);
  algorithm->finish(0);
  reducer.wait_all();
  EXPECT_EQ(reducer.reductions_per_bucket()[0], 1);
  EXPECT_EQ(reducer.reductions_per_bucket()[1], 1);
}

TEST(GradientReducer, WaitsForEachGradientsReadyEventBeforeItsBucket) {
  // Two params, one bucket each (tiny cap): bucket 0 holds param 1, bucket 1 param 0.
  auto algorithm = std::make_shared<FlatAllreduce>(std::make_shared<LocalCommunicator>());
  std::vector<float> arena(64, 1.0f);
  GradientReducerOptions options;
  options.bucket_mb = 1e-6;
  GradientReducer reducer(CommBuffer::host(arena.data(), 64), {{0, 10}, {16, 10}}, algorithm, options);
  ASSERT_EQ(reducer.buckets().size(), 2u);
  GatedReady gate;
  std::unique_ptr<Event> host = host_stream().make_event();
  reducer.on_grad_ready(1, &gate);  // bucket 0 launches, and waits on the gate
  reducer.on_grad_ready(0, host.get());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(reducer.reductions_per_bucket()[0], 0);  // not reduced before its gradient is ready
  EXPECT_EQ(gate.waits(), 1);
  gate.release();
  reducer.wait_all();
  EXPECT_EQ(reducer.reductions_per_bucket()[0], 1);
  EXPECT_EQ(reducer.reductions_per_bucket()[1], 1);
  EXPECT_EQ(gate.waits(), 1);  // once per step
  reducer.on_grad_ready(1);    // events are per step: the next step may report none
  reducer.wait_all();
  EXPECT_EQ(gate.waits(), 1);
}

}  // namespace
}  // namespace sdp
