// One error idiom for the whole project: exceptions that carry their exit status and a
// message with full context (file, key, rank, step). They are caught once, in main, which
// prints "sdp-train: error: <message>" and ends the job with code() (docs/architecture.md, "Errors").
//
// The rule: whatever a user, a file, the machine or a peer can cause is an sdp::Error
// (InputError, RuntimeError, TimeoutError; CollectiveFailure in distributed/agreement.hpp
// when every rank throws it together). std::logic_error (and std::invalid_argument inside
// nn/) is for broken contracts between our own modules, i.e. bugs; where user input can
// reach such a check, the module boundary that received the input converts it (as
// models::make_model does for layer shape checks). Nothing else catches to convert, and
// main reports anything that is not an sdp::Error as a runtime failure (exit 1).
#pragma once

#include <stdexcept>
#include <string>

namespace sdp {

enum class ExitCode : int {
  kSuccess = 0,
  kRuntime = 1,  // I/O failure, non-finite loss, lost peer
  kUsage = 2,    // bad command line, job spec, resourceconfig or data file
  kTimeout = 3,  // aborted by the collective watchdog
};

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ExitCode code() const noexcept { return code_; }

 private:
  ExitCode code_;
};

// Anything the user gave us that is wrong: CLI, YAML, JSON, data files. Exit status 2.
class InputError : public Error {
 public:
  explicit InputError(const std::string& message) : Error(ExitCode::kUsage, message) {}
};

// Something failed while running although the input was valid. Exit status 1.
class RuntimeError : public Error {
 public:
  explicit RuntimeError(const std::string& message) : Error(ExitCode::kRuntime, message) {}
};

// A collective waited past distributed.timeout_s. Exit status 3.
class TimeoutError : public Error {
 public:
  explicit TimeoutError(const std::string& message) : Error(ExitCode::kTimeout, message) {}
};

}  // namespace sdp
