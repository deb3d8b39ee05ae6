// Communicator backends and the kernels under them: the factory (NCCL without a GPU is a
// clear error), the watchdog's NCCL abort hook, LocalCommunicator (no MPI), the MPI
// backend's in-place collectives with uneven parts, point-to-point, Work completion (wait
// with a timeout, test), the model-state broadcast, and the 16-bit conversions used by
// compression. The NCCL backend's collectives: test_nccl_communicator.cpp (GPU).
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/device_info.hpp"
#include "core/error.hpp"
#include "core/tensor.hpp"
#include "distributed/communicator_factory.hpp"
#include "distributed/host_work.hpp"
#include "distributed/local_communicator.hpp"
#include "distributed/nccl_communicator.hpp"
#include "distributed/reduce_kernels.hpp"

namespace sdp {
namespace {

using namespace std::chrono_literals;

float value(int rank, int64_t i) { return static_cast<float>((i * 5 + rank * 3) % 11 - 5); }

// The MPI backend over the whole world, made the way the product makes it.
std::shared_ptr<Communicator> mpi_world() { return make_communicator(CommBackend::kMpi, MPI_COMM_WORLD); }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

TEST(CommunicatorFactory, MakesTheMpiBackendByName) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CommunicatorOptions options;
  options.label = "intra";
  auto comm = make_communicator("mpi", MPI_COMM_WORLD, options);
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(comm->rank(), rank);
  EXPECT_EQ(comm->size(), size);
  EXPECT_EQ(comm->name(), "intra");
  EXPECT_TRUE(comm->device().is_cpu());
  EXPECT_TRUE(comm_backend_built(CommBackend::kMpi));
  EXPECT_EQ(parse_comm_backend(to_string(CommBackend::kNccl)), CommBackend::kNccl);
}

TEST(CommunicatorFactory, UnknownBackendNameIsAClearInputError) {
  const std::string message = error_of([] { make_communicator("gloo", MPI_COMM_WORLD); });
  EXPECT_NE(message.find("unknown communicator backend 'gloo'"), std::string::npos) << message;
  EXPECT_NE(message.find("mpi or nccl"), std::string::npos) << message;
  EXPECT_THROW(parse_comm_backend("MPI"), InputError);  // names are exact
}

TEST(CommunicatorFactory, NcclWithoutItInTheBuildSaysItIsNotBuilt) {
  if (comm_backend_built(CommBackend::kNccl)) GTEST_SKIP() << "this build has the NCCL backend";
  const std::string message = error_of([] { make_communicator(CommBackend::kNccl, MPI_COMM_WORLD); });
  EXPECT_NE(message.find("'nccl' is not built"), std::string::npos) << message;
  EXPECT_NE(message.find("distributed.backend: mpi"), std::string::npos) << message;
}

TEST(CommunicatorFactory, MpiOnAGpuItCannotUseIsAClearInputError) {
  // MPI on a GPU stages through host memory (test_staged_communicator.cpp); a GPU this
  // process cannot use is refused up front, with the CUDA runtime's reason.
  if (cuda_device_count() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  CommunicatorOptions on_gpu;
  on_gpu.device = Device::cuda(0);
  const std::string message = error_of([&] { make_communicator(CommBackend::kMpi, MPI_COMM_WORLD, on_gpu); });
  EXPECT_NE(message.find("communicator backend 'mpi' ('world') stages cuda:0 memory through the host, but"),
            std::string::npos)
      << message;
}

// A binary built with NCCL on a machine without a GPU (CI, the build machine): every rank
// gets an InputError saying why, together (the group agrees before NCCL is touched), and
// nothing hangs or crashes.
TEST(CommunicatorFactory, NcclWithoutAGpuIsAClearInputError) {
  if (!comm_backend_built(CommBackend::kNccl)) GTEST_SKIP() << "this build has no NCCL backend";
  if (cuda_device_count() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  CommunicatorOptions on_gpu;
  on_gpu.label = "intra";
  on_gpu.device = Device::cuda(0);
  const std::string message = error_of([&] { make_communicator("nccl", MPI_COMM_WORLD, on_gpu); });
  EXPECT_NE(message.find("communicator backend 'nccl' ('intra', rank "), std::string::npos)
      << message;
  EXPECT_NE(message.find("no CUDA device"), std::string::npos) << message;
  EXPECT_NE(message.find("distributed.backend: mpi"), std::string::npos) << message;
  // Without a device named, and through `auto` for a GPU buffer, the same reason.
  EXPECT_NE(error_of([] { make_communicator("nccl", MPI_COMM_WORLD); }).find("no CUDA device"),
            std::string::npos);
  EXPECT_EQ(resolve_comm_backend(CommBackend::kAuto, Device::cuda(0)), CommBackend::kNccl);
  EXPECT_NE(error_of([&] {
              make_communicator(CommBackend::kAuto, MPI_COMM_WORLD, on_gpu);
            }).find("no CUDA device"),
            std::string::npos);
  // Host buffers still get MPI under `auto`.
  EXPECT_EQ(resolve_comm_backend(CommBackend::kAuto, Device::cpu()), CommBackend::kMpi);
}

// The watchdog hook (nccl_communicator.hpp) aborts the communicators still alive, then hands
// the report on; checked with a stand-in, so it runs without a GPU.
class FakeNccl final : public NcclCommunicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Device device() const override { return Device::cuda(0); }
  std::string name() const override { return "fake"; }
  std::shared_ptr<Work> allreduce(const CommBuffer&, const AllreduceOptions&) override {
    return completed_work();
  }
  std::shared_ptr<Work> reduce_scatter(const CommBuffer&, const std::vector<int64_t>&,
                                       const ReduceScatterOptions&) override {
    return completed_work();
  }
  std::shared_ptr<Work> allgather(const CommBuffer&, const std::vector<int64_t>&) override {
    return completed_work();
  }
  std::shared_ptr<Work> broadcast(const CommBuffer&, const BroadcastOptions&) override {
    return completed_work();
  }
  std::shared_ptr<Work> barrier() override { return completed_work(); }
  std::shared_ptr<Work> send(const CommBuffer&, int, const PointToPointOptions&) override {
    return completed_work();
  }
  std::shared_ptr<Work> recv(const CommBuffer&, int, const PointToPointOptions&) override {
    return completed_work();
  }
  void abort(const std::string& reason) override { reasons.push_back(reason); }
  bool aborted() const override { return !reasons.empty(); }
  void check_health(const char* what) override {
    if (aborted()) throw RuntimeError(std::string(what) + ": aborted");
  }
  std::vector<std::string> reasons;
};

TEST(CommunicatorFactory, WatchdogHookAbortsNcclCommunicatorsThenHandsOn) {
  auto world = std::make_shared<FakeNccl>();
  auto gone = std::make_shared<FakeNccl>();
  std::vector<std::weak_ptr<NcclCommunicator>> comms = {world, gone};
  gone.reset();  // a communicator already destroyed is skipped
  std::vector<std::string> handed_on;
  Watchdog::Handler handler = abort_nccl_then(
      comms, [&](const StallReport& report) { handed_on.push_back(report.message()); });
  StallReport report;
  report.rank = 1;
  report.step = 7;
  report.what = "allreduce";
  report.waited_s = 12.0;
  handler(report);
  ASSERT_EQ(world->reasons.size(), 1u);
  EXPECT_EQ(world->reasons[0], report.message());
  ASSERT_EQ(handed_on.size(), 1u);  // after the aborts
  EXPECT_NE(handed_on[0].find("rank 1 step 7"), std::string::npos) << handed_on[0];
}

TEST(Work, CompletedAndHostWorkFollowTheContract) {
  auto done = completed_work();
  EXPECT_TRUE(done->test());
  EXPECT_TRUE(done->wait(0ns));
  done->block_stream(host_stream());  // host work: nothing to order

  HostWork work;
  EXPECT_FALSE(work.test());
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(work.wait(20ms));  // gives up after the timeout, not before
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 20ms);
  std::thread runner([&] {
    std::this_thread::sleep_for(10ms);
    work.complete();
  });
  EXPECT_TRUE(work.wait(10s));  // returns on completion, long before the timeout
  runner.join();
  EXPECT_TRUE(work.test());
  work.wait();

  work.reset();  // reusable: pending again, and a failure reaches every waiter
  EXPECT_FALSE(work.test());
  work.complete(std::make_exception_ptr(RuntimeError("bucket 2 failed")));
  EXPECT_THROW(work.test(), RuntimeError);
  EXPECT_THROW(work.wait(1ms), RuntimeError);
  EXPECT_THROW(work.wait(), RuntimeError);
}

TEST(Work, MpiReceiveIsIncompleteUntilItsMessageArrives) {
  auto comm = mpi_world();
  const int n = comm->size(), r = comm->rank();
  if (n == 1) GTEST_SKIP() << "needs a peer";
  float in = -1, out = static_cast<float>(r);
  auto recv = comm->recv(CommBuffer::host(&in, 1), (r + n - 1) % n, {11});
  // Nobody sends before the barrier below: the receive cannot be complete yet.
  EXPECT_FALSE(recv->test());
  EXPECT_FALSE(recv->wait(5ms));
  comm->barrier()->wait();
  auto send = comm->send(CommBuffer::host(&out, 1), (r + 1) % n, {11});
  EXPECT_TRUE(recv->wait(30s));
  EXPECT_TRUE(send->wait(30s));
  EXPECT_TRUE(recv->test());
  EXPECT_EQ(in, (r + n - 1) % n);
}

// The trainer's start: rank 0's parameters and buffers reach every rank through the
// Communicator (CommBuffer::of a tensor), whatever the world size.
TEST(MpiCommunicator, BroadcastsModelStateFromRankZero) {
  auto comm = mpi_world();
  const int r = comm->rank();
  for (int64_t count : {0, 1, 1000, 300001}) {
    Tensor state({count});
    for (int64_t i = 0; i < count; ++i) state.data<float>()[i] = r == 0 ? value(7, i) : -1.0f;
    comm->broadcast(CommBuffer::of(state), {0})->wait();
    for (int64_t i = 0; i < count; ++i) ASSERT_EQ(state.data<float>()[i], value(7, i)) << count << " " << i;
    // BatchNorm buffers: the mean over the ranks, the same on every rank.
    for (int64_t i = 0; i < count; ++i) state.data<float>()[i] = static_cast<float>(r);
    comm->allreduce(CommBuffer::of(state), {ReduceOp::kAvg})->wait();
    const float mean = static_cast<float>(comm->size() - 1) / 2;
    for (int64_t i = 0; i < count; ++i) ASSERT_FLOAT_EQ(state.data<float>()[i], mean) << i;
  }
}

TEST(SplitCounts, CoversTheRangeExactlyAndAlignsBoundaries) {
  for (int64_t count : {0, 1, 7, 31, 32, 33, 1000003}) {
    for (int parts : {1, 2, 3, 4, 7}) {
      for (int64_t align : {1, 16, 32}) {
        const auto counts = split_counts(count, parts, align);
        ASSERT_EQ(static_cast<int>(counts.size()), parts);
        EXPECT_EQ(std::accumulate(counts.begin(), counts.end(), int64_t{0}), count);
        const auto offsets = part_offsets(counts);
        for (int p = 0; p < parts; ++p) {
          EXPECT_GE(counts[p], 0);
          if (align > 1 && counts[p] > 0) EXPECT_EQ(offsets[p] % align, 0) << count << " " << parts;
        }
        if (align == 1) EXPECT_LE(counts.front() - counts.back(), 1);
      }
    }
  }
}

TEST(LocalCommunicator, EveryCollectiveIsTheIdentity) {
  LocalCommunicator comm;
  std::vector<float> data = {1, -2, 3.5f};
  const auto original = data;
  const CommBuffer buffer = CommBuffer::host(data.data(), 3);
  comm.allreduce(buffer, {ReduceOp::kAvg})->wait();
  comm.reduce_scatter(buffer, {3})->wait();
  comm.allgather(buffer, {3})->wait();
  comm.broadcast(buffer)->wait();
  comm.barrier()->wait();
  EXPECT_EQ(data, original);
  EXPECT_THROW(comm.send(buffer, 0), std::logic_error);
  EXPECT_THROW(comm.allreduce({data.data(), 3, DType::kF32, Device::cuda(0)}), std::logic_error);
}

TEST(MpiCommunicator, AllreduceSumAndAverage) {
  auto owner = mpi_world();
  Communicator& comm = *owner;
  const int n = comm.size(), r = comm.rank();
  for (int64_t count : {0, 1, 7, 1001}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
      std::vector<float> data(count);
      for (int64_t i = 0; i < count; ++i) data[i] = value(r, i);
      comm.allreduce(CommBuffer::host(data.data(), count), {op})->wait();
      for (int64_t i = 0; i < count; ++i) {
        float sum = 0;
        for (int q = 0; q < n; ++q) sum += value(q, i);
        ASSERT_FLOAT_EQ(data[i], op == ReduceOp::kSum ? sum : sum * (1.0f / n)) << i;
      }
    }
  }
}

