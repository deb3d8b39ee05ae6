// SDP_MPI_CHECK(call): throws RuntimeError naming the call, MPI's error text, file and line.
#pragma once

#include <mpi.h>

#include <string>

#include "core/error.hpp"

namespace sdp::detail {
[[noreturn]] void throw_mpi_error(int code, const char* call, const char* file, int line);
}

#define SDP_MPI_CHECK(call)                                                   \
  do {                                                                        \
    int sdp_mpi_rc_ = (call);                                                 \
    if (sdp_mpi_rc_ != MPI_SUCCESS)                                           \
      ::sdp::detail::throw_mpi_error(sdp_mpi_rc_, #call, __FILE__, __LINE__); \
  } while (0)
