#include "distributed/agreement.hpp"

#include <climits>
#include <cstdio>
#include <cstdlib>

#include "core/error.hpp"
#include "core/job_failure.hpp"
#include "distributed/mpi_check.hpp"
#include "distributed/world.hpp"

namespace sdp {

void check_all_ranks(MPI_Comm comm, std::exception_ptr local) {
  int rank = 0;
  SDP_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  int mine = local ? rank : INT_MAX;
  int first = INT_MAX;
  SDP_MPI_CHECK(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm));
  if (first == INT_MAX) return;

  int failed_here = local ? 1 : 0, failed_count = 0;
  SDP_MPI_CHECK(MPI_Allreduce(&failed_here, &failed_count, 1, MPI_INT, MPI_SUM, comm));

  int code = static_cast<int>(ExitCode::kRuntime);  // not an sdp::Error: a bug, or the system
  std::string message;
  if (local) {
    try {
      std::rethrow_exception(local);
    } catch (const Error& e) {
      code = static_cast<int>(e.code());
      message = e.what();
    } catch (const std::exception& e) {
      message = e.what();
    } catch (...) {
      message = "unknown error";
    }
  }
  SDP_MPI_CHECK(MPI_Bcast(&code, 1, MPI_INT, first, comm));
  int size = 1;
  MPI_Comm_size(comm, &size);
  // When every rank failed they failed the same way (same input); name a rank otherwise.
  if (rank == first && failed_count < size) {
    message = "rank " + std::to_string(rank) + ": " + message;
    if (failed_count > 1) message += " (and " + std::to_string(failed_count - 1) + " other ranks)";
  }
  throw CollectiveFailure(static_cast<ExitCode>(code), message, rank == first);
}

void end_job_from_this_rank(MPI_Comm world, std::exception_ptr error) {
  int size = 1, rank = 0;
  MPI_Comm_size(world, &size);
  MPI_Comm_rank(world, &rank);
  if (size == 1) std::rethrow_exception(error);
  int code = static_cast<int>(ExitCode::kRuntime);
  std::string what = "unknown error";
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    code = static_cast<int>(e.code());
    what = e.what();
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  report_job_error("rank " + std::to_string(rank) + ": " + what);
  abort_job(code);
}

}  // namespace sdp
