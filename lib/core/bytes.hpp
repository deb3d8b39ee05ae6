// Reading and writing integers in byte buffers, as the file formats we read and write lay them
// out (TFRecord's little-endian lengths, protobuf's varints in tf.train.Example and TensorBoard
// events, CRC-32C's 8-byte steps). Byte by byte: no alignment or host byte-order assumption.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sdp {

inline uint32_t load_le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

inline uint64_t load_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Protobuf's base-128 varint: 7 bits a byte, low bits first, the high bit set on all but the last.
inline void put_varint(std::vector<uint8_t>& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<uint8_t>(v));
}

// C++20's std::string::ends_with, for this C++17 code.
inline bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace sdp
