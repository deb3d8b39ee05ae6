// Watchdog and replica check. The watchdog polls a Work (here a HostWork another thread
// completes after a delay, as the communication thread does a bucket's). The timeout path
// is tested through a handler that records the report instead of aborting; the default handler (MPI_Abort, exit 3) is exercised by the
// trainer's end-to-end test with SDP_TEST_STALL_RANK.
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <cmath>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "distributed/host_work.hpp"
#include "distributed/replica_check.hpp"
#include "distributed/watchdog.hpp"
#include "distributed/world.hpp"

namespace sdp {
namespace {

// Issues a collective on `dog` and waits for a Work that completes after `ms` milliseconds.
void wait_for_collective(Watchdog& dog, int64_t step, int bucket, const char* what, int ms) {
  HostWork work;
  const WatchTicket ticket = dog.issue(step, bucket, what);
  std::thread runner([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    work.complete();
  });
  dog.wait(work, ticket);
  runner.join();
}

struct Recorder {
  std::mutex mutex;
  std::vector<StallReport> warnings, timeouts;
  Watchdog::Handler warn() {
    return [this](const StallReport& r) {
      std::lock_guard<std::mutex> lock(mutex);
      warnings.push_back(r);
    };
  }
  Watchdog::Handler timeout() {
    return [this](const StallReport& r) {
      std::lock_guard<std::mutex> lock(mutex);
      timeouts.push_back(r);
    };
  }
};

// A blocking collective (watch): the monitor thread warns and times out on it as wait() does
// for a Work, names it, says nothing of a fast one, and lets the call's exception through.
TEST(Watchdog, WatchesABlockingCall) {
  Recorder rec;
  {
    Watchdog dog({0.05, 0.2}, 2, nullptr, rec.warn(), rec.timeout());
    bool ran = false;
    dog.watch(4, "evaluation allreduce", [&] { ran = true; });  // fast
    EXPECT_TRUE(ran);
    dog.watch(7, "checkpoint broadcast", [] { std::this_thread::sleep_for(std::chrono::milliseconds(500)); });
    EXPECT_THROW(dog.watch(8, "timeline gather", [] { throw std::runtime_error("peer lost"); }), std::runtime_error);
  }
  ASSERT_GE(rec.warnings.size(), 1u);
  for (const StallReport& r : rec.warnings) EXPECT_EQ(r.what, "checkpoint broadcast");
  EXPECT_EQ(rec.warnings[0].step, 7);
  EXPECT_EQ(rec.warnings[0].bucket, -1);
  EXPECT_EQ(rec.warnings[0].rank, 2);
  ASSERT_EQ(rec.timeouts.size(), 1u);  // once per collective
  EXPECT_EQ(rec.timeouts[0].what, "checkpoint broadcast");
  EXPECT_GE(rec.timeouts[0].waited_s, 0.2);
  EXPECT_EQ(rec.timeouts[0].sequence, 2);  // the second collective this watchdog issued
}

TEST(Watchdog, WarnsWithRankStepAndBucketAndStaysQuietForFastCollectives) {
  Recorder rec;
  {
    Watchdog dog({0.05, 10.0}, 3, nullptr, rec.warn(), rec.timeout());
    dog.wait(*completed_work(), dog.issue(1, 0, "allreduce"));  // fast
    wait_for_collective(dog, 5, 2, "allreduce", 150);             // slow
  }
  ASSERT_GE(rec.warnings.size(), 1u);
  EXPECT_TRUE(rec.timeouts.empty());
  const StallReport& r = rec.warnings.front();
  EXPECT_EQ(r.step, 5);
  EXPECT_EQ(r.bucket, 2);
  EXPECT_EQ(r.sequence, 2);
  EXPECT_GE(r.waited_s, 0.05);
  EXPECT_NE(r.message().find("rank 3 step 5 bucket 2: allreduce"), std::string::npos) << r.message();
}

TEST(Watchdog, TimeoutNamesTheRankThatNeverArrived) {
  World world = World::create({});
  auto board = ProgressBoard::create(world);
  const int stalled = world.size() - 1;
  Recorder rec;
  {
    Watchdog dog({0.05, 0.2}, world.rank(), board, rec.warn(), rec.timeout());
    if (world.rank() != stalled)
      wait_for_collective(dog, 7, 1, "allreduce", 400);  // "stuck" waiting for the stalled rank
    MPI_Barrier(MPI_COMM_WORLD);  // the stalled rank catches up
  }
  if (world.rank() == stalled) {
    EXPECT_TRUE(rec.timeouts.empty());
    return;
  }
  ASSERT_EQ(rec.timeouts.size(), 1u);  // once, not on every poll
  const StallReport& r = rec.timeouts.front();
  EXPECT_EQ(r.missing_ranks, std::vector<int>{stalled});
  EXPECT_TRUE(r.unchecked_nodes.empty());
  EXPECT_NE(r.message().find("never arrived: " + std::to_string(stalled)), std::string::npos) << r.message();
}

TEST(Watchdog, SaysWhatItCannotKnowAboutOtherNodes) {
  World world = World::create({1, std::nullopt});  // every rank its own node
  auto board = ProgressBoard::create(world);
  Recorder rec;
  {
    Watchdog dog({0, 0.05}, world.rank(), board, rec.warn(), rec.timeout());
    wait_for_collective(dog, 0, -1, "barrier", 150);
  }
  ASSERT_EQ(rec.timeouts.size(), 1u);
  EXPECT_TRUE(rec.warnings.empty());  // stall_warning_s = 0: never warn
  EXPECT_TRUE(rec.timeouts[0].missing_ranks.empty());
  EXPECT_EQ(static_cast<int>(rec.timeouts[0].unchecked_nodes.size()), world.nodes() - 1);
  if (world.nodes() > 1)
    EXPECT_NE(rec.timeouts[0].message().find("cannot be inspected"), std::string::npos) << rec.timeouts[0].message();
  // Each such node by its host and ranks (every rank is its own node here: rank r on node r).
  ASSERT_EQ(rec.timeouts[0].unchecked_hosts.size(), rec.timeouts[0].unchecked_nodes.size());
  for (std::size_t i = 0; i < rec.timeouts[0].unchecked_nodes.size(); ++i) {
    const int node = rec.timeouts[0].unchecked_nodes[i];
    const std::string label = world.node_names()[node] + ": rank(s) " + std::to_string(node);
    EXPECT_EQ(rec.timeouts[0].unchecked_hosts[i], label);
    EXPECT_NE(rec.timeouts[0].message().find(label), std::string::npos) << rec.timeouts[0].message();
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(ReplicaCheck, FindsThePerturbedRank) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<float> params(1001);
  for (std::size_t i = 0; i < params.size(); ++i) params[i] = 0.001f * static_cast<float>(i);
  EXPECT_TRUE(check_replicas(MPI_COMM_WORLD, params.data(), params.size() * 4).empty());
  const int perturbed = size - 1;
  if (rank == perturbed && size > 1) params[777] = std::nextafter(params[777], 1.0f);  // one ulp
  const auto differing = check_replicas(MPI_COMM_WORLD, params.data(), params.size() * 4);
  if (size > 1)
    EXPECT_EQ(differing, std::vector<int>{perturbed});
  else
    EXPECT_TRUE(differing.empty());
  // Every byte counts, including a tail shorter than a word.
  EXPECT_NE(checksum_bytes("abcdefghijklmnopqrstuvwxyz0123456789", 36),
            checksum_bytes("abcdefghijklmnopqrstuvwxyz0123456788", 36));
  EXPECT_NE(checksum_bytes("abc", 3), checksum_bytes("abd", 3));
}

}  // namespace
}  // namespace sdp
