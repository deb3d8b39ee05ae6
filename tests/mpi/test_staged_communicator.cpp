// StagedCommunicator (distributed/staged_communicator.hpp): GPU buffers over MPI through host
// memory, in rounds. Here with host buffers: the rounds' arithmetic, every collective against
// the MPI backend's own results with chunks small enough for many rounds, and the pipeline's
// ordering on a stream whose copies land late (a worker thread), where a missing wait would
// read a slot before its bytes arrive. On a GPU, the same on device memory.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "core/device_info.hpp"
#include "core/device_memory.hpp"
#include "distributed/allreduce.hpp"
#include "distributed/communicator_factory.hpp"
#include "distributed/mpi_communicator.hpp"
#include "distributed/socket_ring.hpp"
#include "distributed/staged_communicator.hpp"
#include "distributed/world.hpp"

namespace sdp {
namespace {

float value(int rank, int64_t i) {
  return static_cast<float>((i * 7 + rank * 3) % 13 - 6);
}

// A host stream whose copies run later, in order, on a worker thread.
class LateStream final : public Stream {
 public:
  LateStream() : worker_([this] { loop(); }) {}
  ~LateStream() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    worker_.join();
  }
  Device device() const override { return Device::cpu(); }
  void synchronize() override { wait_until(queued()); }
  std::unique_ptr<Event> make_event() override;
  void copy_from_host(void* dst, const void* src, std::size_t bytes) override {
    copy_from_host_async(dst, src, bytes);
    synchronize();
  }
  void copy_to_host_async(void* dst, const void* src, std::size_t bytes) override {
    enqueue(dst, src, bytes);
  }
  void copy_from_host_async(void* dst, const void* src, std::size_t bytes) override {
    enqueue(dst, src, bytes);
  }

  int64_t queued() {
    std::lock_guard<std::mutex> lock(mutex_);
    return queued_;
  }
  int64_t done() {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_;
  }
  void wait_until(int64_t n) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return done_ >= n; });
  }

 private:
  void enqueue(void* dst, const void* src, std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back([dst, src, bytes] {
      std::this_thread::sleep_for(std::chrono::microseconds(300));
      std::memcpy(dst, src, bytes);
    });
    ++queued_;
    changed_.notify_all();
  }
  void loop() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ++done_;
      }
      changed_.notify_all();
    }
  }
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> tasks_;
  int64_t queued_ = 0, done_ = 0;
  bool stop_ = false;
  std::thread worker_;
};

class LateEvent final : public Event {
 public:
  explicit LateEvent(LateStream* stream) : stream_(stream) {}
  void record() override { mark_ = stream_->queued(); }
  void synchronize() const override { stream_->wait_until(mark_); }
  bool query() const override { return stream_->done() >= mark_; }
  void block(Stream& /*stream*/) const override { synchronize(); }

 private:
  LateStream* stream_;
  int64_t mark_ = 0;
};

std::unique_ptr<Event> LateStream::make_event() {
  return std::make_unique<LateEvent>(this);
}

std::shared_ptr<Communicator> mpi_world() {
  return make_communicator(CommBackend::kMpi, MPI_COMM_WORLD);
}

// 64-byte chunks: 16 floats per round, fewer per rank for the part collectives.
std::vector<std::shared_ptr<StagedCommunicator>> staged_worlds() {
  return {std::make_shared<StagedCommunicator>(mpi_world(), std::make_shared<HostStream>(), 64),
          std::make_shared<StagedCommunicator>(mpi_world(), std::make_shared<LateStream>(), 64)};
}

TEST(StagedRounds, CoverEveryPartOnceAndMoveTheRightPieces) {
  const std::vector<int64_t> counts{5, 3, 0, 7};
  for (bool gather : {false, true}) {
    const auto rounds = StagedCommunicator::part_rounds(counts, 2, 1, gather);
    ASSERT_EQ(rounds.size(), 4u);  // the longest part, 7, in pieces of 2
    std::vector<int64_t> covered(15, 0);
    for (const auto& round : rounds) {
      int64_t staged = 0;
      for (size_t r = 0; r < counts.size(); ++r) staged += round.counts[r];
      EXPECT_EQ(round.staged_count, staged);
      // reduce_scatter: every part in, rank 1's back; allgather: the reverse.
      const auto& all = gather ? round.out : round.in;
      const auto& mine = gather ? round.in : round.out;
      for (const auto& piece : all)
        for (int64_t i = 0; i < piece.count; ++i) covered[piece.device_offset + i]++;
      for (const auto& piece : mine)
        EXPECT_TRUE(piece.device_offset >= 5 && piece.device_offset + piece.count <= 8);
    }
    for (int64_t i = 0; i < 15; ++i) EXPECT_EQ(covered[i], 1) << i;
  }
  EXPECT_TRUE(StagedCommunicator::part_rounds({0, 0}, 4, 0, false).empty());
}

