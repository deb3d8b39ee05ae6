#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/crc32c.hpp"

namespace sdp {
namespace {

// Bit-at-a-time CRC-32C straight from the definition: the reference both fast paths are
// checked against.
uint32_t crc32c_bitwise(const uint8_t* p, std::size_t n) {
  uint32_t crc = 0xffffffffu;
  for (std::size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

TEST(Crc32c, PublishedVectors) {
  const std::string check = "123456789";
  EXPECT_EQ(crc32c(check.data(), check.size()), 0xE3069283u);
  // RFC 3720 (iSCSI), appendix B.4.
  std::vector<uint8_t> zeros(32, 0x00), ones(32, 0xff), ascending(32), descending(32);
  for (int i = 0; i < 32; ++i) {
    ascending[i] = static_cast<uint8_t>(i);
    descending[i] = static_cast<uint8_t>(31 - i);
  }
  EXPECT_EQ(crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(crc32c(ascending.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(crc32c(descending.data(), 32), 0x113FDB5Cu);
  EXPECT_EQ(crc32c(nullptr, 0), 0u);
  // The same vectors through each implementation, and the bitwise reference.
  for (const auto* v : {&zeros, &ones, &ascending}) {
    const uint32_t expected = crc32c(v->data(), v->size());
    EXPECT_EQ(crc32c_extend_table(0, v->data(), v->size()), expected);
    EXPECT_EQ(crc32c_bitwise(v->data(), v->size()), expected);
    if (crc32c_hardware_available())
      EXPECT_EQ(crc32c_extend_hardware(0, v->data(), v->size()), expected);
  }
}

TEST(Crc32c, TableAndHardwareAgreeOnEveryLengthAndAlignment) {
  std::mt19937 rng(7);
  std::vector<uint8_t> buffer(4096 + 16);
  for (auto& b : buffer) b = static_cast<uint8_t>(rng());
  for (std::size_t align = 0; align < 8; ++align) {
    for (std::size_t n = 0; n <= 300; ++n) {
      const uint8_t* p = buffer.data() + align;
      const uint32_t reference = crc32c_bitwise(p, n);
      ASSERT_EQ(crc32c_extend_table(0, p, n), reference) << "n=" << n << " align=" << align;
      if (crc32c_hardware_available())
        ASSERT_EQ(crc32c_extend_hardware(0, p, n), reference) << "n=" << n << " align=" << align;
    }
  }
  for (std::size_t n : {1023u, 1024u, 4096u}) {
    const uint32_t reference = crc32c_bitwise(buffer.data() + 3, n);
    EXPECT_EQ(crc32c_extend_table(0, buffer.data() + 3, n), reference);
    EXPECT_EQ(crc32c(buffer.data() + 3, n), reference);
  }
  if (!crc32c_hardware_available()) GTEST_SKIP() << "no SSE4.2: only the table path was checked";
}

TEST(Crc32c, LongBuffersThroughTheThreeStreamPathMatchTheReference) {
  // The hardware path runs buffers of 3 x 4 KB and more as three interleaved streams joined
  // by a shift: lengths around its block boundaries, odd alignments, a CRC carried in.
  if (!crc32c_hardware_available()) GTEST_SKIP() << "no SSE4.2: the table path has no long-buffer special case";
  std::mt19937 rng(11);
  std::vector<uint8_t> buffer(5 * 12288 + 64);
  for (auto& b : buffer) b = static_cast<uint8_t>(rng());
  for (std::size_t n : {12287u, 12288u, 12289u, 12288u + 7u, 24576u, 24576u + 4095u, 5u * 12288u + 33u}) {
    for (std::size_t align : {0u, 1u, 5u}) {
      const uint8_t* p = buffer.data() + align;
      const uint32_t reference = crc32c_bitwise(p, n);
      ASSERT_EQ(crc32c_extend_hardware(0, p, n), reference) << "n=" << n << " align=" << align;
      const uint32_t head = crc32c_bitwise(p, 100);
      ASSERT_EQ(crc32c_extend_hardware(head, p + 100, n - 100), reference) << "extended, n=" << n;
    }
  }
}

TEST(Crc32c, ExtendEqualsOneShot) {
  const std::string text = "The quick brown fox jumps over the lazy dog";
  const uint32_t whole = crc32c(text.data(), text.size());
  for (std::size_t split = 0; split <= text.size(); ++split) {
    const uint32_t first = crc32c(text.data(), split);
    EXPECT_EQ(crc32c_extend(first, text.data() + split, text.size() - split), whole);
    EXPECT_EQ(crc32c_extend_table(first, text.data() + split, text.size() - split), whole);
  }
}

TEST(Crc32c, MaskRoundTripsAndMatchesTfRecord) {
  // TFRecord's mask (tensorflow/core/lib/hash/crc32c.h): rotate right by 15, add 0xa282ead8.
  // 0xE3069283 rotated right by 15 is 0x2507C60D; plus the constant, 0xC78AB0E5.
  EXPECT_EQ(crc32c_mask(0xE3069283u), 0xC78AB0E5u);
  for (uint32_t v : {0u, 1u, 0xffffffffu, 0x12345678u, 0xE3069283u})
    EXPECT_EQ(crc32c_unmask(crc32c_mask(v)), v);
  EXPECT_NE(crc32c_mask(0x12345678u), 0x12345678u);
}

}  // namespace
}  // namespace sdp