TEST(MpiCommunicator, InPlaceReduceScatterAndAllgatherWithUnevenParts) {
  auto owner = mpi_world();
  Communicator& comm = *owner;
  const int n = comm.size(), r = comm.rank();
  for (int64_t count : {0, 1, 7, 1001}) {
    const auto counts = split_counts(count, n);
    const auto offsets = part_offsets(counts);
    std::vector<float> data(count);
    for (int64_t i = 0; i < count; ++i) data[i] = value(r, i);
    const CommBuffer buffer = CommBuffer::host(data.data(), count);
    comm.reduce_scatter(buffer, counts)->wait();
    for (int64_t i = offsets[r]; i < offsets[r] + counts[r]; ++i) {
      float sum = 0;
      for (int q = 0; q < n; ++q) sum += value(q, i);
      ASSERT_EQ(data[i], sum) << i;
    }
    // Allgather: each rank's part carries its rank.
    for (int64_t i = offsets[r]; i < offsets[r] + counts[r]; ++i) data[i] = static_cast<float>(r);
    comm.allgather(buffer, counts)->wait();
    for (int q = 0; q < n; ++q)
      for (int64_t i = offsets[q]; i < offsets[q] + counts[q]; ++i) ASSERT_EQ(data[i], q);
  }
}

TEST(MpiCommunicator, BroadcastFromTheLastRankAndRingExchange) {
  auto owner = mpi_world();
  Communicator& comm = *owner;
  const int n = comm.size(), r = comm.rank();
  std::vector<float> data(5, static_cast<float>(r));
  comm.broadcast(CommBuffer::host(data.data(), 5), {n - 1})->wait();
  for (float v : data) EXPECT_EQ(v, n - 1);
  if (n == 1) return;
  float out = static_cast<float>(r), in = -1;
  auto recv = comm.recv(CommBuffer::host(&in, 1), (r + n - 1) % n);
  auto send = comm.send(CommBuffer::host(&out, 1), (r + 1) % n);
  recv->wait();
  send->wait();
  EXPECT_TRUE(recv->test());
  EXPECT_EQ(in, (r + n - 1) % n);
  comm.barrier()->wait();
}

