#include "data/crc32c.hpp"

#include <array>
#include <cstring>

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

// Little-endian 8-byte load, byte by byte: no alignment or host byte-order assumption.
uint64_t load_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

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
__attribute__((target("sse4.2"))) uint32_t crc32c_extend_hardware(uint32_t crc, const void* data,
                                                                  std::size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t c = ~crc;
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
