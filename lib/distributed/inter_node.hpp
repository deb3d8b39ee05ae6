// Across nodes, GPU gradients travel one of two ways (distributed.inter_node):
//   nccl  NCCL's own network transport, from GPU memory (GPUDirect RDMA where the network has it);
//   host  the SageMaker data-parallel library's way (Thapa et al., "Herring: Rethinking the
//         Parameter Server at Scale for the Cloud", SC20): each node's shard is
//         staged to pinned host memory, summed across nodes by the CPUs over the TCP socket ring
//         (socket_ring.hpp), and copied back, in pipelined rounds (staged_communicator.hpp).
//
// `auto` follows NCCL's network. NCCL picks it at communicator init, in this order: a net
// plugin (NCCL_NET_PLUGIN, else libnccl-net.so: aws-ofi-nccl for EFA, the HPC-X plugins),
// then its internal InfiniBand/RoCE transport (verbs devices in /sys/class/infiniband that are
// not EFA, unless NCCL_IB_DISABLE=1), then TCP sockets; NCCL_NET names one outright. With RDMA,
// NCCL moves GPU memory with no host copy, and auto takes nccl. On TCP, auto takes host:
// NCCL's sockets move bytes through host bounce buffers anyway, and the socket ring reached
// 91-100 % of a 1 Gbit/s link where Open MPI's TCP reached 55-90 %
// (docs/records/benchmarks-history.md, "Simulated cluster"). docs/multi-host.md has the rule
// and its measurements.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "config/choices.hpp"
#include "core/tensor.hpp"

namespace sdp {

// What NCCL would use across nodes on this machine, read without starting NCCL.
struct NcclNetwork {
  enum class Kind { kPlugin, kInfiniband, kSocket };
  Kind kind = Kind::kSocket;
  std::string plugin;                   // kPlugin: the library that loaded
  std::string forced;                   // NCCL_NET, when set
  std::vector<std::string> rdma_devices;  // verbs devices NCCL's IB transport would use
  std::vector<std::string> efa_devices;   // EFA devices (usable only through a plugin)
  std::string plugin_error;             // why no plugin loaded ("" = none was asked for by name)

  bool rdma() const { return kind != Kind::kSocket; }
  // "net plugin libnccl-net.so", "InfiniBand/RoCE (mlx5_0, mlx5_1)", "TCP sockets".
  std::string describe() const;
  // One line when EFA devices are here but NCCL would use TCP sockets; "" otherwise.
  std::string efa_warning() const;
};

struct NcclNetworkProbe {
  std::string sysfs = "/sys";
  // The environment (getenv by default); tests pass a map.
  std::function<const char*(const char*)> env;
  // Loads a plugin library and tells whether it exports an NCCL net API (dlopen by default).
  // Returns "" on success, else the reason.
  std::function<std::string(const std::string& library)> load_plugin;
};

NcclNetwork probe_nccl_network(const NcclNetworkProbe& probe = {});

// "" when `library` loads and exports ncclNet_v* or ncclNetPlugin_v*, else dlerror's reason.
std::string try_nccl_net_plugin(const std::string& library);

// distributed.inter_node for a job on `device` whose gradients go over `backend` (resolved:
// mpi or nccl): never kAuto. Throws InputError for nccl on a CPU job or over backend mpi.
InterNode choose_inter_node(InterNode requested, const Device& device, CommBackend backend,
                            const NcclNetwork& network);

// The backend of the communicators that span every rank (the flat AllReduce's, the model-state
// broadcasts'): MPI, staged through the hosts, when GPU memory crosses the nodes on the hosts
// (`inter_node` kHost across nodes: no NCCL communicator then spans two nodes); else `backend`.
CommBackend world_backend(CommBackend backend, InterNode inter_node, const Device& device, int nodes);

// For the plan: how gradients cross nodes, e.g. "host (each node's shard staged through pinned
// memory, summed by a TCP socket ring); NCCL's network here: TCP sockets".
std::string describe_inter_node(InterNode chosen, InterNode requested, const Device& device,
                                const NcclNetwork& network);

}  // namespace sdp
