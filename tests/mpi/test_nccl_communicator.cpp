// NcclCommunicator on GPUs, one per rank (mpirun -np 1 and 2): in-place allreduce (sum,
// avg), reduce_scatter then allgather with equal, uneven and aligned parts, broadcast from
// the first and the last rank, send/recv rounds and barrier, ordering through block_stream,
// refused buffers, abort through the watchdog hook, and the flat and hierarchical algorithms
// over NCCL. Lengths 0, 1, 7 and 1000003 in f32, f16 and bf16, against the exact sum: the
// values are small integers, whose sums every type holds exactly (averages within a stated
// tolerance: ncclAvg scales before it sums).
//
// Every test skips with the reason "no CUDA device" where there is none (the build machine,
// CI); the binary then exits 77, which CTest reports as skipped.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/device_info.hpp"
#include "core/device_memory.hpp"
#include "core/error.hpp"
#include "distributed/allreduce.hpp"
#include "distributed/communicator_factory.hpp"
#include "distributed/nccl_communicator.hpp"
#include "distributed/reduce_kernels.hpp"

namespace sdp {
namespace {

using namespace std::chrono_literals;

const std::vector<int64_t> kLengths = {0, 1, 7, 1000003};
const std::vector<DType> kTypes = {DType::kF32, DType::kF16, DType::kBF16};

// Integers in [-5, 5]: sums over up to 8 ranks stay within 40, exact even in bf16 (8 bits).
float value(int rank, int64_t i) {
  return static_cast<float>((i * 5 + rank * 3) % 11 - 5);
}

// How far an average may be from the exact one: ncclAvg multiplies each input by 1/size
// before summing, so each term is rounded once in the element type (|values| <= 5).
double average_tolerance(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 1e-5;
    case DType::kF16:
      return 1e-2;
    case DType::kBF16:
      return 8e-2;
  }
  return 0;
}

// Whether the world can run these tests, the same answer on every rank (a rank that went on
// alone would wait in NCCL's init forever): one GPU per rank of a node, since NCCL refuses
// two ranks of one communicator on one GPU.
struct GpuPlan {
  std::string skip;  // empty: run
  int local_rank = 0;
};

const GpuPlan& gpu_plan() {
  static const GpuPlan plan = [] {
    GpuPlan p;
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int local_size = 1;
    MPI_Comm_rank(node, &p.local_rank);
    MPI_Comm_size(node, &local_size);
    MPI_Comm_free(&node);
    int devices = cuda_device_count(), fewest_devices = 0, most_ranks = 0;
    MPI_Allreduce(&devices, &fewest_devices, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&local_size, &most_ranks, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (fewest_devices == 0)
      p.skip = "no CUDA device";
    else if (fewest_devices < most_ranks)
      p.skip = "needs one CUDA device per rank (NCCL refuses two ranks on one GPU): " +
               std::to_string(most_ranks) + " ranks on a node, " + std::to_string(fewest_devices) +
               " CUDA devices";
    return p;
  }();
  return plan;
}

Device gpu() {
  return Device::cuda(gpu_plan().local_rank);
}

std::shared_ptr<Communicator> make_nccl(MPI_Comm group, const char* label) {
  CommunicatorOptions options;
  options.label = label;
  options.device = gpu();
  options.init_timeout_s = 120;
  return make_communicator(CommBackend::kNccl, group, options);
}

// `count` elements of `dtype` in this rank's GPU memory, filled and read as floats.
class DeviceArray {
 public:
  DeviceArray(int64_t count, DType dtype)
      : count_(count),
        dtype_(dtype),
        memory_(allocate(gpu(), static_cast<size_t>(count) * dtype_size(dtype))) {}

  CommBuffer buffer() const { return {memory_.get(), count_, dtype_, gpu()}; }

  void upload(const std::vector<float>& values) {
    std::vector<char> bytes(values.size() * dtype_size(dtype_));
    for (size_t i = 0; i < values.size(); ++i) {
      if (dtype_ == DType::kF32) {
        std::memcpy(bytes.data() + 4 * i, &values[i], 4);
      } else {
        const uint16_t bits =
            dtype_ == DType::kF16 ? float_to_half(values[i]) : float_to_bfloat16(values[i]);
        std::memcpy(bytes.data() + 2 * i, &bits, 2);
      }
    }
    copy_bytes(gpu(), memory_.get(), Device::cpu(), bytes.data(), bytes.size());
  }

  std::vector<float> download() const {
    std::vector<char> bytes(static_cast<size_t>(count_) * dtype_size(dtype_));
    copy_bytes(Device::cpu(), bytes.data(), gpu(), memory_.get(), bytes.size());
    std::vector<float> values(static_cast<size_t>(count_));
    for (size_t i = 0; i < values.size(); ++i) {
      if (dtype_ == DType::kF32) {
        std::memcpy(&values[i], bytes.data() + 4 * i, 4);
      } else {
        uint16_t bits;
        std::memcpy(&bits, bytes.data() + 2 * i, 2);
        values[i] = dtype_ == DType::kF16 ? half_to_float(bits) : bfloat16_to_float(bits);
      }
    }
    return values;
  }

 private:
  int64_t count_;
  DType dtype_;
  std::shared_ptr<void> memory_;
};

std::vector<float> rank_values(int rank, int64_t count) {
  std::vector<float> values(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) values[i] = value(rank, i);
  return values;
}

float exact_sum(int ranks, int64_t i) {
  float sum = 0;
  for (int q = 0; q < ranks; ++q) sum += value(q, i);
  return sum;
}

class Nccl : public ::testing::Test {
 protected:
  // One world communicator for the suite (NCCL init takes a while); every rank runs the
  // tests in the same order, so the first SetUp makes it collectively.
  void SetUp() override {
    if (!gpu_plan().skip.empty()) GTEST_SKIP() << gpu_plan().skip;
    if (!world_) world_ = make_nccl(MPI_COMM_WORLD, "world");
    n_ = world_->size();
    r_ = world_->rank();
  }
  // Before main finalizes MPI and the CUDA runtime unloads.
  static void TearDownTestSuite() { world_.reset(); }

  static std::shared_ptr<Communicator> world_;
  int n_ = 1, r_ = 0;
};
std::shared_ptr<Communicator> Nccl::world_;

TEST_F(Nccl, TheBackendDrivesThisRanksGpu) {
  EXPECT_EQ(world_->device(), gpu());
  EXPECT_EQ(world_->name(), "world");
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(r_, rank);
  EXPECT_EQ(n_, size);
  ASSERT_NE(std::dynamic_pointer_cast<NcclCommunicator>(world_), nullptr);
  EXPECT_EQ(world_->stream().device(), gpu());  // its own stream, on this rank's GPU
}

TEST_F(Nccl, AllreduceSumIsExactAndAverageWithinTolerance) {
  for (DType dtype : kTypes) {
    for (int64_t count : kLengths) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " count " + std::to_string(count) + " " +
                     reduce_op_name(op));
        DeviceArray data(count, dtype);
        data.upload(rank_values(r_, count));
        world_->allreduce(data.buffer(), {op})->wait();
        const std::vector<float> got = data.download();
        for (int64_t i = 0; i < count; ++i) {
          const float sum = exact_sum(n_, i);
          if (op == ReduceOp::kSum)
            ASSERT_EQ(got[i], sum) << i;
          else
            ASSERT_NEAR(got[i], sum / n_, average_tolerance(dtype)) << i;
        }
      }
    }
  }
}

