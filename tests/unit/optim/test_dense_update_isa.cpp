// The optimizers' chunk loops (optim/dense_update_kernels.hpp) on every ISA this CPU has,
// against the baseline variant: bitwise, since they are element-wise and compiled without
// contraction into FMA (a job whose hosts have different CPUs keeps identical replicas).
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "optim/dense_update_kernels.hpp"

namespace sdp {
namespace {

std::vector<float> random_values(int64_t n, uint32_t seed, float scale, bool positive = false) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, scale);
  std::vector<float> x(n);
  for (float& v : x) v = positive ? std::abs(normal(rng)) : normal(rng);
  return x;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Runs `update(kernels, state...)` on copies of the same state with the baseline table and
// with each ISA's, and expects the same bits in every array and the same non-finite flag.
template <typename Update>
void expect_all_isas_match(const char* what, int n_arrays, Update update) {
  for (int64_t n : {1, 5, 8, 13, 16, 33, 100, 1027}) {
    for (bool with_nan : {false, true}) {
      std::vector<std::vector<float>> base;
      for (int a = 0; a < n_arrays; ++a) base.push_back(random_values(n, 11 * a + n, 0.5f, a == 3));
      std::vector<float> g = random_values(n, 99 + n, 1e-2f);
      if (with_nan) g[n / 2] = std::numeric_limits<float>::quiet_NaN();
      std::vector<std::vector<float>> want = base;
      const uint32_t want_flag = update(dense_update_kernels(CpuIsa::baseline), g, want);
      EXPECT_EQ(want_flag, with_nan ? 1u : 0u) << what;
      for (CpuIsa isa : supported_cpu_isas()) {
        std::vector<std::vector<float>> got = base;
        const uint32_t flag = update(dense_update_kernels(isa), g, got);
        EXPECT_EQ(flag, want_flag) << what << " on " << cpu_isa_name(isa);
        for (int a = 0; a < n_arrays; ++a)
          EXPECT_TRUE(same_bits(got[a], want[a])) << what << " on " << cpu_isa_name(isa) << ", n=" << n << ", array " << a;
      }
    }
  }
}

using State = std::vector<std::vector<float>>;

TEST(DenseUpdateIsa, SgdAndMomentumMatchTheBaseline) {
  expect_all_isas_match("sgd", 1, [](const DenseUpdateKernels& k, const std::vector<float>& g, State& s) {
    return k.sgd(s[0].data(), g.data(), g.size(), 0.1f, 5e-4f);
  });
  for (bool first : {true, false})
    for (bool nesterov : {false, true})
      expect_all_isas_match("sgd momentum", 2, [&](const DenseUpdateKernels& k, const std::vector<float>& g, State& s) {
        return k.sgd_momentum(s[0].data(), g.data(), s[1].data(), g.size(), 0.1f, 5e-4f, 0.9f, 1.0f, first, nesterov);
      });
}

TEST(DenseUpdateIsa, AdamMatchesTheBaseline) {
  for (bool decoupled : {false, true}) {
    AdamChunkScalars sc{0.9f, 0.999f, 1e-8f, 1e-3f / 0.19f, 0.0447f, decoupled ? 0.f : 1e-2f, decoupled, 1.f - 1e-5f};
    // m, v (v >= 0: array 3 is drawn positive, so v is array 3 here)
    expect_all_isas_match("adam", 4, [&](const DenseUpdateKernels& k, const std::vector<float>& g, State& s) {
      return k.adam(s[0].data(), g.data(), s[1].data(), s[3].data(), g.size(), sc);
    });
  }
}

TEST(DenseUpdateIsa, LarsAndLambMatchTheBaseline) {
  expect_all_isas_match("lars", 2, [](const DenseUpdateKernels& k, const std::vector<float>& g, State& s) {
    return k.lars(s[0].data(), g.data(), s[1].data(), g.size(), 0.9f, 0.02f, 1e-4f);
  });
  expect_all_isas_match("lamb", 4, [](const DenseUpdateKernels& k, const std::vector<float>& g, State& s) {
    const uint32_t flag = k.lamb_direction(s[0].data(), g.data(), s[1].data(), s[3].data(), s[2].data(), g.size(),
                                           0.9f, 0.999f, 0.1f, 0.001f, 1e-6f, 0.01f);
    k.lamb_step(s[0].data(), s[2].data(), g.size(), 0.003f);
    return flag;
  });
}

TEST(DenseUpdateIsa, NormsMatchTheBaseline) {
  for (int64_t n : {0, 1, 7, 8, 9, 63, 1000}) {
    const std::vector<float> x = random_values(n, 5, 2.f);
    const double want = dense_update_kernels(CpuIsa::baseline).l2_norm(x.data(), n);
    for (CpuIsa isa : supported_cpu_isas()) {
      const double got = dense_update_kernels(isa).l2_norm(x.data(), n);
      EXPECT_EQ(std::memcmp(&got, &want, sizeof got), 0) << cpu_isa_name(isa) << " n=" << n << ": " << got << " vs " << want;
    }
  }
}

}  // namespace
}  // namespace sdp