TEST(MpiCommunicator, SixteenBitSumsUseTheirOwnOps) {
  auto owner = mpi_world();
  Communicator& comm = *owner;
  const int n = comm.size();
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    std::vector<uint16_t> data(9);
    for (auto& v : data) v = dtype == DType::kF16 ? float_to_half(1.5f) : float_to_bfloat16(1.5f);
    comm.allreduce({data.data(), 9, dtype, Device::cpu()})->wait();
    for (uint16_t v : data)
      EXPECT_EQ(dtype == DType::kF16 ? half_to_float(v) : bfloat16_to_float(v), 1.5f * n);
  }
}

TEST(ReduceKernels, HalfAndBfloat16ConversionsRoundToNearestEven) {
  EXPECT_EQ(half_to_float(float_to_half(1.0f)), 1.0f);
  EXPECT_EQ(half_to_float(float_to_half(-2.5f)), -2.5f);
  EXPECT_EQ(half_to_float(float_to_half(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(half_to_float(float_to_half(65520.0f))));  // ties to even: up to inf
  EXPECT_EQ(half_to_float(float_to_half(65519.0f)), 65504.0f);
  EXPECT_EQ(half_to_float(float_to_half(std::ldexp(1.0f, -24))), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(half_to_float(float_to_half(std::ldexp(1.0f, -26))), 0.0f);
  EXPECT_EQ(half_to_float(float_to_half(1.0f + std::ldexp(1.0f, -11))), 1.0f);  // tie -> even
  EXPECT_EQ(half_to_float(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11))), 1.0f + std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::numeric_limits<float>::quiet_NaN()))));
  for (int i = -2048; i <= 2048; ++i) ASSERT_EQ(half_to_float(float_to_half(static_cast<float>(i))), i);
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(3.0f)), 3.0f);
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(257.0f)), 256.0f);  // tie -> even
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(259.0f)), 260.0f);
  EXPECT_TRUE(std::isnan(bfloat16_to_float(float_to_bfloat16(std::numeric_limits<float>::quiet_NaN()))));
}

}  // namespace
}  // namespace sdp
