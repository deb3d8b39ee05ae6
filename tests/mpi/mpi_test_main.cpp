// main() for GoogleTest binaries run under mpirun: MPI starts before the tests and stops
// after them, and only rank 0 prints (every rank still runs every test and its exit code
// counts: mpirun fails if any rank fails).
#include <gtest/gtest.h>
#include <mpi.h>

#include "distributed/world.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  sdp::init_mpi(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS();
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && any_failed && !failed) std::fprintf(stderr, "a test failed on another rank\n");
  sdp::finalize_mpi();
  return failed;
}
