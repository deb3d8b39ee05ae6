#include "distributed/inter_node.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "core/error.hpp"
#include "distributed/socket_ring.hpp"

namespace sdp {

namespace {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// The verbs devices under sysfs/class/infiniband, split by driver: EFA, or RDMA NCCL can use.
void read_verbs_devices(const std::string& sysfs, NcclNetwork& network) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path root = fs::path(sysfs) / "class" / "infiniband";
  std::vector<std::string> names;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec))
    names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    std::error_code link_ec;
    const fs::path driver = fs::read_symlink(root / name / "device" / "driver", link_ec);
    (driver.filename() == "efa" ? network.efa_devices : network.rdma_devices).push_back(name);
  }
}

}  // namespace

std::string try_nccl_net_plugin(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    return why ? why : "cannot be loaded";
  }
  // The versioned structs of the net API (ncclNet_v2 .. v10 today; ncclNetPlugin_v* in
  // aws-ofi-nccl's older releases).
  bool found = false;
  for (int v = 2; v <= 16 && !found; ++v)
    for (const char* prefix : {"ncclNet_v", "ncclNetPlugin_v"})
      found = found || dlsym(handle, (prefix + std::to_string(v)).c_str()) != nullptr;
  dlclose(handle);
  return found ? "" : library + " exports no ncclNet_v* symbol";
}

NcclNetwork probe_nccl_network(const NcclNetworkProbe& probe) {
  const auto env = [&](const char* name) -> std::string {
    const char* v = probe.env ? probe.env(name) : std::getenv(name);
    return v ? v : "";
  };
  const auto load = probe.load_plugin ? probe.load_plugin : try_nccl_net_plugin;
  NcclNetwork network;
  read_verbs_devices(probe.sysfs, network);
  network.forced = env("NCCL_NET");

  // The plugin: NCCL_NET_PLUGIN=x tries libnccl-net-x.so, then x itself; "none" turns plugins
  // off; unset, libnccl-net.so.
  const std::string wanted = env("NCCL_NET_PLUGIN");
  std::vector<std::string> candidates;
  if (wanted.empty())
    candidates = {"libnccl-net.so"};
  else if (wanted != "none")
    candidates = {"libnccl-net-" + wanted + ".so", wanted};
  for (const std::string& library : candidates) {
    const std::string why = load(library);
    if (why.empty()) {
      network.plugin = library;
      break;
    }
    if (!wanted.empty()) network.plugin_error += (network.plugin_error.empty() ? "" : "; ") + why;
  }

  const bool ib_enabled = env("NCCL_IB_DISABLE") != "1" && !network.rdma_devices.empty();
  const std::string forced = network.forced;
  if (forced == "Socket")
    network.kind = NcclNetwork::Kind::kSocket;
  else if (forced == "IB")
    network.kind = ib_enabled ? NcclNetwork::Kind::kInfiniband : NcclNetwork::Kind::kSocket;
  else if (!network.plugin.empty())
    network.kind = NcclNetwork::Kind::kPlugin;
  else
    network.kind = ib_enabled ? NcclNetwork::Kind::kInfiniband : NcclNetwork::Kind::kSocket;
  return network;
}

std::string NcclNetwork::describe() const {
  switch (kind) {
    case Kind::kPlugin:
      return "net plugin " + plugin;
    case Kind::kInfiniband:
      return "InfiniBand/RoCE (" + join(rdma_devices) + ")";
    case Kind::kSocket:
      return "TCP sockets";
  }
  return "?";
}

std::string NcclNetwork::efa_warning() const {
  if (efa_devices.empty() || kind != Kind::kSocket) return "";
  return "this machine has EFA device(s) (" + join(efa_devices) +
         ") but NCCL would use TCP sockets between nodes: no NCCL net plugin loaded (" +
         (plugin_error.empty() ? std::string("libnccl-net.so not found") : plugin_error) +
         "). Install aws-ofi-nccl in the image (docs/multi-host.md, \"EFA\") so that NCCL "
         "uses EFA";
}

InterNode choose_inter_node(InterNode requested, const Device& device, CommBackend backend,
                            const NcclNetwork& network) {
  const bool over_nccl = device.is_cuda() && backend == CommBackend::kNccl;
  if (requested == InterNode::kNccl && !over_nccl)
    throw InputError(std::string("distributed.inter_node: nccl needs GPU gradients over NCCL, but this job's go ") +
                     (device.is_cuda() ? "over MPI (distributed.backend: mpi or share_gpus)" : "from the CPU") +
                     "; use auto or host");
  if (requested != InterNode::kAuto) return requested;
  return over_nccl && network.rdma() ? InterNode::kNccl : InterNode::kHost;
}

CommBackend world_backend(CommBackend backend, InterNode inter_node, const Device& device, int nodes) {
  return device.is_cuda() && nodes > 1 && inter_node == InterNode::kHost ? CommBackend::kMpi : backend;
}

std::string describe_inter_node(InterNode chosen, InterNode requested, const Device& device,
                                const NcclNetwork& network) {
  std::string text = to_string(chosen);
  if (device.is_cpu())
    return text + (inter_transport_from_env() == "mpi" ? " (Open MPI, SDP_INTER_TRANSPORT=mpi)"
                                                       : " (the node's shard summed by a TCP socket ring)");
  if (chosen == InterNode::kNccl) return text + " over " + network.describe();
  text += " (each node's shard staged through pinned memory, summed by the CPUs over a TCP socket ring)";
  if (requested == InterNode::kAuto) text += "; auto: NCCL's network here is " + network.describe();
  return text;
}

}  // namespace sdp
