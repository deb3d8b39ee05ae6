// main() for GoogleTest binaries run under mpirun: MPI starts before the tests and stops
// after them, and only rank 0 prints (every rank still runs every test and its exit code
// counts: mpirun fails if any rank fails). Built with SDP_MPI_TEST_SKIP_CODE, a binary whose
// every test skipped exits with that code (sdp_mpi_test's SKIP_WHEN_ALL_SKIPPED).
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
#ifdef SDP_MPI_TEST_SKIP_CODE
  // A binary whose tests all need a device (the GPU tests): when nothing failed anywhere and
  // every test skipped, it exits with CTest's SKIP_RETURN_CODE, so `ctest` reports it skipped
  // rather than passed (the reason is in its output).
  const auto& unit = *::testing::UnitTest::GetInstance();
  if (!any_failed && unit.test_to_run_count() > 0 &&
      unit.skipped_test_count() == unit.test_to_run_count()) {
    sdp::finalize_mpi();
    return SDP_MPI_TEST_SKIP_CODE;
  }
#endif
  sdp::finalize_mpi();
  return failed;
}
