// Which GPU and how many CPU threads a rank takes (distributed/device_assignment.hpp): the
// GPU choice that lets Slurm's --gpus-per-task (each rank sees only its own GPU) and a plain
// mpirun (every rank sees all of them) both work, and the threads' sources in order.
#include <gtest/gtest.h>

#include "distributed/device_assignment.hpp"

namespace sdp {
namespace {

using Lists = std::vector<std::vector<std::string>>;

TEST(ChooseGpu, RanksSeeingAllGpusTakeTheirLocalRank) {
  const Lists all(4, {"0000:1a", "0000:1b", "0000:3a", "0000:3b"});
  for (int r = 0; r < 4; ++r) EXPECT_EQ(choose_gpu(r, all).ordinal, r);
}

TEST(ChooseGpu, RanksGivenTheirOwnGpuTakeIt) {
  // srun --gpus-per-task=1: CUDA_VISIBLE_DEVICES differs per task, each sees one GPU as 0.
  const Lists own{{"0000:1a"}, {"0000:1b"}, {"0000:3a"}, {"0000:3b"}};
  for (int r = 0; r < 4; ++r) EXPECT_EQ(choose_gpu(r, own).ordinal, 0) << r;
}

TEST(ChooseGpu, RanksGivenTwoEachTakeTheirFirst) {
  const Lists pairs{{"a", "b"}, {"c", "d"}};
  EXPECT_EQ(choose_gpu(0, pairs).ordinal, 0);
  EXPECT_EQ(choose_gpu(1, pairs).ordinal, 0);
}

TEST(ChooseGpu, OverlappingListsShareOutDistinctGpus) {
  // Rank 1 sees rank 0's GPU first (a launcher listing GPUs in another order).
  const Lists overlap{{"a", "b"}, {"a", "b"}, {"b", "c"}};
  EXPECT_EQ(choose_gpu(0, overlap).ordinal, 0);
  EXPECT_EQ(choose_gpu(1, overlap).ordinal, 1);
  EXPECT_EQ(choose_gpu(2, overlap).ordinal, 1);  // "c": a and b are taken
}

TEST(ChooseGpu, MoreRanksThanGpusIsAProblemNamingTheRank) {
  const Lists two_for_three(3, {"a", "b"});
  EXPECT_EQ(choose_gpu(1, two_for_three).ordinal, 1);
  const GpuChoice third = choose_gpu(2, two_for_three);
  EXPECT_EQ(third.ordinal, -1);
  EXPECT_NE(third.problem.find("local rank 2"), std::string::npos) << third.problem;
  EXPECT_NE(third.problem.find("taken"), std::string::npos) << third.problem;
  // The same GPU given to two ranks (CUDA_VISIBLE_DEVICES=0 for everyone).
  const Lists same{{"a"}, {"a"}};
  EXPECT_EQ(choose_gpu(1, same).ordinal, -1);
  const Lists none{{}, {}};
  EXPECT_NE(choose_gpu(0, none).problem.find("sees no GPU"), std::string::npos);
}

TEST(ChooseGpu, SharingGivesLeftOverRanksAGpuInTurn) {
  // distributed.share_gpus: 4 ranks on 1 GPU, 3 ranks on 2.
  const Lists one(4, {"a"});
  for (int r = 0; r < 4; ++r) EXPECT_EQ(choose_gpu(r, one, true).ordinal, 0) << r;
  const Lists two(3, {"a", "b"});
  EXPECT_EQ(choose_gpu(0, two, true).ordinal, 0);
  EXPECT_EQ(choose_gpu(1, two, true).ordinal, 1);
  EXPECT_EQ(choose_gpu(2, two, true).ordinal, 0);
  // Still no GPU at all is a problem.
  EXPECT_EQ(choose_gpu(0, Lists{{}}, true).ordinal, -1);
}

MachineShare two_ranks_on_four_cpus() {
  MachineShare share;
  share.usable_cpus = 4;
  share.sharing_ranks = 2;
  return share;
}

TEST(ChooseThreads, KeyThenOmpThenSlurmThenTheShare) {
  const MachineShare share = two_ranks_on_four_cpus();
  EXPECT_EQ(choose_threads(3, "5", "6", share).source, "threads");
  EXPECT_EQ(choose_threads(3, "5", "6", share).threads, 3);
  EXPECT_EQ(choose_threads(0, "5", "6", share).source, "OMP_NUM_THREADS");
  EXPECT_EQ(choose_threads(0, "5", "6", share).threads, 5);
  EXPECT_EQ(choose_threads(0, nullptr, "3", share).source, "SLURM_CPUS_PER_TASK");
  EXPECT_EQ(choose_threads(0, nullptr, "3", share).threads, 3);
  EXPECT_EQ(choose_threads(0, nullptr, nullptr, share).source, kThreadsFromShare);
  EXPECT_EQ(choose_threads(0, nullptr, nullptr, share).threads, 2);
  // Empty or zero values count as unset.
  EXPECT_EQ(choose_threads(0, "", "0", share).source, kThreadsFromShare);
}

TEST(ChooseThreads, SlurmCpusAreCappedAtTheRanksCpuSet) {
  // --cpus-per-task=8 on a rank that may run on 4 CPUs: 4 threads, not 8 time-sharing 4.
  EXPECT_EQ(choose_threads(0, nullptr, "8", two_ranks_on_four_cpus()).threads, 4);
}

}  // namespace
}  // namespace sdp