TEST_F(Nccl, ReduceScatterThenAllgatherWithEqualUnevenAndAlignedParts) {
  for (DType dtype : kTypes) {
    for (int64_t length : kLengths) {
      // Uneven (the first parts one longer), cache-line aligned (as the hierarchical
      // algorithm splits; trailing parts may be empty), and equal parts (NCCL's own calls).
      const std::vector<std::vector<int64_t>> layouts = {
          split_counts(length, n_), split_counts(length, n_, 16), std::vector<int64_t>(n_, length)};
      for (const std::vector<int64_t>& counts : layouts) {
        const std::vector<int64_t> offsets = part_offsets(counts);
        const int64_t count = offsets.back() + counts.back();
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
          SCOPED_TRACE(std::string(dtype_name(dtype)) + " count " + std::to_string(count) +
                       " my part " + std::to_string(counts[r_]) + " " + reduce_op_name(op));
          DeviceArray data(count, dtype);
          data.upload(rank_values(r_, count));
          world_->reduce_scatter(data.buffer(), counts, {op})->wait();
          std::vector<float> got = data.download();
          for (int64_t i = offsets[r_]; i < offsets[r_] + counts[r_]; ++i) {
            const float sum = exact_sum(n_, i);
            if (op == ReduceOp::kSum)
              ASSERT_EQ(got[i], sum) << i;
            else
              ASSERT_NEAR(got[i], sum / n_, average_tolerance(dtype)) << i;
          }
          // Allgather: my part carries my rank + 1 (other parts hold garbage to be overwritten).
          for (int64_t i = offsets[r_]; i < offsets[r_] + counts[r_]; ++i)
            got[i] = static_cast<float>(r_ + 1);
          for (int q = 0; q < n_; ++q)
            if (q != r_)
              for (int64_t i = offsets[q]; i < offsets[q] + counts[q]; ++i) got[i] = -100.0f;
          data.upload(got);
          world_->allgather(data.buffer(), counts)->wait();
          got = data.download();
          for (int q = 0; q < n_; ++q)
            for (int64_t i = offsets[q]; i < offsets[q] + counts[q]; ++i)
              ASSERT_EQ(got[i], q + 1) << q << " " << i;
        }
      }
    }
  }
}

