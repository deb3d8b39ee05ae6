// The ring AllReduce's schedule (distributed/ring_schedule.hpp), shared by the ring over
// communicators and the socket ring: neighbours agree on every transfer, and every part is
// summed once and then reaches every rank.
#include "distributed/ring_schedule.hpp"

#include <gtest/gtest.h>

#include <set>

namespace sdp {
namespace {

TEST(RingSchedule, NeighboursAgreeAndEveryPartIsSummedThenShared) {
  for (int n = 2; n <= 9; ++n) {
    for (int r = 0; r < n; ++r) {
      const int left = (r - 1 + n) % n;
      std::set<int> sent, received;
      for (int s = 0; s < n - 1; ++s) {
        const ring::Step mine = ring::reduce_scatter_step(r, n, s);
        // What I receive at step s is what my left neighbour sends at step s.
        EXPECT_EQ(mine.recv_part, ring::reduce_scatter_step(left, n, s).send_part) << n << " " << r << " " << s;
        // From step 1 on I send the part I completed at the step before.
        if (s > 0) EXPECT_EQ(mine.send_part, ring::reduce_scatter_step(r, n, s - 1).recv_part);
        sent.insert(mine.send_part);
        received.insert(mine.recv_part);
      }
      EXPECT_EQ(sent.size(), static_cast<std::size_t>(n - 1));
      EXPECT_EQ(received.size(), static_cast<std::size_t>(n - 1));
      // The part I completed last, (r + 1), is the one I pass on first in the allgather.
      const int complete = (r + 1) % n;
      EXPECT_EQ(ring::reduce_scatter_step(r, n, n - 2).recv_part, complete);
      EXPECT_EQ(ring::allgather_step(r, n, 0).send_part, complete);
      std::set<int> gathered{complete};
      for (int s = 0; s < n - 1; ++s) {
        const ring::Step mine = ring::allgather_step(r, n, s);
        EXPECT_EQ(mine.recv_part, ring::allgather_step(left, n, s).send_part);
        if (s > 0) EXPECT_EQ(mine.send_part, ring::allgather_step(r, n, s - 1).recv_part);
        gathered.insert(mine.recv_part);
      }
      EXPECT_EQ(gathered.size(), static_cast<std::size_t>(n)) << "rank " << r << " of " << n << " misses a part";
    }
  }
}

}  // namespace
}  // namespace sdp
