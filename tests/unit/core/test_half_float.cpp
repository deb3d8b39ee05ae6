// half_float.hpp: the conversions shared by the CPU reductions and the CUDA casts, checked
// over every 16-bit pattern; and the CUDA casts (cuda_casts.hpp) against them bit for bit,
// which skip without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/cuda_casts.hpp"
#include "core/device_info.hpp"
#include "core/device_memory.hpp"
#include "core/half_float.hpp"
#include "core/tensor.hpp"

namespace sdp {
namespace {

bool is_half_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool is_bf16_nan(uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0; }

TEST(HalfFloat, EveryHalfSurvivesARoundTripThroughF32) {
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const float f = half_to_float(bits);
    if (is_half_nan(bits)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << h;
      EXPECT_TRUE(is_half_nan(float_to_half(f))) << std::hex << h;
    } else {
      ASSERT_EQ(float_to_half(f), bits) << std::hex << h << " -> " << f;
    }
  }
}

TEST(HalfFloat, EveryBfloat16SurvivesARoundTripThroughF32) {
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const float f = bfloat16_to_float(bits);
    if (is_bf16_nan(bits))
      EXPECT_TRUE(is_bf16_nan(float_to_bfloat16(f))) << std::hex << h;
    else
      ASSERT_EQ(float_to_bfloat16(f), bits) << std::hex << h;
  }
}

TEST(HalfFloat, RoundsToNearestEvenBetweenNeighbours) {
  // Halfway between 1 and the next half (1 + 2^-10): ties go to the even mantissa (1).
  EXPECT_EQ(half_to_float(float_to_half(1.0f + std::ldexp(1.0f, -11))), 1.0f);
  EXPECT_EQ(half_to_float(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11))), 1.0f + std::ldexp(1.0f, -9));
  // Largest finite half, then overflow to infinity.
  EXPECT_EQ(half_to_float(float_to_half(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(half_to_float(float_to_half(1e6f))));
  // bf16 keeps f32's range: 1e30 stays finite, within bf16's 8 mantissa bits.
  EXPECT_NEAR(bfloat16_to_float(float_to_bfloat16(1e30f)), 1e30f, 1e30f / 128);
  // Ties to even in bf16: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7.
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
}

TEST(HalfFloat, FiniteCheck) {
  EXPECT_TRUE(is_finite_float(0.0f));
  EXPECT_TRUE(is_finite_float(-3.0e38f));
  EXPECT_TRUE(is_finite_float(std::numeric_limits<float>::denorm_min()));
  EXPECT_FALSE(is_finite_float(std::numeric_limits<float>::infinity()));
  EXPECT_FALSE(is_finite_float(-std::numeric_limits<float>::infinity()));
  EXPECT_FALSE(is_finite_float(std::numeric_limits<float>::quiet_NaN()));
}

#ifdef SDP_HAVE_CUDA
// Inputs that exercise every branch: zeros, subnormals of both formats, ties, the overflow
// edge, infinities, NaN, and a spread of ordinary values.
std::vector<float> awkward_floats() {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 65519.0f, 65520.0f, 1e30f,
                          std::ldexp(1.0f, -24), std::ldexp(1.0f, -25), std::ldexp(3.0f, -26),
                          1.0f + std::ldexp(1.0f, -11), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  for (int i = 0; i < 100003; ++i) v.push_back(std::ldexp(std::sin(0.37f * i), (i % 60) - 30));
  return v;
}
#endif

TEST(CudaCasts, MatchTheCpuBitForBit) {
#ifndef SDP_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA backend";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const std::vector<float> host = awkward_floats();
  const int64_t n = static_cast<int64_t>(host.size());
  const Device gpu = Device::cuda(0);
  auto src = allocate(gpu, n * sizeof(float));
  auto half = allocate(gpu, n * sizeof(uint16_t));
  auto back = allocate(gpu, n * sizeof(float));
  copy_bytes(gpu, src.get(), Device::cpu(), host.data(), n * sizeof(float));
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    const float scale = 0.5f;
    cuda_casts::from_f32(dtype, half.get(), static_cast<const float*>(src.get()), n, scale, nullptr);
    cuda_casts::to_f32(dtype, static_cast<float*>(back.get()), half.get(), n, 2.0f, nullptr);
    std::vector<uint16_t> got16(n);
    std::vector<float> got32(n);
    copy_bytes(Device::cpu(), got16.data(), gpu, half.get(), n * sizeof(uint16_t));
    copy_bytes(Device::cpu(), got32.data(), gpu, back.get(), n * sizeof(float));
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t want = dtype == DType::kF16 ? float_to_half(host[i] * scale) : float_to_bfloat16(host[i] * scale);
      if (std::isnan(host[i])) {  // any NaN encoding: the GPU's NaN payload is canonical (below)
        const bool nan16 = dtype == DType::kF16 ? (got16[i] & 0x7c00) == 0x7c00 && (got16[i] & 0x03ff) != 0
                                                : (got16[i] & 0x7f80) == 0x7f80 && (got16[i] & 0x007f) != 0;
        ASSERT_TRUE(nan16) << dtype_name(dtype) << " element " << i << " = " << got16[i];
      } else {
        ASSERT_EQ(got16[i], want) << dtype_name(dtype) << " element " << i << " = " << host[i];
      }
      const float want32 = (dtype == DType::kF16 ? half_to_float(want) : bfloat16_to_float(want)) * 2.0f;
      // A NaN stays a NaN, but its payload is the hardware's: the GPU's arithmetic returns the
      // canonical 0x7fffffff where the CPU keeps the input's quiet NaN (seen on an H100).
      if (std::isnan(want32)) {
        ASSERT_TRUE(std::isnan(got32[i])) << dtype_name(dtype) << " element " << i;
        continue;
      }
      ASSERT_EQ(float_bits(got32[i]), float_bits(want32)) << dtype_name(dtype) << " element " << i;
    }
  }
