// distributed.inter_node (distributed/inter_node.hpp): what NCCL would use across nodes, read
// from a made-up sysfs tree and environment the way NCCL reads the real ones, and the choice
// auto makes from it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "distributed/inter_node.hpp"

namespace sdp {
namespace {

namespace fs = std::filesystem;

class InterNodeProbe : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("sdp-sysfs-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "bus" / "pci" / "drivers" / "efa");
    fs::create_directories(root_ / "bus" / "pci" / "drivers" / "mlx5_core");
  }
  void TearDown() override { fs::remove_all(root_); }

  // A verbs device as the kernel shows it: class/infiniband/<name>/device/driver -> the driver.
  void add_device(const std::string& name, const std::string& driver) {
    const fs::path device = root_ / "class" / "infiniband" / name / "device";
    fs::create_directories(device);
    fs::create_directory_symlink(root_ / "bus" / "pci" / "drivers" / driver, device / "driver");
  }

  // Probes with `env` as the environment and plugins found only among `loadable`.
  NcclNetwork probe(std::map<std::string, std::string> env = {}, std::vector<std::string> loadable = {}) {
    env_ = std::move(env);
    NcclNetworkProbe p;
    p.sysfs = root_.string();
    p.env = [this](const char* name) -> const char* {
      auto it = env_.find(name);
      return it == env_.end() ? nullptr : it->second.c_str();
    };
    p.load_plugin = [this, loadable](const std::string& library) -> std::string {
      tried_.push_back(library);
      for (const auto& l : loadable)
        if (l == library) return "";
      return library + ": cannot open shared object file";
    };
    tried_.clear();
    return probe_nccl_network(p);
  }

  fs::path root_;
  std::map<std::string, std::string> env_;
  std::vector<std::string> tried_;
};

TEST_F(InterNodeProbe, NoRdmaDeviceAndNoPluginIsTcpSockets) {
  const NcclNetwork network = probe();
  EXPECT_EQ(network.kind, NcclNetwork::Kind::kSocket);
  EXPECT_EQ(network.describe(), "TCP sockets");
  EXPECT_EQ(tried_, std::vector<std::string>{"libnccl-net.so"});  // NCCL's default plugin name
  EXPECT_EQ(network.efa_warning(), "");  // no EFA here: nothing is lost
}

TEST_F(InterNodeProbe, InfinibandDevicesAreUsedUnlessDisabled) {
  add_device("mlx5_1", "mlx5_core");
  add_device("mlx5_0", "mlx5_core");
  NcclNetwork network = probe();
  EXPECT_EQ(network.kind, NcclNetwork::Kind::kInfiniband);
  EXPECT_EQ(network.describe(), "InfiniBand/RoCE (mlx5_0, mlx5_1)");
  EXPECT_EQ(probe({{"NCCL_IB_DISABLE", "1"}}).kind, NcclNetwork::Kind::kSocket);
  EXPECT_EQ(probe({{"NCCL_NET", "Socket"}}).kind, NcclNetwork::Kind::kSocket);
}

TEST_F(InterNodeProbe, EfaWithoutPluginFallsBackToSocketsAndWarnsNamingThePlugin) {
  add_device("rdmap16s27", "efa");
  const NcclNetwork network = probe();
  EXPECT_EQ(network.kind, NcclNetwork::Kind::kSocket);  // NCCL's own IB transport cannot drive EFA
  EXPECT_EQ(network.efa_devices, std::vector<std::string>{"rdmap16s27"});
  EXPECT_TRUE(network.rdma_devices.empty());
  const std::string warning = network.efa_warning();
  EXPECT_NE(warning.find("rdmap16s27"), std::string::npos) << warning;
  EXPECT_NE(warning.find("aws-ofi-nccl"), std::string::npos) << warning;
  EXPECT_NE(warning.find("TCP sockets"), std::string::npos) << warning;
}

TEST_F(InterNodeProbe, EfaWithThePluginUsesIt) {
  add_device("rdmap16s27", "efa");
  const NcclNetwork network = probe({}, {"libnccl-net.so"});
  EXPECT_EQ(network.kind, NcclNetwork::Kind::kPlugin);
  EXPECT_EQ(network.describe(), "net plugin libnccl-net.so");
  EXPECT_EQ(network.efa_warning(), "");
}

TEST_F(InterNodeProbe, NamedPluginIsLookedUpAsNcclDoes) {
  add_device("rdmap16s27", "efa");
  // NCCL_NET_PLUGIN=ofi: libnccl-net-ofi.so first, then the name as given.
  NcclNetwork network = probe({{"NCCL_NET_PLUGIN", "ofi"}});
  EXPECT_EQ(tried_, (std::vector<std::string>{"libnccl-net-ofi.so", "ofi"}));
  EXPECT_EQ(network.kind, NcclNetwork::Kind::kSocket);
  EXPECT_NE(network.efa_warning().find("libnccl-net-ofi.so: cannot open"), std::string::npos)
      << network.efa_warning();
  network = probe({{"NCCL_NET_PLUGIN", "/opt/ofi/lib/libnccl-net.so"}}, {"/opt/ofi/lib/libnccl-net.so"});
  EXPECT_EQ(network.kind, NcclNetwork::Kind::kPlugin);
  EXPECT_EQ(network.plugin, "/opt/ofi/lib/libnccl-net.so");
  // "none" turns plugins off: nothing is loaded.
  EXPECT_EQ(probe({{"NCCL_NET_PLUGIN", "none"}}, {"libnccl-net.so"}).kind, NcclNetwork::Kind::kSocket);
  EXPECT_TRUE(tried_.empty());
  // NCCL_NET=Socket wins over a plugin that loads.
  EXPECT_EQ(probe({{"NCCL_NET", "Socket"}}, {"libnccl-net.so"}).kind, NcclNetwork::Kind::kSocket);
}

TEST(NcclNetPlugin, LoadsOnlyLibrariesThatExportTheNetApi) {
  EXPECT_EQ(try_nccl_net_plugin(SDP_FAKE_NCCL_NET), "");
  EXPECT_NE(try_nccl_net_plugin("libnccl-net-sdp-absent.so"), "");
  const std::string libm = try_nccl_net_plugin("libm.so.6");
  EXPECT_NE(libm.find("exports no ncclNet_v"), std::string::npos) << libm;
}

NcclNetwork network_of(NcclNetwork::Kind kind) {
  NcclNetwork network;
  network.kind = kind;
  if (kind == NcclNetwork::Kind::kInfiniband) network.rdma_devices = {"mlx5_0"};
  if (kind == NcclNetwork::Kind::kPlugin) network.plugin = "libnccl-net.so";
  return network;
}

TEST(InterNodeChoice, AutoTakesNcclOnRdmaAndTheHostsOnTcp) {
  const Device gpu = Device::cuda(0), cpu = Device::cpu();
  const auto ib = network_of(NcclNetwork::Kind::kInfiniband), plugin = network_of(NcclNetwork::Kind::kPlugin),
             tcp = network_of(NcclNetwork::Kind::kSocket);
  EXPECT_EQ(choose_inter_node(InterNode::kAuto, gpu, CommBackend::kNccl, ib), InterNode::kNccl);
  EXPECT_EQ(choose_inter_node(InterNode::kAuto, gpu, CommBackend::kNccl, plugin), InterNode::kNccl);
  EXPECT_EQ(choose_inter_node(InterNode::kAuto, gpu, CommBackend::kNccl, tcp), InterNode::kHost);
  // Gradients already on the hosts (MPI), and CPU jobs: the hosts.
  EXPECT_EQ(choose_inter_node(InterNode::kAuto, gpu, CommBackend::kMpi, ib), InterNode::kHost);
  EXPECT_EQ(choose_inter_node(InterNode::kAuto, cpu, CommBackend::kMpi, ib), InterNode::kHost);
  // An explicit choice stands where it can run.
  EXPECT_EQ(choose_inter_node(InterNode::kNccl, gpu, CommBackend::kNccl, tcp), InterNode::kNccl);
  EXPECT_EQ(choose_inter_node(InterNode::kHost, gpu, CommBackend::kNccl, ib), InterNode::kHost);
}

TEST(InterNodeChoice, NcclWithoutNcclIsAnInputError) {
  const auto tcp = network_of(NcclNetwork::Kind::kSocket);
  try {
    choose_inter_node(InterNode::kNccl, Device::cpu(), CommBackend::kMpi, tcp);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("distributed.inter_node"), std::string::npos) << e.what();
  }
  EXPECT_THROW(choose_inter_node(InterNode::kNccl, Device::cuda(0), CommBackend::kMpi, tcp), InputError);
}

