#include "core/crc32c.hpp"

#include <array>
#include <cstring>

#include "core/bytes.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define SDP_CRC32C_X86 1
#endif

namespace sdp {

namespace {

constexpr uint32_t kPolynomial = 0x82F63B78u;  // 0x1EDC6F41 bit-reversed

// kTables[0] is the classic byte-at-a-time table; kTables[k][b] is the CRC of byte b
// followed by k zero bytes, which lets the loop below fold 8 bytes per step.
using Tables = std::array<std::array<uint32_t, 256>, 8>;
constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = b;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (kPolynomial & (0u - (crc & 1u)));
    t[0][b] = crc;
  }
  for (int k = 1; k < 8; ++k)
    for (uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
  return t;
}
constexpr Tables kTables = make_tables();

}  // namespace

uint32_t crc32c_extend_table(uint32_t crc, const void* data, std::size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    const uint64_t v = load_le64(p) ^ c;
    c = kTables[7][v & 0xff] ^ kTables[6][(v >> 8) & 0xff] ^ kTables[5][(v >> 16) & 0xff] ^
        kTables[4][(v >> 24) & 0xff] ^ kTables[3][(v >> 32) & 0xff] ^ kTables[2][(v >> 40) & 0xff] ^
        kTables[1][(v >> 48) & 0xff] ^ kTables[0][v >> 56];
  }
  for (; n > 0; --n, ++p) c = (c >> 8) ^ kTables[0][(c ^ *p) & 0xff];
  return ~c;
}

#ifdef SDP_CRC32C_X86
namespace {

// The crc32 instruction has a latency of 3 cycles and a throughput of 1: one dependent chain
// uses a third of it. Long buffers go as three streams of kStreamBytes side by side, joined by
// "shifting" a stream's CRC register over the kStreamBytes of the next: appending zero bytes
// to a CRC register is linear over GF(2), so it is a 32x32 bit matrix, applied here as 4
// byte-indexed tables (the method of Mark Adler's crc32c.c).
constexpr std::size_t kStreamBytes = 4096;

struct ShiftTables {
  std::array<std::array<uint32_t, 256>, 4> by_byte;
  ShiftTables() {
    // Column j: register bit j alone, carried through kStreamBytes zero bytes.
    std::array<uint32_t, 32> column{};
    for (int j = 0; j < 32; ++j) {
      uint32_t c = 1u << j;
      for (std::size_t i = 0; i < kStreamBytes; ++i) c = (c >> 8) ^ kTables[0][c & 0xff];
      column[j] = c;
    }
    for (int k = 0; k < 4; ++k)
      for (uint32_t b = 0; b < 256; ++b) {
        uint32_t v = 0;
        for (int bit = 0; bit < 8; ++bit)
          if (b & (1u << bit)) v ^= column[8 * k + bit];
        by_byte[k][b] = v;
      }
  }
  uint32_t shift(uint32_t c) const {
    return by_byte[0][c & 0xff] ^ by_byte[1][(c >> 8) & 0xff] ^ by_byte[2][(c >> 16) & 0xff] ^ by_byte[3][c >> 24];
  }
};

}  // namespace

__attribute__((target("sse4.2"))) uint32_t crc32c_extend_hardware(uint32_t crc, const void* data,
                                                                  std::size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t c = ~crc;
  if (n >= 3 * kStreamBytes) {
    static const ShiftTables tables;
    for (; n >= 3 * kStreamBytes; n -= 3 * kStreamBytes, p += 3 * kStreamBytes) {
      uint64_t c1 = 0, c2 = 0;
      for (std::size_t i = 0; i < kStreamBytes; i += 8) {
        uint64_t v0, v1, v2;
        std::memcpy(&v0, p + i, 8);
        std::memcpy(&v1, p + kStreamBytes + i, 8);
        std::memcpy(&v2, p + 2 * kStreamBytes + i, 8);
        c = _mm_crc32_u64(c, v0);
        c1 = _mm_crc32_u64(c1, v1);
        c2 = _mm_crc32_u64(c2, v2);
      }
      c = tables.shift(static_cast<uint32_t>(c)) ^ static_cast<uint32_t>(c1);
      c = tables.shift(static_cast<uint32_t>(c)) ^ static_cast<uint32_t>(c2);
    }
  }
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);  // x86 is little-endian, and unaligned loads are fine
    c = _mm_crc32_u64(c, v);
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  for (; n > 0; --n, ++p) c32 = _mm_crc32_u8(c32, *p);
  return ~c32;
}

bool crc32c_hardware_available() {
  static const bool available = __builtin_cpu_supports("sse4.2");
  return available;
}
#else
uint32_t crc32c_extend_hardware(uint32_t crc, const void* data, std::size_t n) {
  return crc32c_extend_table(crc, data, n);  // no crc32 instruction on this target
}

bool crc32c_hardware_available() {
  return false;
}
#endif

uint32_t crc32c_extend(uint32_t crc, const void* data, std::size_t n) {
  return crc32c_hardware_available() ? crc32c_extend_hardware(crc, data, n)
                                     : crc32c_extend_table(crc, data, n);
}

uint32_t crc32c(const void* data, std::size_t n) {
  return crc32c_extend(0, data, n);
}

}  // namespace sdp
