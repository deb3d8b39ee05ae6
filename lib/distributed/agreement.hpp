// Collective error agreement. Every rank calls check_all_ranks() at the same point with the
// error it met (or none). If any rank failed, every rank throws CollectiveFailure with the
// first failing rank's exit code, and only that rank holds the message to print, so an
// error is printed once and no rank is left waiting in a later collective.
//
// Control plane: this runs over MPI directly (a few ints), never through a Communicator.
#pragma once

#include <mpi.h>

#include <exception>
#include <string>

#include "core/error.hpp"

namespace sdp {

// An sdp::Error every rank throws together (the job is ending in order, no MPI_Abort
// needed). Exactly one rank reports it: main prints what() where report_here() is true.
class CollectiveFailure : public Error {
 public:
  CollectiveFailure(ExitCode code, const std::string& message, bool report_here)
      : Error(code, message), report_here_(report_here) {}
  int exit_code() const { return static_cast<int>(code()); }
  // True on the one rank that must print the message.
  bool report_here() const { return report_here_; }

 private:
  bool report_here_;
};

// An error this rank met alone while the others may be inside a collective (a bad record in
// its share of the data, a failed read): no agreement can be reached, and unwinding would run
// destructors that are collective themselves (freeing a shared window waits for every rank).
// Prints "sdp-train: error: rank R: <what>" and ends the whole job now with MPI_Abort and the
// error's exit status. On a world of one rank it rethrows instead: nothing can hang there.
[[noreturn]] void end_job_from_this_rank(MPI_Comm world, std::exception_ptr error);

// Runs `body`; an error every rank met together (CollectiveFailure) propagates, any other ends
// the job from this rank (end_job_from_this_rank) while the caller's objects are still alive.
template <typename Body>
auto end_job_on_local_error(MPI_Comm world, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const CollectiveFailure&) {
    throw;
  } catch (...) {
    end_job_from_this_rank(world, std::current_exception());
  }
}

// `local` is the exception this rank caught, or nullptr. Returns when no rank failed.
void check_all_ranks(MPI_Comm comm, std::exception_ptr local);

// Runs `step` on every rank and agrees on its outcome (see check_all_ranks).
template <typename Step>
void run_on_all_ranks(MPI_Comm comm, Step&& step) {
  std::exception_ptr error;
  try {
    step();
  } catch (...) {
    error = std::current_exception();
  }
  check_all_ranks(comm, error);
}

}  // namespace sdp
