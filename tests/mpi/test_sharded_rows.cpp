// A row-sharded table's traffic (ctr/sharded_rows.hpp) on every topology of 1 to 4 ranks: fetch
// gives each id of a batch its row from the rank that owns it, asking for each id once a node,
// and reduce leaves each owner its rows' gradients summed to the same bits as the replicated
// table's sparse exchange (ctr/row_exchange.hpp) sums them, for ids no rank, one rank or every
// rank touched.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "ctr/row_exchange.hpp"
#include "ctr/sharded_rows.hpp"
#include "ctr/sparse_rows.hpp"
#include "distributed/allreduce.hpp"
#include "distributed/collectives.hpp"
#include "distributed/world.hpp"

namespace sdp {
namespace {

constexpr int kWidth = 5;
constexpr int64_t kRows = 301;

float table_value(int64_t id, int j) { return static_cast<float>(id) * 0.5f + static_cast<float>(j) * 0.25f; }

// Rank `rank`'s ids of step `step`: 0 on every rank, 2 + rank on that rank alone, random others
// with repeats (ids >= 290 on no rank).
std::vector<int64_t> rank_ids(int rank, int step) {
  std::mt19937 random(static_cast<unsigned>(rank * 1000 + step));
  std::vector<int64_t> ids = {0, 2 + rank, 0};
  for (int i = 0; i < 60; ++i) ids.push_back(10 + static_cast<int64_t>(random() % 280));
  std::shuffle(ids.begin(), ids.end(), random);
  return ids;
}

TEST(ShardedRows, FetchesOwnersRowsAndSumsGradientsAsTheSparseExchange) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int rpn = 1; rpn <= size; ++rpn) {
    if (size % rpn) continue;
    World world = World::create({rpn, std::nullopt});
    ShardedRows sharded(world, kWidth);
    const TableShard shard = sharded.shard();
    ASSERT_EQ(shard.index, world.rank());
    ASSERT_EQ(shard.count, world.size());
    std::vector<float> mine(static_cast<size_t>(shard.rows(kRows) * kWidth));
    for (int64_t l = 0; l < shard.rows(kRows); ++l)
      for (int j = 0; j < kWidth; ++j) mine[static_cast<size_t>(l * kWidth + j)] = table_value(shard.global_id(l), j);
    AllreduceSetup setup;
    RowExchange replicated(world, kRows, kWidth, RowExchangeKind::kSparse, make_allreduce(world, setup));
    RowAccumulator by_slot, by_id, expected, out;
    for (int step = 0; step < 3; ++step) {
      const std::vector<int64_t> ids = rank_ids(world.rank(), step);
      const auto count = static_cast<int64_t>(ids.size());
      sharded.fetch(ids.data(), count, mine.data());
      std::set<int64_t> distinct(ids.begin(), ids.end());
      ASSERT_EQ(sharded.unique(), static_cast<int64_t>(distinct.size()));
      // Deduplicated per node: the owners serve each node's unique ids once.
      int64_t served = sharded.served(), node_unique = 0;
      MPI_Allreduce(MPI_IN_PLACE, &served, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
      for (int n = 0; n < world.nodes(); ++n) {
        std::set<int64_t> node;
        for (int r = 0; r < size; ++r)
          if (world.rank_nodes()[static_cast<size_t>(r)] == n)
            for (int64_t id : rank_ids(r, step)) node.insert(id);
        node_unique += static_cast<int64_t>(node.size());
      }
      EXPECT_EQ(served, node_unique) << "ranks per node " << rpn << ", step " << step;
      for (int64_t p = 0; p < count; ++p) {
        const int64_t slot = sharded.slots()[p];
        ASSERT_GE(slot, 0);
        ASSERT_LT(slot, sharded.unique());
        for (int j = 0; j < kWidth; ++j)
          ASSERT_EQ(sharded.rows()[slot * kWidth + j], table_value(ids[static_cast<size_t>(p)], j))
              << "ranks per node " << rpn << ", step " << step << ", id " << ids[static_cast<size_t>(p)];
      }
      // Each pair's gradient, fractional (the sums' order shows in their bits), summed per id
      // on the rank: keyed by slot for the sharded table, by id for the replicated one.
      std::mt19937 random(static_cast<unsigned>(world.rank() * 77 + step));
      std::uniform_real_distribution<float> value(-1.0f, 1.0f);
      by_slot.reset(kWidth, count);
      by_id.reset(kWidth, count);
      for (int64_t p = 0; p < count; ++p) {
        float row[kWidth];
        for (float& v : row) v = value(random);
        by_slot.add(sharded.slots()[p], row);
        by_id.add(ids[static_cast<size_t>(p)], row);
      }
      replicated.run(by_id.rows(), expected);
      sharded.reduce(by_slot.rows(), out);
      std::map<int64_t, const float*> want;
      for (int64_t i = 0; i < expected.rows().size(); ++i)
        if (shard.owner(expected.rows().ids[static_cast<size_t>(i)]) == shard.index)
          want[expected.rows().ids[static_cast<size_t>(i)]] = expected.rows().row(i);
      ASSERT_EQ(out.rows().size(), static_cast<int64_t>(want.size())) << "ranks per node " << rpn;
      for (int64_t i = 0; i < out.rows().size(); ++i) {
        const int64_t id = shard.global_id(out.rows().ids[static_cast<size_t>(i)]);
        ASSERT_EQ(want.count(id), 1u) << "id " << id << " is not this shard's, or no rank touched it";
        EXPECT_EQ(std::memcmp(out.rows().row(i), want[id], sizeof(float) * kWidth), 0)
            << "id " << id << ": not the replicated exchange's bits (ranks per node " << rpn << ", step " << step << ")";
      }
    }
  }
}

// A rank with nothing to fetch (an evaluation's last chunks) still takes part.
TEST(ShardedRows, ARankWithNoIdsTakesPart) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  World world = World::create({size, std::nullopt});
  ShardedRows sharded(world, kWidth);
  const TableShard shard = sharded.shard();
  std::vector<float> mine(static_cast<size_t>(shard.rows(kRows) * kWidth));
  for (int64_t l = 0; l < shard.rows(kRows); ++l)
    for (int j = 0; j < kWidth; ++j) mine[static_cast<size_t>(l * kWidth + j)] = table_value(shard.global_id(l), j);
  std::vector<int64_t> ids;
  if (world.rank() == 0) ids = {7, 300, 7};
  sharded.fetch(ids.data(), static_cast<int64_t>(ids.size()), mine.data());
  if (world.rank() == 0) {
    ASSERT_EQ(sharded.unique(), 2);
    EXPECT_EQ(sharded.rows()[sharded.slots()[2] * kWidth + 1], table_value(7, 1));
    EXPECT_EQ(sharded.rows()[sharded.slots()[1] * kWidth], table_value(300, 0));
  } else {
    EXPECT_EQ(sharded.unique(), 0);
  }
}

TEST(TableShard, DealsEveryRowToOneRank) {
  for (int count = 1; count <= 5; ++count) {
    int64_t total = 0;
    for (int index = 0; index < count; ++index) {
      const TableShard s{index, count};
      total += s.rows(kRows);
      for (int64_t l = 0; l < s.rows(kRows); ++l) {
        ASSERT_LT(s.global_id(l), kRows);
        ASSERT_EQ(s.owner(s.global_id(l)), index);
        ASSERT_EQ(s.local_row(s.global_id(l)), l);
      }
    }
    EXPECT_EQ(total, kRows) << count << " shards";
  }
  EXPECT_EQ((TableShard{3, 4}.rows(3)), 0);
}

}  // namespace
}  // namespace sdp
