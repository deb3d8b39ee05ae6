// BoundedQueue: the hand-off under the prefetcher, the record stream and the Pipe-mode feeder.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/bounded_queue.hpp"

namespace sdp {
namespace {

TEST(BoundedQueue, HandsItemsOverInOrderThenEnds) {
  BoundedQueue<int> q(3);
  std::thread producer([&] {
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(q.push(int{i}));
    q.close();
  });
  std::vector<int> got;
  int v = 0;
  while (q.pop(v)) got.push_back(v);
  producer.join();
  ASSERT_EQ(got.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(got[i], i);
  EXPECT_FALSE(q.pop(v)) << "a closed, drained queue stays ended";
}

TEST(BoundedQueue, PushWaitsWhileFull) {
  BoundedQueue<int> q(2);
  ASSERT_TRUE(q.push(1));
  ASSERT_TRUE(q.push(2));
  std::atomic<bool> pushed{false};
  std::thread producer([&] {
    q.push(3);
    pushed = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(pushed) << "a third item went into a queue of two";
  int v = 0;
  ASSERT_TRUE(q.pop(v));
  producer.join();
  EXPECT_TRUE(pushed);
}

TEST(BoundedQueue, TheProducersErrorComesAfterTheItemsBeforeIt) {
  BoundedQueue<int> q(4);
  q.push(7);
  q.close(std::make_exception_ptr(std::runtime_error("record 3 is corrupt")));
  int v = 0;
  ASSERT_TRUE(q.pop(v));
  EXPECT_EQ(v, 7);
  EXPECT_THROW(q.pop(v), std::runtime_error);
}

TEST(BoundedQueue, StopWakesBothSidesForGood) {
  BoundedQueue<int> full(1), empty(1);
  full.push(1);
  bool push_result = true, pop_result = true;
  std::thread producer([&] { push_result = full.push(2); });
  std::thread consumer([&] {
    int v = 0;
    pop_result = empty.pop(v);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  full.stop();
  empty.stop();
  producer.join();
  consumer.join();
  EXPECT_FALSE(push_result);
  EXPECT_FALSE(pop_result);
  EXPECT_TRUE(full.stopped());
  int v = 0;
  EXPECT_FALSE(full.pop(v)) << "a stopped queue hands nothing out";
  full.reset();
  EXPECT_FALSE(full.stopped());
  EXPECT_FALSE(full.ready()) << "reset empties it";
  EXPECT_TRUE(full.push(5));
  EXPECT_TRUE(full.pop(v));
  EXPECT_EQ(v, 5);
}

TEST(BoundedQueue, WaitClosedTimesOut) {
  BoundedQueue<int> q(1);
  EXPECT_FALSE(q.wait_closed(std::chrono::milliseconds(20)));
  std::thread producer([&] { q.close(); });
  EXPECT_TRUE(q.wait_closed(std::chrono::milliseconds(5000)));
  producer.join();
}

}  // namespace
}  // namespace sdp
