// The CTR table's row exchange (ctr/row_exchange.hpp) on every topology of 1 to 4 ranks: sparse
// and dense give every rank the rows any rank touched, summed exactly (integer-valued rows),
// with ids no rank, one rank or every rank touched; with fractional rows every rank holds the
// same bits; auto takes the way of fewer bytes.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "core/crc32c.hpp"
#include "ctr/row_exchange.hpp"
#include "ctr/sparse_rows.hpp"
#include "distributed/allreduce.hpp"
#include "distributed/collectives.hpp"
#include "distributed/world.hpp"

namespace sdp {
namespace {

constexpr int kWidth = 5;
constexpr int64_t kRows = 300;

// Rank `rank`'s unique rows of step `step`: ids 0 and 1 on every rank, 2 + rank on that rank
// alone, and random others (ids >= 290 on no rank); values integers (exact sums) or fractions.
SparseRows rank_rows(int rank, int step, bool integers) {
  std::mt19937 random(static_cast<unsigned>(rank * 1000 + step));
  std::vector<int64_t> ids = {0, 1, 2 + rank};
  for (int i = 0; i < 40; ++i) ids.push_back(10 + static_cast<int64_t>(random() % 280));
  // Duplicates summed first, as the trainer's RowAccumulator does; in a shuffled order.
  std::shuffle(ids.begin(), ids.end(), random);
  RowAccumulator acc;
  acc.reset(kWidth, 64);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (int64_t id : ids) {
    float row[kWidth];
    for (float& v : row) v = integers ? static_cast<float>(static_cast<int>(random() % 9) - 4) : value(random);
    acc.add(id, row);
  }
  return acc.rows();
}

std::map<int64_t, std::vector<float>> as_map(const SparseRows& rows) {
  std::map<int64_t, std::vector<float>> out;
  for (int64_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(out.count(rows.ids[static_cast<size_t>(i)]), 0u) << "id " << rows.ids[static_cast<size_t>(i)] << " twice";
    out[rows.ids[static_cast<size_t>(i)]] = std::vector<float>(rows.row(i), rows.row(i) + rows.width);
  }
  return out;
}

void check_every_topology(RowExchangeKind kind, const char* algorithm,
                          Compression compression = Compression::kNone) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int rpn = 1; rpn <= size; ++rpn) {
    if (size % rpn) continue;
    World world = World::create({rpn, std::nullopt});
    AllreduceSetup setup;
    setup.algorithm = algorithm[0] == 'h' ? AllreduceKind::kHierarchical : AllreduceKind::kFlat;
    setup.compression = compression;
    RowExchange exchange(world, kRows, kWidth, kind, make_allreduce(world, setup), compression);
    RowAccumulator out;
    for (int step = 0; step < 3; ++step) {
      // Exact: integer rows sum to the same value in any order.
      std::map<int64_t, std::vector<float>> expected;
      for (int r = 0; r < size; ++r)
        for (const auto& [id, row] : as_map(rank_rows(r, step, true))) {
          std::vector<float>& sum = expected[id];
          sum.resize(kWidth, 0.0f);
          for (int k = 0; k < kWidth; ++k) sum[static_cast<size_t>(k)] += row[static_cast<size_t>(k)];
        }
      const SparseRows exact = rank_rows(world.rank(), step, true);
      exchange.run(exact, out, allgather_ints(MPI_COMM_WORLD, static_cast<int>(exact.size())));
      EXPECT_EQ(as_map(out.rows()), expected) << "ranks per node " << rpn << ", step " << step;
      EXPECT_EQ(exchange.last().rows, static_cast<int64_t>(expected.size()));
      EXPECT_EQ(expected.count(299), 0u);
      // Fractions: every rank the same bits.
      const SparseRows fractions = rank_rows(world.rank(), step, false);
      exchange.run(fractions, out, allgather_ints(MPI_COMM_WORLD, static_cast<int>(fractions.size())));
      const std::map<int64_t, std::vector<float>> mine = as_map(out.rows());
      uint32_t crc = 0;
      for (const auto& [id, row] : mine) {
        crc = crc32c_extend(crc, &id, sizeof id);
        crc = crc32c_extend(crc, row.data(), row.size() * sizeof(float));
      }
      EXPECT_EQ(first_rank_differing(MPI_COMM_WORLD, crc), -1) << "ranks per node " << rpn;
      if (kind == RowExchangeKind::kDense) EXPECT_TRUE(exchange.last().dense);
      if (kind == RowExchangeKind::kSparse) EXPECT_FALSE(exchange.last().dense);
    }
  }
}

TEST(RowExchange, SparseSumsEveryRanksRowsOnEveryTopology) { check_every_topology(RowExchangeKind::kSparse, "flat"); }

// In 16 bits across nodes: the integer rows' sums are exact in f16 and bf16 too, and every rank
// holds the same bits; fewer bytes cross than in f32.
TEST(RowExchange, CompressedSumsEveryRanksRowsOnEveryTopology) {
  check_every_topology(RowExchangeKind::kSparse, "flat", Compression::kFp16);
  check_every_topology(RowExchangeKind::kSparse, "flat", Compression::kBf16);
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) GTEST_SKIP() << "one rank: no node to cross";
  World world = World::create({1, std::nullopt});  // every rank a node of its own
  const auto received = [&](Compression compression) {
    RowExchange exchange(world, kRows, kWidth, RowExchangeKind::kSparse, make_allreduce(world, {}), compression);
    RowAccumulator out;
    exchange.run(rank_rows(world.rank(), 0, false), out);
    return exchange.last().bytes_received;
  };
  const int64_t f32 = received(Compression::kNone), f16 = received(Compression::kFp16);
  EXPECT_LT(f16, f32 * 3 / 4);
  EXPECT_EQ(f16 * (4 + 2 * kWidth), f32 * (4 + kWidth));  // (8 + 2 W) against (8 + 4 W) bytes a row
}

TEST(RowExchange, DenseSumsEveryRanksRowsOnEveryTopology) {
  check_every_topology(RowExchangeKind::kDense, "flat");
  check_every_topology(RowExchangeKind::kDense, "hierarchical");
}

TEST(RowExchange, AutoTakesTheWayOfFewerBytes) {
  // 4 ranks on 2 nodes, rows of 17 floats: a few thousand rows a rank are far below a table of
  // a million rows, and far above a table of a thousand.
  const std::vector<int> unique(4, 4000);
  const ExchangeBytes big = estimate_bytes(unique, 2, 2, 17, 1000000);
  EXPECT_LT(big.sparse, big.dense);
  const ExchangeBytes small = estimate_bytes(unique, 2, 2, 17, 1000);
  EXPECT_GT(small.sparse, small.dense);
  EXPECT_EQ(estimate_bytes({4000}, 1, 1, 17, 1000).dense, 0.0);  // one rank moves nothing
  // auto on this world: the exchange still sums exactly, whichever way it took.
  check_every_topology(RowExchangeKind::kAuto, "flat");
}

}  // namespace
}  // namespace sdp