#endif
}

TEST(CudaCasts, FlagNonFinite) {
#ifndef SDP_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA backend";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const Device gpu = Device::cuda(0);
  std::vector<float> host(1000003, 1.0f);
  auto data = allocate(gpu, host.size() * sizeof(float));
  auto flag = allocate(gpu, sizeof(int));
  int got = -1;
  copy_bytes(gpu, data.get(), Device::cpu(), host.data(), host.size() * sizeof(float));
  cuda_casts::flag_nonfinite(static_cast<const float*>(data.get()), host.size(), static_cast<int*>(flag.get()), nullptr);
  copy_bytes(Device::cpu(), &got, gpu, flag.get(), sizeof(int));
  EXPECT_EQ(got, 0);
  host.back() = std::numeric_limits<float>::infinity();
  copy_bytes(gpu, data.get(), Device::cpu(), host.data(), host.size() * sizeof(float));
  cuda_casts::flag_nonfinite(static_cast<const float*>(data.get()), host.size(), static_cast<int*>(flag.get()), nullptr);
  copy_bytes(Device::cpu(), &got, gpu, flag.get(), sizeof(int));
  EXPECT_NE(got, 0);
#endif
}

// What the trainer runs on a GPU's gradients each step: Tensor::all_finite (the non-finite
// check, on a stream) and gradient accumulation's add_scale, bit for bit the host arithmetic.
TEST(CudaCasts, AllFiniteOnAStreamAndAccumulationSums) {
#ifndef SDP_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA backend";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const Device gpu = Device::cuda(0);
  const int64_t n = 1000003;
  std::vector<float> a(n), b(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i % 977) * 0.37f - 11.0f;
    b[i] = static_cast<float>(i % 131) * -1.3f + 0.1f;
  }
  Tensor ta({n}, DType::kF32, gpu), tb({n}, DType::kF32, gpu);
  copy_bytes(gpu, ta.raw(), Device::cpu(), a.data(), n * sizeof(float));
  copy_bytes(gpu, tb.raw(), Device::cpu(), b.data(), n * sizeof(float));
  EXPECT_TRUE(ta.all_finite());
  for (float scale : {1.0f, 1.0f / 3.0f}) {
    cuda_casts::add_scale(ta.data<float>(), tb.data<float>(), n, scale, nullptr);
    std::vector<float> got(n);
    copy_bytes(Device::cpu(), got.data(), gpu, ta.raw(), n * sizeof(float));
    for (int64_t i = 0; i < n; ++i) {
      a[i] = (a[i] + b[i]) * scale;
      ASSERT_EQ(float_bits(got[i]), float_bits(a[i])) << "element " << i << " scale " << scale;
    }
  }
  // The last element, then the first: every block's flag reaches the answer. Twice each, so
  // the check's reused flag is cleared between calls.
  for (int64_t at : {n - 1, int64_t{0}}) {
    const float bad = std::numeric_limits<float>::quiet_NaN();
    copy_bytes(gpu, ta.data<float>() + at, Device::cpu(), &bad, sizeof(float));
    EXPECT_FALSE(ta.all_finite()) << "NaN at " << at;
    EXPECT_FALSE(ta.all_finite()) << "NaN at " << at;
    copy_bytes(gpu, ta.data<float>() + at, Device::cpu(), &a[at], sizeof(float));
    EXPECT_TRUE(ta.all_finite()) << "after clearing " << at;
  }
#endif
}

}  // namespace
}  // namespace sdp
