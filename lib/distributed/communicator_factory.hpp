// make_communicator: the one place Communicator backends are created, by name
// (distributed.backend). Everything that needs a communicator (make_allreduce, the trainer's
// parameter broadcast and buffer averaging, benchmarks, tests) obtains it here, so adding a
// backend means adding it here and nowhere else.
//
//   mpi   MpiCommunicator over the given MPI group, host memory (mpi_communicator.hpp).
//         On a GPU (options.device cuda:i), the MPI backend stages the buffers through
//         page-locked host memory in pipelined chunks (StagedCommunicator).
//   nccl  NcclCommunicator (nccl_communicator.hpp): device memory of options.device, its
//         own CUDA stream; built only when CMake finds NCCL (SDP_HAVE_NCCL), from
//         nccl_communicator_cuda.cpp. The MPI group is its bootstrap: rank 0 of the group
//         makes the ncclUniqueId and broadcasts it over MPI (control plane), then every rank
//         calls ncclCommInitRankConfig on options.device. In a build without NCCL asking for
//         it is an InputError saying so; so is a process that sees no CUDA device.
//
// Contract: collective over `group` (every rank of it calls make_communicator with the same
// backend); the result does not own `group`, which must outlive it (World owns its groups).
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "distributed/comm_backend.hpp"
#include "distributed/communicator.hpp"

namespace sdp {

// The NCCL this process loaded, "2.28.9 (FILE)" (core/device_info.hpp, version_and_file); ""
// in a build without NCCL.
std::string nccl_version();
// The MPI library's own name and version, "Open MPI v4.1.4"; callable before MPI_Init.
std::string mpi_library_version();

struct CommunicatorOptions {
  std::string label = "world";    // names it in messages and the plan: world, intra, inter
  Device device = Device::cpu();  // nccl: the GPU this rank drives (cuda:local_rank)
  double init_timeout_s = 600.0;  // nccl: ncclCommInitRankConfig is aborted after this; <= 0: never
};

// Throws InputError when the backend is not built into this binary.
std::shared_ptr<Communicator> make_communicator(CommBackend backend, MPI_Comm group,
                                                const CommunicatorOptions& options = {});
// By name, as the job spec says it; InputError for an unknown name.
std::shared_ptr<Communicator> make_communicator(const std::string& backend, MPI_Comm group,
                                                const CommunicatorOptions& options = {});

}  // namespace sdp
