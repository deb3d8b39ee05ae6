// CommBackend: the names of the Communicator backends (distributed.backend), apart from the
// factory (communicator_factory.hpp) so code that only names a backend needs no <mpi.h>.
#pragma once

#include <string>
#include <vector>

namespace sdp {

enum class CommBackend { kMpi, kNccl };

const char* comm_backend_name(CommBackend backend);
// "mpi" -> kMpi, "nccl" -> kNccl; InputError naming the known backends otherwise.
CommBackend parse_comm_backend(const std::string& name);
// Whether this build contains the backend (nccl: only with CUDA and NCCL found).
bool comm_backend_built(CommBackend backend);
const std::vector<std::string>& comm_backend_names();

}  // namespace sdp
