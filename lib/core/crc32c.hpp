// CRC-32C (Castagnoli, polynomial 0x1EDC6F41, reflected 0x82F63B78), the checksum of
// TFRecord framing, plus TFRecord's "masked" form of it. crc32c() uses the SSE4.2 crc32
// instruction when the CPU has it (checked once at run time, so the default build gets it
// on any x86-64) and a slicing-by-8 table otherwise; both paths are public so the tests can
// check they agree.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sdp {

// The CRC-32C of data[0, n). crc32c("123456789") == 0xE3069283.
uint32_t crc32c(const void* data, std::size_t n);
// The CRC-32C of (the bytes whose CRC-32C is `crc`) followed by data[0, n): checksums a
// buffer that arrives in pieces. crc32c_extend(0, p, n) == crc32c(p, n).
uint32_t crc32c_extend(uint32_t crc, const void* data, std::size_t n);

// The two implementations behind crc32c_extend. crc32c_extend_hardware may be called only
// when crc32c_hardware_available() is true.
uint32_t crc32c_extend_table(uint32_t crc, const void* data, std::size_t n);
uint32_t crc32c_extend_hardware(uint32_t crc, const void* data, std::size_t n);
bool crc32c_hardware_available();

// TFRecord stores masked CRCs: a CRC computed over data that itself holds CRCs is weak, so
// the stored value is rotated and offset (the same mask as LevelDB's).
inline uint32_t crc32c_mask(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}
inline uint32_t crc32c_unmask(uint32_t masked) {
  const uint32_t rotated = masked - 0xa282ead8u;
  return (rotated >> 17) | (rotated << 15);
}

}  // namespace sdp