TEST(StagedCommunicator, AllreduceSumAndAverageInManyRounds) {
  for (const auto& comm : staged_worlds()) {
    const int n = comm->size(), r = comm->rank();
    for (int64_t count : {0, 1, 16, 17, 1001}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
        std::vector<float> data(count);
        for (int64_t i = 0; i < count; ++i) data[i] = value(r, i);
        comm->allreduce(CommBuffer::host(data.data(), count), {op})->wait();
        for (int64_t i = 0; i < count; ++i) {
          float sum = 0;
          for (int q = 0; q < n; ++q) sum += value(q, i);
          ASSERT_FLOAT_EQ(data[i], op == ReduceOp::kSum ? sum : sum * (1.0f / n))
              << count << " " << i;
        }
      }
    }
  }
}

TEST(StagedCommunicator, ReduceScatterAndAllgatherWithUnevenPartsInManyRounds) {
  for (const auto& comm : staged_worlds()) {
    const int n = comm->size(), r = comm->rank();
    for (int64_t count : {0, 1, 7, 1001}) {
      std::vector<int64_t> counts = split_counts(count, n);
      if (n > 1 && count > 10) std::swap(counts[0], counts[n - 1]);  // the longest part last too
      const auto offsets = part_offsets(counts);
      std::vector<float> data(count);
      for (int64_t i = 0; i < count; ++i) data[i] = value(r, i);
      const CommBuffer buffer = CommBuffer::host(data.data(), count);
      comm->reduce_scatter(buffer, counts)->wait();
      for (int64_t i = offsets[r]; i < offsets[r] + counts[r]; ++i) {
        float sum = 0;
        for (int q = 0; q < n; ++q) sum += value(q, i);
        ASSERT_EQ(data[i], sum) << i;
      }
      for (int64_t i = offsets[r]; i < offsets[r] + counts[r]; ++i)
        data[i] = static_cast<float>(r * 1000 + i);
      comm->allgather(buffer, counts)->wait();
      for (int q = 0; q < n; ++q)
        for (int64_t i = offsets[q]; i < offsets[q] + counts[q]; ++i)
          ASSERT_EQ(data[i], q * 1000 + i);
    }
  }
}

TEST(StagedCommunicator, BroadcastFromTheLastRankAndRingExchange) {
  for (const auto& comm : staged_worlds()) {
    const int n = comm->size(), r = comm->rank();
    std::vector<float> data(100);
    for (int64_t i = 0; i < 100; ++i) data[i] = value(r, i);
    comm->broadcast(CommBuffer::host(data.data(), 100), {n - 1})->wait();
    for (int64_t i = 0; i < 100; ++i) ASSERT_EQ(data[i], value(n - 1, i));
    if (n == 1) continue;
    // The receive is posted before the send, as the ring does: it must not wait for its message.
    std::vector<float> out(40, static_cast<float>(r)), in(40, -1);
    auto recv = comm->recv(CommBuffer::host(in.data(), 40), (r + n - 1) % n);
    auto send = comm->send(CommBuffer::host(out.data(), 40), (r + 1) % n);
    recv->wait();
    send->wait();
    for (float v : in) ASSERT_EQ(v, (r + n - 1) % n);
  }
}

TEST(StagedCommunicator, RefusesABufferOfAnotherDevice) {
  auto comm = std::make_shared<StagedCommunicator>(mpi_world(), std::make_shared<HostStream>());
  float x = 0;
  EXPECT_THROW(comm->allreduce({&x, 1, DType::kF32, Device::cuda(0)}), std::logic_error);
}

// The host inter-node phase of GPU buffers (distributed.inter_node: host), with host buffers:
// every rank its own node, the shard copied in 4 KiB rounds on a stream whose copies land late,
// summed over the TCP socket ring, copied back. The sum must be exact and every byte must have
// crossed the sockets.
TEST(HostInterNodePhase, StagedRoundsOverTheSocketRingSumExactly) {
  World world = World::create({1, std::nullopt});  // one rank per node
  auto group = std::make_shared<MpiCommunicator>(world.inter(), "inter");
  std::unique_ptr<SocketRing> ring = SocketRing::create(world.inter(), world.comm());
  ASSERT_NE(ring, nullptr) << "the socket ring did not connect on loopback";
  auto sockets = std::make_shared<SocketRingCommunicator>(std::move(ring), group);
  const SocketRing& wire = sockets->ring();
  StagedCommunicator staged(sockets, std::make_shared<LateStream>(), 4096);
  const int n = staged.size(), r = staged.rank();
  for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{1023}, int64_t{10000}}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
      std::vector<float> data(count);
      for (int64_t i = 0; i < count; ++i) data[i] = value(r, i);
      const int64_t sent_before = wire.bytes_sent();
      staged.allreduce(CommBuffer::host(data.data(), count), {op})->wait();
      for (int64_t i = 0; i < count; ++i) {
        float sum = 0;
        for (int q = 0; q < n; ++q) sum += value(q, i);
        ASSERT_FLOAT_EQ(data[i], op == ReduceOp::kSum ? sum : sum * (1.0f / n)) << count << " " << i;
      }
      // A ring moves 2 (n-1)/n of the buffer per rank (each round's parts rounded down, hence
      // the 5 %): the phase did not fall back to MPI.
      if (n > 1 && count >= 100)
        EXPECT_GE(wire.bytes_sent() - sent_before, 0.95 * 2 * (n - 1) * count * 4 / n) << count;
    }
  }
}

