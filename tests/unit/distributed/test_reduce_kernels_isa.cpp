// The collectives' host loops (distributed/reduce_kernels_isa.hpp) on every ISA this CPU
// has, against the baseline variant: bitwise (element-wise, no contraction).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/half_float.hpp"
#include "distributed/reduce_kernels_isa.hpp"

namespace sdp {
namespace {

// n elements of `dtype` (f32, or 16-bit values made from f32) as bytes.
std::vector<unsigned char> random_buffer(DType dtype, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 2.f);
  std::vector<unsigned char> bytes(n * dtype_size(dtype));
  for (int64_t i = 0; i < n; ++i) {
    const float v = normal(rng);
    if (dtype == DType::kF32) {
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    } else {
      const uint16_t h = dtype == DType::kF16 ? float_to_half(v) : float_to_bfloat16(v);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  }
  return bytes;
}

TEST(ReduceKernelsIsa, EveryLoopMatchesTheBaseline) {
  const ReduceKernels& base = reduce_kernels(CpuIsa::baseline);
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16})
    for (int64_t n : {1, 7, 16, 31, 100, 1029})
      for (float scale : {1.0f, 0.25f, 0.3f})
        for (CpuIsa isa : supported_cpu_isas()) {
          SCOPED_TRACE(std::string(cpu_isa_name(isa)) + " dtype " + dtype_name(dtype) + " n=" + std::to_string(n));
          const ReduceKernels& k = reduce_kernels(isa);
          const std::vector<unsigned char> src = random_buffer(dtype, n, 1), dst = random_buffer(dtype, n, 2);
          std::vector<unsigned char> want = dst, got = dst;
          base.add_scale_into(dtype, want.data(), src.data(), n, scale);
          k.add_scale_into(dtype, got.data(), src.data(), n, scale);
          EXPECT_EQ(got, want) << "add_scale_into";
          want = dst, got = dst;
          base.scale_in_place(dtype, want.data(), n, scale);
          k.scale_in_place(dtype, got.data(), n, scale);
          EXPECT_EQ(got, want) << "scale_in_place";
          const std::vector<unsigned char> f32 = random_buffer(DType::kF32, n, 3);
          want = dst, got = dst;
          base.convert_from_f32(dtype, want.data(), reinterpret_cast<const float*>(f32.data()), n, scale);
          k.convert_from_f32(dtype, got.data(), reinterpret_cast<const float*>(f32.data()), n, scale);
          EXPECT_EQ(got, want) << "convert_from_f32";
          std::vector<float> want_f(n), got_f(n);
          base.convert_to_f32(dtype, want_f.data(), src.data(), n, scale);
          k.convert_to_f32(dtype, got_f.data(), src.data(), n, scale);
          EXPECT_EQ(0, std::memcmp(want_f.data(), got_f.data(), n * sizeof(float))) << "convert_to_f32";
        }
}

}  // namespace
}  // namespace sdp
