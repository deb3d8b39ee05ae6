// cgroup_cpu_quota: the CPUs a container's (or a simulated host's) quota grants, which the
// default thread count and the plan's overlap rule take as the CPUs a rank may keep busy. Read
// from cgroup v2's cpu.max or v1's cpu.cfs_quota_us / cpu.cfs_period_us along the process's
// cgroup path; checked here on a fake /sys/fs/cgroup.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/device_info.hpp"

namespace sdp {
namespace {

namespace fs = std::filesystem;

class FakeCgroups : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("sdp-cgroup-test-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const std::string& relative, const std::string& text) {
    const fs::path path = root_ / relative;
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }
  double quota(const std::string& proc_self_cgroup) const { return cgroup_cpu_quota_in(proc_self_cgroup, root_.string()); }
  fs::path root_;
};

TEST_F(FakeCgroups, V2CpuMaxAlongThePath) {
  write("cpu.max", "max 100000\n");
  write("job/cpu.max", "max 100000\n");
  EXPECT_EQ(quota("0::/job\n"), 0.0) << "no limit anywhere";
  write("job/cpu.max", "150000 100000\n");
  EXPECT_DOUBLE_EQ(quota("0::/job\n"), 1.5);
  write("job/step/cpu.max", "max 100000\n");
  EXPECT_DOUBLE_EQ(quota("0::/job/step\n"), 1.5) << "an unlimited child keeps its parent's quota";
  write("cpu.max", "50000 100000\n");
  EXPECT_DOUBLE_EQ(quota("0::/job/step\n"), 0.5) << "the smallest along the path binds";
}

TEST_F(FakeCgroups, V1CfsQuotaInTheCpuHierarchy) {
  write("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1\n");
  write("cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
  const std::string self = "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n";
  EXPECT_EQ(quota(self), 0.0) << "-1: no limit";
  write("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "400000\n");
  EXPECT_DOUBLE_EQ(quota(self), 4.0);
  // A simulated host's share (scripts/simcluster.sh cpus): the cpu controller mounted alone.
  write("cpu/sdp-h1/cpu.cfs_quota_us", "4500\n");
  write("cpu/sdp-h1/cpu.cfs_period_us", "10000\n");
  EXPECT_DOUBLE_EQ(quota("3:cpu:/sdp-h1\n2:cpuacct:/sdp-h1\n"), 0.45);
  EXPECT_EQ(quota("2:cpuacct:/sdp-h1\n"), 0.0) << "cpuacct alone sets no quota";
}

TEST_F(FakeCgroups, AContainerSeesItsOwnCgroupAsTheRoot) {
  // The host's path in /proc/self/cgroup, the container's cgroup mounted as the hierarchy's root.
  write("cpu/cpu.cfs_quota_us", "200000\n");
  write("cpu/cpu.cfs_period_us", "100000\n");
  EXPECT_DOUBLE_EQ(quota("5:cpu:/kubepods/pod1/c2\n"), 2.0);
}

TEST_F(FakeCgroups, NothingToReadIsNoQuota) {
  EXPECT_EQ(quota(""), 0.0);
  EXPECT_EQ(quota("garbage\n0::/x\n"), 0.0);
  write("cpu.max", "nonsense 100000\n");
  EXPECT_EQ(quota("0::/\n"), 0.0);
}

// The memory limit the CTR trainer checks a table against: the same walk, v2's memory.max or
// v1's memory.limit_in_bytes (a simulated host's: scripts/simcluster.sh memory).
TEST_F(FakeCgroups, MemoryLimitAlongThePath) {
  const auto limit = [&](const std::string& self) { return cgroup_memory_limit_in(self, root_.string()); };
  write("memory.max", "max\n");
  EXPECT_EQ(limit("0::/job\n"), 0.0) << "no limit anywhere";
  write("job/memory.max", "1073741824\n");
  EXPECT_EQ(limit("0::/job/step\n"), 1073741824.0);
  write("memory/sdp-h1/memory.limit_in_bytes", "314572800\n");
  write("memory/memory.limit_in_bytes", "9223372036854771712\n");
  EXPECT_EQ(limit("9:memory:/sdp-h1\n4:cpu:/sdp-h1\n"), 314572800.0);
  EXPECT_EQ(limit("9:memory:/other\n"), 0.0) << "v1's unlimited root is no limit";
  EXPECT_EQ(limit("4:cpu:/sdp-h1\n"), 0.0) << "the cpu controller sets no memory limit";
  EXPECT_GT(usable_memory_bytes(), 0);
}

TEST(DeviceInfo, UsableCpusAreTheAffinityCappedByTheQuota) {
  const int affinity = cpu_affinity_count(), quota = cgroup_cpu_quota();
  EXPECT_GE(affinity, 1);
  EXPECT_EQ(usable_cpu_count(), quota > 0 ? std::min(affinity, quota) : affinity);
}

}  // namespace
}  // namespace sdp
