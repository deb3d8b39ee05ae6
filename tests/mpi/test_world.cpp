#include <gtest/gtest.h>
#include <mpi.h>

#include <optional>
#include <set>

#include "core/error.hpp"
#include "distributed/agreement.hpp"
#include "distributed/world.hpp"

namespace sdp {
namespace {

int world_size() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

// Checks the invariants every topology must satisfy, whatever the grouping.
void expect_consistent(const World& w) {
  EXPECT_EQ(w.size(), world_size());
  EXPECT_EQ(w.rank(), world_rank());
  EXPECT_EQ(w.nodes() * w.local_size(), w.size());
  int intra_size = 0, inter_size = 0, inter_rank = 0, intra_rank = 0;
  MPI_Comm_size(w.intra(), &intra_size);
  MPI_Comm_size(w.inter(), &inter_size);
  MPI_Comm_rank(w.inter(), &inter_rank);
  MPI_Comm_rank(w.intra(), &intra_rank);
  EXPECT_EQ(intra_size, w.local_size());
  EXPECT_EQ(intra_rank, w.local_rank());
  EXPECT_EQ(inter_size, w.nodes());
  EXPECT_EQ(inter_rank, w.node());
  // intra groups ranks of one node: the sum of node ids over intra is local_size * node.
  int node_sum = 0, node = w.node();
  MPI_Allreduce(&node, &node_sum, 1, MPI_INT, MPI_SUM, w.intra());
  EXPECT_EQ(node_sum, w.local_size() * w.node());
  // inter groups one rank per node, all with my local_rank.
  int local_sum = 0;
  int mine = w.local_rank();
  MPI_Allreduce(&mine, &local_sum, 1, MPI_INT, MPI_SUM, w.inter());
  EXPECT_EQ(local_sum, w.nodes() * w.local_rank());
}

// The value MPI holds for its control variable `name` (MPI_T), or nullopt where it has none.
std::optional<unsigned> mpi_control_variable(const char* name) {
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return std::nullopt;
  std::optional<unsigned> value;
  int index = 0, count = 0;
  MPI_T_cvar_handle handle;
  if (MPI_T_cvar_get_index(name, &index) == MPI_SUCCESS &&
      MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
    unsigned read = 0;
    if (count == 1 && MPI_T_cvar_read(handle, &read) == MPI_SUCCESS) value = read;
    MPI_T_cvar_handle_free(&handle);
  }
  MPI_T_finalize();
  return value;
}

TEST(World, OpenMpisTcpTransportOpensTwoConnectionsToEachPeer) {
  // Over one, an AllReduce's both-way exchange reaches about half a full-duplex link (world.cpp).
  const std::optional<unsigned> links = mpi_control_variable("btl_tcp_links");
  if (!links) GTEST_SKIP() << "this MPI has no btl_tcp_links control variable (not Open MPI's TCP transport)";
  EXPECT_EQ(*links, 2u);
}

TEST(World, SharedMemoryGroupingPutsAllRanksOfThisMachineOnOneNode) {
  World w = World::create({});
  expect_consistent(w);
  EXPECT_EQ(w.nodes(), 1);
  EXPECT_EQ(w.local_size(), w.size());
  EXPECT_EQ(w.local_rank(), w.rank());
  EXPECT_NE(w.grouping().find("MPI_COMM_TYPE_SHARED"), std::string::npos);
}

TEST(World, RanksPerNodeOverrideSimulatesSeveralNodes) {
  for (int rpn = 1; rpn <= world_size(); ++rpn) {
    if (world_size() % rpn != 0) continue;
    TopologyOptions options;
    options.ranks_per_node = rpn;
    World w = World::create(options);
    expect_consistent(w);
    EXPECT_EQ(w.local_size(), rpn);
    EXPECT_EQ(w.nodes(), world_size() / rpn);
    EXPECT_EQ(w.node(), w.rank() / rpn);
    EXPECT_EQ(w.local_rank(), w.rank() % rpn);
    EXPECT_EQ(static_cast<int>(w.node_names().size()), w.nodes());
  }
}

TEST(World, RanksPerNodeThatDoesNotDivideTheWorldIsAnErrorOnEveryRank) {
  if (world_size() < 2) GTEST_SKIP() << "needs at least 2 ranks";
  TopologyOptions options;
  options.ranks_per_node = world_size() + 1;
  EXPECT_THROW(World::create(options), InputError);
  if (world_size() == 4) {
    options.ranks_per_node = 3;
    EXPECT_THROW(World::create(options), InputError);
  }
}

TEST(World, ResourceConfigWithOneHostGroupsAllRanks) {
  TopologyOptions options;
  options.resource_config = ResourceConfig{"rc.json", "algo-1", {"algo-1"}, "eth0"};
  World w = World::create(options);
  expect_consistent(w);
  EXPECT_EQ(w.nodes(), 1);
  EXPECT_EQ(w.node_name(), "algo-1");
}

TEST(World, ResourceConfigHostWithoutRanksIsAnError) {
  // Two hosts listed, but every rank runs here as algo-1: algo-2 would never join.
  TopologyOptions options;
  options.resource_config = ResourceConfig{"rc.json", "algo-1", {"algo-1", "algo-2"}, ""};
  try {
    World::create(options);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'algo-2'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("has no ranks"), std::string::npos) << e.what();
  }
}

TEST(World, ResourceConfigCurrentHostMustAgreeOnOneMachine) {
  if (world_size() < 2) GTEST_SKIP() << "needs at least 2 ranks";
  // Ranks that share memory claim different hosts: the config is not this machine's.
  TopologyOptions options;
  options.resource_config =
      ResourceConfig{"rc.json", world_rank() % 2 ? "algo-2" : "algo-1", {"algo-1", "algo-2"}, ""};
  EXPECT_THROW(World::create(options), InputError);
}

TEST(Agreement, NoFailureReturnsOnEveryRank) { EXPECT_NO_THROW(check_all_ranks(MPI_COMM_WORLD, nullptr)); }

TEST(Agreement, OneRankFailingStopsEveryRankWithItsCodeAndOneReporter) {
  const int failing = world_size() - 1;
  try {
    run_on_all_ranks(MPI_COMM_WORLD, [&] {
      if (world_rank() == failing) throw TimeoutError("bucket 3 never arrived");
    });
    FAIL() << "expected a CollectiveFailure on every rank";
  } catch (const CollectiveFailure& f) {
    EXPECT_EQ(f.exit_code(), static_cast<int>(ExitCode::kTimeout));
    EXPECT_EQ(f.report_here(), world_rank() == failing);
    if (f.report_here()) {
      EXPECT_NE(std::string(f.what()).find("bucket 3 never arrived"), std::string::npos);
      if (world_size() > 1)
        EXPECT_NE(std::string(f.what()).find("rank " + std::to_string(failing)), std::string::npos);
    }
  }
}

TEST(Agreement, AllRanksFailingTheSameWayIsReportedByRankZeroWithoutARankPrefix) {
  try {
    run_on_all_ranks(MPI_COMM_WORLD, [] { throw InputError("job.yaml:3: bad"); });
    FAIL() << "expected a CollectiveFailure";
  } catch (const CollectiveFailure& f) {
    EXPECT_EQ(f.exit_code(), 2);
    EXPECT_EQ(f.report_here(), world_rank() == 0);
    if (f.report_here()) EXPECT_STREQ(f.what(), "job.yaml:3: bad");
  }
}

}  // namespace
}  // namespace sdp