TEST_F(Nccl, BroadcastFromTheFirstAndTheLastRank) {
  for (DType dtype : kTypes) {
    for (int64_t count : kLengths) {
      for (int root : {0, n_ - 1}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " count " + std::to_string(count) + " root " +
                     std::to_string(root));
        DeviceArray data(count, dtype);
        data.upload(r_ == root ? rank_values(root + 7, count) : std::vector<float>(count, -1.0f));
        world_->broadcast(data.buffer(), {root})->wait();
        const std::vector<float> got = data.download();
        for (int64_t i = 0; i < count; ++i) ASSERT_EQ(got[i], value(root + 7, i)) << i;
      }
    }
  }
}

// Receives posted before sends on every rank (the order that deadlocks a lone ncclRecv):
// the batch goes out as one group when a Work of it is waited on.
TEST_F(Nccl, SendRecvRoundsAndBarrier) {
  if (n_ > 1) {
    const int right = (r_ + 1) % n_, left = (r_ + n_ - 1) % n_;
    for (int64_t count : {int64_t{1}, int64_t{7}, int64_t{1000003}}) {
      for (int round = 0; round < 3; ++round) {
        DeviceArray in(count, DType::kF32), out(count, DType::kF32);
        in.upload(std::vector<float>(count, -1.0f));
        out.upload(rank_values(r_ + round, count));
        auto received = world_->recv(in.buffer(), left);
        auto sent = world_->send(out.buffer(), right);
        EXPECT_TRUE(received->wait(60s)) << "round " << round;
        sent->wait();
        EXPECT_TRUE(sent->test());
        const std::vector<float> got = in.download();
        for (int64_t i = 0; i < count; ++i)
          ASSERT_EQ(got[i], value(left + round, i)) << count << " " << i;
      }
    }
  }
  auto barrier = world_->barrier();
  barrier->wait();
  EXPECT_TRUE(barrier->test());
}

// block_stream(s) orders the work later queued on s after the allreduce without the host
// waiting: an event recorded on s after it completes only once the allreduce has. Both
// streams are non-blocking, so without block_stream nothing would order them.
TEST_F(Nccl, BlockStreamOrdersLaterWorkWithoutWaiting) {
  const int64_t count = 1000003;
  DeviceArray data(count, DType::kF32);
  data.upload(rank_values(r_, count));
  std::shared_ptr<Stream> later = make_stream(gpu());
  auto work = world_->allreduce(data.buffer());
  work->block_stream(*later);
  std::unique_ptr<Event> after = later->make_event();
  after->record();
  after->synchronize();
  EXPECT_TRUE(work->test());  // the event on `later` completed after the allreduce
  const std::vector<float> got = data.download();
  EXPECT_TRUE(work->wait(0ns));
  work->wait();
  for (int64_t i = 0; i < count; ++i) ASSERT_EQ(got[i], exact_sum(n_, i)) << i;
}

TEST_F(Nccl, RefusesHostBuffersOtherDevicesAndBadCounts) {
  std::vector<float> host(8, 1.0f);
  EXPECT_THROW(world_->allreduce(CommBuffer::host(host.data(), 8)), std::logic_error);
  // A host pointer labelled as this GPU's memory: CUDA says what it really is.
  EXPECT_THROW(world_->allreduce({host.data(), 8, DType::kF32, gpu()}), std::logic_error);
  DeviceArray data(8, DType::kF32);
  const CommBuffer elsewhere{data.buffer().data, 8, DType::kF32, Device::cuda(gpu().index + 1)};
  EXPECT_THROW(world_->broadcast(elsewhere), std::logic_error);
  EXPECT_THROW(world_->reduce_scatter(data.buffer(), std::vector<int64_t>(n_ + 1, 0)),
               std::logic_error);
  EXPECT_THROW(world_->allgather(data.buffer(), std::vector<int64_t>(n_, 100)), std::logic_error);
  EXPECT_THROW(world_->broadcast(data.buffer(), {n_}), std::logic_error);
  EXPECT_THROW(world_->send(data.buffer(), -1), std::logic_error);
  try {
    world_->allreduce(CommBuffer::host(host.data(), 8));
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("reaches " + gpu().str() + " memory only"),
              std::string::npos)
        << e.what();
  }
  // Nothing was enqueued: the communicator still works.
  world_->barrier()->wait();
}

