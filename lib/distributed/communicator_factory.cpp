#include "distributed/communicator_factory.hpp"

#include "core/device_info.hpp"
#include "core/error.hpp"
#include "distributed/mpi_communicator.hpp"
#include "distributed/nccl_communicator.hpp"
#include "distributed/staged_communicator.hpp"

namespace sdp {

#ifndef SDP_HAVE_NCCL
// With NCCL, nccl_communicator_cuda.cpp defines it.
std::string nccl_version() { return ""; }
#endif

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return "";
  // "Open MPI v4.1.4, package: Debian OpenMPI, ident: ...": the first part names it.
  const std::string full(text, static_cast<size_t>(length));
  return full.substr(0, full.find_first_of(",\n"));
}

CommBackend parse_comm_backend(const std::string& name) {
  if (name == "mpi") return CommBackend::kMpi;
  if (name == "nccl") return CommBackend::kNccl;
  throw InputError("unknown communicator backend '" + name + "' (expected mpi or nccl)");
}

bool comm_backend_built(CommBackend backend) {
#ifdef SDP_HAVE_NCCL
  (void)backend;
  return true;  // nccl_communicator_cuda.cpp is in this build
#else
  return backend != CommBackend::kNccl;
#endif
}

CommBackend resolve_comm_backend(CommBackend backend, const Device& device) {
  if (backend != CommBackend::kAuto) return backend;
  return device.is_cuda() && comm_backend_built(CommBackend::kNccl) ? CommBackend::kNccl : CommBackend::kMpi;
}

std::shared_ptr<Communicator> make_communicator(CommBackend backend, MPI_Comm group,
                                                const CommunicatorOptions& options) {
  switch (resolve_comm_backend(backend, options.device)) {
    case CommBackend::kAuto:  // resolved above
    case CommBackend::kMpi: {
      auto mpi = std::make_shared<MpiCommunicator>(group, options.label);
      if (options.device.is_cpu()) return mpi;
      // GPU memory crosses through page-locked host buffers (staged_communicator.hpp).
      if (!options.device.is_cuda() || cuda_device_count() <= options.device.index)
        throw InputError("communicator backend 'mpi' ('" + options.label + "') stages " + options.device.str() +
                         " memory through the host, but this process cannot use " + options.device.str() + " (" +
                         (cuda_backend_built() ? cuda_unavailable_reason() : "built without the CUDA backend") +
                         ")");
      return std::make_shared<StagedCommunicator>(mpi, make_stream(options.device));
    }
    case CommBackend::kNccl:
#ifdef SDP_HAVE_NCCL
      return make_nccl_communicator(group, options);
#else
      break;
#endif
  }
  throw InputError(
      "communicator backend '" + to_string(backend) +
      "' is not built into this sdp-train (it needs the CUDA backend with NCCL; see `sdp-train "
      "--version`); use distributed.backend: mpi");
}

std::shared_ptr<Communicator> make_communicator(const std::string& backend, MPI_Comm group,
                                                const CommunicatorOptions& options) {
  return make_communicator(parse_comm_backend(backend), group, options);
}

}  // namespace sdp
