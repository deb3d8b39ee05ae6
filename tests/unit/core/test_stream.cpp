// The host stream's timed events: what nn/layer_profile.hpp's CPU times rest on.
#include <gtest/gtest.h>

#include <chrono>
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

}  // namespace
}  // namespace sdp