// Runs everything algorithms need of a communicator: the flat one, and the hierarchical one
// as one node (intra = world, inter = this rank alone) and, with 2+ ranks, as nodes of one
// rank each (intra = this rank alone, inter = world).
TEST_F(Nccl, FlatAndHierarchicalAllreduceRunOverNccl) {
  const int64_t count = 1000003;
  auto self = make_nccl(MPI_COMM_SELF, "self");
  struct Case {
    std::string name;
    std::unique_ptr<AllreduceAlgorithm> algorithm;
    bool averages;  // kAvg supported (see below)
  };
  std::vector<Case> cases;
  cases.push_back({"flat", std::make_unique<FlatAllreduce>(world_), true});
  cases.push_back(
      {"hierarchical, one node", std::make_unique<HierarchicalAllreduce>(world_, self), true});
  // Across nodes HierarchicalAllreduce applies the average with a host loop
  // (scale_in_place) on the shard: not on device memory yet, so SUM only here.
  if (n_ > 1)
    cases.push_back({"hierarchical, nodes of one rank",
                     std::make_unique<HierarchicalAllreduce>(self, world_), false});
  for (Case& c : cases) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
      if (op == ReduceOp::kAvg && !c.averages) continue;
      SCOPED_TRACE(c.name + " " + reduce_op_name(op));
      DeviceArray data(count, DType::kF32);
      data.upload(rank_values(r_, count));
      c.algorithm->run(data.buffer(), op)->wait();  // GPU buffers: the Work completes with the last phase
      const std::vector<float> got = data.download();
      for (int64_t i = 0; i < count; ++i) {
        const float sum = exact_sum(n_, i);
        if (op == ReduceOp::kSum)
          ASSERT_EQ(got[i], sum) << i;
        else
          ASSERT_NEAR(got[i], sum / n_, average_tolerance(DType::kF32)) << i;
      }
    }
  }
}

// distributed.compression (and amp's auto) on GPU buffers: the f32 gradients are cast to the
// 16-bit wire type on the device (pre-scaled by 1/ranks), the algorithm runs over NCCL in
// that type, and the result comes back to f32. The values are integers in [-5, 5]: on 1 or 2
// ranks every step is exact; more ranks round the pre-scaled terms.
TEST_F(Nccl, CompressedAllreduceCastsOnTheDevice) {
  const int64_t count = 1000003;
  auto self = make_nccl(MPI_COMM_SELF, "self");
  for (DType wire : {DType::kF16, DType::kBF16}) {
    std::vector<std::pair<std::string, std::unique_ptr<AllreduceAlgorithm>>> cases;
    cases.emplace_back("flat", std::make_unique<CompressedAllreduce>(std::make_unique<FlatAllreduce>(world_), wire, n_));
    cases.emplace_back("hierarchical", std::make_unique<CompressedAllreduce>(
                                           std::make_unique<HierarchicalAllreduce>(world_, self), wire, n_));
    for (auto& [name, algorithm] : cases)
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
        SCOPED_TRACE(name + " " + dtype_name(wire) + " " + reduce_op_name(op));
        DeviceArray data(count, DType::kF32);
        data.upload(rank_values(r_, count));
        algorithm->run(data.buffer(), op)->wait();
        const std::vector<float> got = data.download();
        const double rounding = (wire == DType::kF16 ? 1e-3 : 8e-3) * n_;
        for (int64_t i = 0; i < count; ++i) {
          const float want = op == ReduceOp::kSum ? exact_sum(n_, i) : exact_sum(n_, i) / n_;
          if (n_ <= 2)
            ASSERT_EQ(got[i], want) << i;
          else
            ASSERT_NEAR(got[i], want, rounding * std::max(1.0f, std::fabs(want))) << i;
        }
      }
  }
}

// Last: it makes (and aborts) a communicator of its own.
TEST_F(Nccl, AbortThroughTheWatchdogHookEndsTheCommunicator) {
  auto comm = std::dynamic_pointer_cast<NcclCommunicator>(make_nccl(MPI_COMM_WORLD, "doomed"));
  ASSERT_NE(comm, nullptr);
  DeviceArray data(7, DType::kF32);
  data.upload(rank_values(r_, 7));
  comm->allreduce(data.buffer())->wait();
  int handled = 0;
  StallReport report;
  report.rank = r_;
  report.what = "allreduce";
  report.waited_s = 1.5;
  abort_nccl_then({comm}, [&](const StallReport&) { ++handled; })(report);
  EXPECT_EQ(handled, 1);
  EXPECT_TRUE(comm->aborted());
  try {
    comm->allreduce(data.buffer());
    ADD_FAILURE() << "allreduce on an aborted communicator did not throw";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("aborted"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'doomed'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(comm->barrier(), RuntimeError);
  comm->abort("again");  // idempotent
}

}  // namespace
}  // namespace sdp
