// The host stream's timed events: what nn/layer_profile.hpp's CPU times rest on; and the
// hand-over between a step's recording (train.cuda_graphs) and other threads' device work.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "core/stream.hpp"

namespace sdp {
namespace {

TEST(TimedEvent, HostEventsMeasureTheWorkBetweenTheirRecords) {
  HostStream stream;
  const auto start = stream.make_timed_event(), end = stream.make_timed_event();
  start->record();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  end->record();
  const double seconds = end->seconds_since(*start);
  EXPECT_GE(seconds, 0.020);
  EXPECT_LT(seconds, 5.0);
  // Recording again moves the mark: the next interval is the new work's alone.
  start->record();
  end->record();
  EXPECT_LT(end->seconds_since(*start), seconds);
}

// A loader thread's device-wide work (nvJPEG's decode, an allocation) waits while a recording
// is under way, and a recording waits for the work in flight: neither ever meets the other.
TEST(ConcurrentDeviceWork, WaitsForARecordingAndARecordingWaitsForIt) {
  std::atomic<bool> working{false}, worked{false};
  hold_back_concurrent_device_work();  // this thread records
  std::thread loader([&] {
    const ConcurrentDeviceWork work;
    working = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(working) << "device work ran during the recording";
  {
    const ConcurrentDeviceWork own;  // the recording thread's own: a no-op, it does not wait for itself
  }
  release_concurrent_device_work();
  loader.join();
  EXPECT_TRUE(working);

  std::atomic<bool> release{false};
  std::thread busy([&] {
    const ConcurrentDeviceWork outer;
    const ConcurrentDeviceWork nested;  // a decode that allocates
    worked = true;
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (!worked) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::atomic<int> order{0}, recorded_at{0}, late_at{0};
  std::thread recorder([&] {
    hold_back_concurrent_device_work();
    recorded_at = ++order;
    release_concurrent_device_work();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // Work that comes while a recording waits goes after it: the loader's threads, taking turns,
  // cannot keep a recording waiting.
  std::thread late([&] {
    const ConcurrentDeviceWork work;
    late_at = ++order;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(recorded_at, 0) << "the recording began during device work";
  EXPECT_EQ(late_at, 0) << "new device work went ahead of a waiting recording";
  release = true;
  busy.join();
  recorder.join();
  late.join();
  EXPECT_EQ(recorded_at, 1);
  EXPECT_EQ(late_at, 2);
}

TEST(ConcurrentDeviceWork, NoRecordingStartsInsideTheThreadsOwnDeviceWork) {
  const ConcurrentDeviceWork work;
  EXPECT_THROW(hold_back_concurrent_device_work(), std::logic_error);
  release_concurrent_device_work();  // nothing held: a no-op
}

}  // namespace
}  // namespace sdp