// With the inter-node phase on the hosts no NCCL communicator may span nodes (two logical nodes
// may share a GPU, which NCCL refuses): the world's collectives are staged over MPI as well.
TEST(InterNodeChoice, WorldCommunicatorsFollowTheInterNodePath) {
  const Device gpu = Device::cuda(0);
  EXPECT_EQ(world_backend(CommBackend::kNccl, InterNode::kHost, gpu, 2), CommBackend::kMpi);
  EXPECT_EQ(world_backend(CommBackend::kNccl, InterNode::kNccl, gpu, 2), CommBackend::kNccl);
  EXPECT_EQ(world_backend(CommBackend::kNccl, InterNode::kHost, gpu, 1), CommBackend::kNccl);  // one node
  EXPECT_EQ(world_backend(CommBackend::kMpi, InterNode::kHost, Device::cpu(), 2), CommBackend::kMpi);
}

TEST(InterNodeChoice, ThePlanSaysWhichPathAndWhy) {
  const auto tcp = network_of(NcclNetwork::Kind::kSocket), ib = network_of(NcclNetwork::Kind::kInfiniband);
  EXPECT_EQ(describe_inter_node(InterNode::kNccl, InterNode::kAuto, Device::cuda(0), ib),
            "nccl over InfiniBand/RoCE (mlx5_0)");
  const std::string host = describe_inter_node(InterNode::kHost, InterNode::kAuto, Device::cuda(0), tcp);
  EXPECT_EQ(host.rfind("host (each node's shard staged through pinned memory", 0), 0u) << host;
  EXPECT_NE(host.find("auto: NCCL's network here is TCP sockets"), std::string::npos) << host;
  EXPECT_EQ(describe_inter_node(InterNode::kHost, InterNode::kAuto, Device::cpu(), tcp).rfind("host (", 0), 0u);
}

}  // namespace
}  // namespace sdp