// The composition a GPU job runs, node phase staged over MPI and inter-node phase staged over
// the sockets, as one hierarchical AllReduce on every topology of this world.
TEST(HostInterNodePhase, HierarchicalOverStagedCommunicatorsIsExact) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int per_node = 1; per_node <= size; ++per_node) {
    if (size % per_node != 0) continue;
    World world = World::create({per_node, std::nullopt});
    auto intra = std::make_shared<StagedCommunicator>(std::make_shared<MpiCommunicator>(world.intra(), "intra"),
                                                      std::make_shared<LateStream>(), 1024);
    std::shared_ptr<Communicator> inter = std::make_shared<MpiCommunicator>(world.inter(), "inter");
    if (auto ring = SocketRing::create(world.inter(), world.comm()))
      inter = std::make_shared<SocketRingCommunicator>(std::move(ring), inter);
    HierarchicalAllreduce algorithm(intra, std::make_shared<StagedCommunicator>(inter, std::make_shared<LateStream>(), 1024));
    const int64_t count = 5000;
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
      std::vector<float> data(count);
      for (int64_t i = 0; i < count; ++i) data[i] = value(world.rank(), i);
      algorithm.run(CommBuffer::host(data.data(), count), op)->wait();
      for (int64_t i = 0; i < count; ++i) {
        float sum = 0;
        for (int q = 0; q < size; ++q) sum += value(q, i);
        ASSERT_FLOAT_EQ(data[i], op == ReduceOp::kSum ? sum : sum / size) << per_node << " " << i;
      }
    }
  }
}

// make_allreduce with the job spec's default backend (auto) on CPUs across nodes: the
// inter-node phase goes over the sockets, not MPI's TCP.
TEST(HostInterNodePhase, CpuJobsAcrossNodesUseTheSocketRing) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size == 1) GTEST_SKIP() << "one rank: no nodes to cross";
  World world = World::create({1, std::nullopt});
  AllreduceSetup setup;
  setup.algorithm = AllreduceKind::kHierarchical;
  setup.backend = CommBackend::kAuto;
  auto algorithm = make_allreduce(world, setup);
  auto* hierarchical = dynamic_cast<HierarchicalAllreduce*>(algorithm.get());
  ASSERT_NE(hierarchical, nullptr);
  EXPECT_EQ(hierarchical->inter_transport(), "sockets");
}

TEST(StagedCommunicator, GpuBuffersOverMpiSumAsOnTheHost) {
  if (cuda_device_count() == 0)
    GTEST_SKIP() << "no CUDA device (" << cuda_unavailable_reason() << ")";
  // Every rank on GPU 0: staging through the host lets ranks share a GPU.
  CommunicatorOptions options;
  options.device = Device::cuda(0);
  auto comm = make_communicator(CommBackend::kMpi, MPI_COMM_WORLD, options);
  EXPECT_TRUE(comm->device() == Device::cuda(0));
  const int n = comm->size(), r = comm->rank();
  const int64_t count = (3 << 20) + 5;  // several 4 MiB rounds
  std::vector<float> host(count);
  for (int64_t i = 0; i < count; ++i) host[i] = value(r, i);
  auto device = allocate(Device::cuda(0), count * sizeof(float));
  copy_bytes(Device::cuda(0), device.get(), Device::cpu(), host.data(), count * sizeof(float));
  comm->allreduce({device.get(), count, DType::kF32, Device::cuda(0)})->wait();
  copy_bytes(Device::cpu(), host.data(), Device::cuda(0), device.get(), count * sizeof(float));
  for (int64_t i = 0; i < count; i += 997) {
    float sum = 0;
    for (int q = 0; q < n; ++q) sum += value(q, i);
    ASSERT_EQ(host[i], sum) << i;
  }
}

}  // namespace
}  // namespace sdp
