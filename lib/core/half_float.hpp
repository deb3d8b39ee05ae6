// The 16-bit float formats of gradient compression and mixed precision, converted to and from
// f32 by bit manipulation, once for both devices (core/host_device.hpp): the MPI reduction
// kernels, the CPU casts and the CUDA cast kernels all round the same way (to nearest even;
// NaN stays NaN, overflow becomes infinity), so a value cast on either device has the same
// bits.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/host_device.hpp"

namespace sdp {

SDP_HOST_DEVICE uint32_t float_bits(float value) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(value);
#else
  uint32_t x;
  std::memcpy(&x, &value, 4);
  return x;
#endif
}

SDP_HOST_DEVICE float float_from_bits(uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
#endif
}

SDP_HOST_DEVICE uint16_t float_to_half(float value) {
  const uint32_t x = float_bits(value);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return static_cast<uint16_t>(sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (abs < 0x38800000u) {
    // Subnormal half (or zero): value = m * 2^-24, rounded to nearest even.
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // 14..24
    uint32_t half = mant >> shift;
    const uint32_t rest = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rest > mid || (rest == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = ((abs - 0x38000000u) >> 13);
  const uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

SDP_HOST_DEVICE float half_to_float(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exp = (bits >> 10) & 0x1fu, mant = bits & 0x3ffu;
  if (exp == 0) {
    // Subnormal: mant * 2^-24, exact in f32.
    return float_from_bits(float_bits(static_cast<float>(mant) * 5.9604644775390625e-8f) | sign);
  }
  if (exp == 31) return float_from_bits(sign | 0x7f800000u | (mant << 13));
  return float_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
}

SDP_HOST_DEVICE uint16_t float_to_bfloat16(float value) {
  uint32_t x = float_bits(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(x >> 16);
}

SDP_HOST_DEVICE float bfloat16_to_float(uint16_t bits) { return float_from_bits(static_cast<uint32_t>(bits) << 16); }

// No NaN or infinity (the loss-scaling overflow check, the gradient check).
SDP_HOST_DEVICE bool is_finite_float(float value) { return (float_bits(value) & 0x7f800000u) != 0x7f800000u; }

}  // namespace sdp
