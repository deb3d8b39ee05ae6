// Facts about the Communicator backends (the CommBackend of distributed.backend, parsed in
// config/choices.hpp), apart from the factory (communicator_factory.hpp) so code that only
// names a backend needs no <mpi.h>.
#pragma once

#include <string>
#include <vector>

#include "config/choices.hpp"
#include "core/dtype.hpp"

namespace sdp {

// "mpi" -> kMpi, "nccl" -> kNccl; InputError naming the known backends otherwise.
CommBackend parse_comm_backend(const std::string& name);
// Whether this build contains the backend (nccl: only with CUDA and NCCL found).
bool comm_backend_built(CommBackend backend);
// What `auto` means for buffers on `device`: nccl for GPU memory when built, mpi otherwise.
CommBackend resolve_comm_backend(CommBackend backend, const Device& device);

}  // namespace sdp
