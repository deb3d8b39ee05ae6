// core/cpu_dispatch.hpp: detection, the SDP_CPU_ISA override, and Tensor's whole-arena kernels on
// every ISA this CPU has against the baseline variant (bitwise: they only OR and multiply).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_dispatch.hpp"
#include "core/tensor_kernels.hpp"

namespace sdp {
namespace {

TEST(CpuIsa, ChoosesAtMostWhatTheCpuHas) {
  EXPECT_LE(cpu_kernel_isa(), detected_cpu_isa());
  const std::string summary = cpu_kernel_isa_summary();
  EXPECT_EQ(summary.rfind(cpu_isa_name(cpu_kernel_isa()), 0), 0u) << summary;
  EXPECT_NE(summary.find(std::string("detected ") + cpu_isa_name(detected_cpu_isa())), std::string::npos)
      << summary;
  std::printf("CPU kernels: %s\n", summary.c_str());
}

#if defined(__x86_64__)
TEST(CpuIsa, DetectsWhatTheCompilerSeesOfThisCpu) {
  // The flags libgcc reads are the ones lscpu shows: AVX2 and FMA on every CPU of the last
  // decade this project runs on.
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  EXPECT_EQ(detected_cpu_isa() >= CpuIsa::avx2, avx2 && __builtin_cpu_supports("f16c"));
}
#endif

TEST(CpuIsa, OverrideErrors) {
  const char* saved = std::getenv("SDP_CPU_ISA");
  const std::string restore = saved ? saved : "";
  setenv("SDP_CPU_ISA", "avx3", 1);
  EXPECT_NE(cpu_isa_override_error().find("SDP_CPU_ISA='avx3' names no ISA: baseline, avx2 or avx512"),
            std::string::npos);
  setenv("SDP_CPU_ISA", "baseline", 1);
  EXPECT_EQ(cpu_isa_override_error(), "");
  if (detected_cpu_isa() < CpuIsa::avx512) {
    setenv("SDP_CPU_ISA", "avx512", 1);
    EXPECT_NE(cpu_isa_override_error().find("this CPU supports"), std::string::npos) << cpu_isa_override_error();
  }
  if (saved)
    setenv("SDP_CPU_ISA", restore.c_str(), 1);
  else
    unsetenv("SDP_CPU_ISA");
}

TEST(CpuIsa, TablesDifferPerIsaOnlyWhereBuilt) {
  // Each ISA has its own compilation of a kernel file: the tables are distinct objects.
  EXPECT_NE(&tensor_kernels(CpuIsa::baseline), &tensor_kernels(CpuIsa::avx2));
  EXPECT_NE(&tensor_kernels(CpuIsa::avx2), &tensor_kernels(CpuIsa::avx512));
  EXPECT_EQ(&tensor_kernels(), &tensor_kernels(cpu_kernel_isa()));
}

TEST(CpuIsa, TensorKernelsMatchTheBaselineBitwise) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 3.f);
  for (int64_t n : {0, 1, 7, 8, 15, 16, 17, 31, 64, 1000, 4099}) {
    std::vector<float> x(n);
    for (float& v : x) v = normal(rng);
    const TensorKernels& base = tensor_kernels(CpuIsa::baseline);
    for (CpuIsa isa : supported_cpu_isas()) {
      SCOPED_TRACE(std::string(cpu_isa_name(isa)) + " n=" + std::to_string(n));
      const TensorKernels& k = tensor_kernels(isa);
      EXPECT_EQ(k.non_finite(x.data(), n), 0u);
      for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::quiet_NaN()})
        if (n > 0) {
          std::vector<float> y = x;
          y[n - 1] = bad;  // the tail, past the last full vector
          EXPECT_EQ(k.non_finite(y.data(), n), 1u);
          y = x;
          y[0] = bad;
          EXPECT_EQ(k.non_finite(y.data(), n), 1u);
        }
      std::vector<float> a = x, b = x;
      base.scale(a.data(), n, 0.37f);
      k.scale(b.data(), n, 0.37f);
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), n * sizeof(float)));
    }
  }
}

}  // namespace
}  // namespace sdp
