// The safetensors reader on hand-made malformed files: every defect the format can carry
// (header length, JSON, types, shapes, offsets, overlap, holes) is an InputError naming the
// file, never a crash, an undefined conversion or an allocation the file does not back.
// Several are reductions of fuzzing inputs (docs/robustness.md, scripts/fuzz.sh).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/crc32c.hpp"
#include "core/error.hpp"
#include "io/safetensors.hpp"

namespace sdp {
namespace {

namespace fs = std::filesystem;

class SafetensorsFile : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "sdp-st-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Writes <8-byte length><header><data bytes> and returns the path.
  std::string write(const std::string& header, std::size_t data_bytes) {
    const std::string path = (dir_ / "t.safetensors").string();
    std::ofstream out(path, std::ios::binary);
    const uint64_t n = header.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << header << std::string(data_bytes, '\x01');
    return path;
  }

  // The InputError message of loading a file with `header` and `data_bytes` of data.
  std::string error_of(const std::string& header, std::size_t data_bytes) {
    const std::string path = write(header, data_bytes);
    try {
      load_safetensors(path);
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(path), std::string::npos) << what;
      return what;
    }
    ADD_FAILURE() << "no InputError for header " << header;
    return "";
  }

  fs::path dir_;
};

#define EXPECT_ERROR(header, bytes, part) \
  EXPECT_NE(error_of(header, bytes).find(part), std::string::npos) << error_of(header, bytes)

TEST_F(SafetensorsFile, WellFormedFileLoads) {
  const auto c = load_safetensors(
      write(R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
            R"("b":{"dtype":"BF16","shape":[0,3],"data_offsets":[8,8]},)"
            R"("c":{"dtype":"F16","shape":[],"data_offsets":[8,10]}})",
            10));
  ASSERT_EQ(c.tensors.size(), 3u);
  EXPECT_EQ(c.metadata.at("k"), "v");
  EXPECT_FALSE(c.checksummed);  // another tool's file (or one of ours from before checksums)
}

// The header of one F32 tensor 'a' of 2 elements (8 bytes of 0x01) whose metadata carries
// `checksums` under the checksums' key.
std::string header_with_checksums(const std::string& checksums) {
  nlohmann::json header = {{"__metadata__", {{"k", "v"}, {kChecksumsKey, checksums}}},
                           {"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}}};
  return header.dump();
}

std::string hex(uint32_t crc) {
  char text[16];
  std::snprintf(text, sizeof text, "%08x", crc);
  return text;
}

TEST_F(SafetensorsFile, ChecksumsMatchOrNameWhatIsDamaged) {
  const std::string data(8, '\x01');
  const std::string meta_crc = hex(crc32c_extend(crc32c("k", 2), "v", 2));  // key and value with their NULs
  const std::string good = hex(crc32c(data.data(), data.size()));
  const auto c = load_safetensors(write(header_with_checksums(
      nlohmann::json({{"__metadata__", meta_crc}, {"a", good}}).dump()), 8));
  EXPECT_TRUE(c.checksummed);
  EXPECT_EQ(c.metadata.count(kChecksumsKey), 0u);  // the checksums are the reader's, not the caller's
  EXPECT_EQ(c.metadata.at("k"), "v");
  EXPECT_ERROR(header_with_checksums(nlohmann::json({{"__metadata__", meta_crc}, {"a", "0badf00d"}}).dump()), 8,
               "tensor 'a' is damaged: its CRC-32C is " + good + ", the file recorded 0badf00d");
  EXPECT_ERROR(header_with_checksums(nlohmann::json({{"__metadata__", "0badf00d"}, {"a", good}}).dump()), 8,
               "the metadata is damaged");
  EXPECT_ERROR(header_with_checksums(nlohmann::json({{"__metadata__", meta_crc}}).dump()), 8,
               "they name 0 tensors, the file holds 1");
  EXPECT_ERROR(header_with_checksums(nlohmann::json({{"__metadata__", meta_crc}, {"b", good}}).dump()), 8,
               "tensor 'a' has none");
  EXPECT_ERROR(header_with_checksums(nlohmann::json({{"a", good}}).dump()), 8, "with an entry '__metadata__'");
  EXPECT_ERROR(header_with_checksums(nlohmann::json({{"__metadata__", meta_crc}, {"a", "xyz"}}).dump()), 8,
               "'a' is \"xyz\", not 8 hex digits");
  EXPECT_ERROR(header_with_checksums("{not json"), 8, "the checksums (metadata 'crc32c') are damaged");
}

TEST_F(SafetensorsFile, EverySingleBitFlipInTheDataIsFound) {
  const std::string path = (dir_ / "written.safetensors").string();
  Tensor a({5}, DType::kF32), b({3}, DType::kBF16);
  for (int i = 0; i < 5; ++i) a.data<float>()[i] = 0.5f * static_cast<float>(i);
  save_safetensors(path, {{"a", a}, {"b", b}}, {{"step", "7"}});
  EXPECT_TRUE(load_safetensors(path).checksummed);
  std::ifstream in(path, std::ios::binary);
  const std::string original((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  uint64_t header = 0;
  std::memcpy(&header, original.data(), 8);
  const std::size_t data_start = 8 + header;
  for (std::size_t byte = data_start; byte < original.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = original;
      flipped[byte] = static_cast<char>(flipped[byte] ^ (1 << bit));
      std::ofstream(path, std::ios::binary | std::ios::trunc) << flipped;
      const char* tensor = byte - data_start < 20 ? "tensor 'a' is damaged" : "tensor 'b' is damaged";
      try {
        load_safetensors(path);
        ADD_FAILURE() << "bit " << bit << " of byte " << byte << " flipped, no error";
      } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find(tensor), std::string::npos) << e.what();
      }
    }
  }
}

TEST_F(SafetensorsFile, TheChecksumsKeyIsNotTheCallers) {
  EXPECT_THROW(save_safetensors((dir_ / "x.safetensors").string(), {}, {{kChecksumsKey, "mine"}}), std::logic_error);
}

TEST_F(SafetensorsFile, HeaderAndJsonDefects) {
  EXPECT_ERROR("", 0, "corrupt safetensors header");
  EXPECT_ERROR("[1, 2]", 0, "not a JSON object");
  // A number beyond double's range is nlohmann's out_of_range, not a parse_error.
  EXPECT_ERROR(R"({"a": 1e999})", 0, "corrupt safetensors header");
  EXPECT_ERROR(R"({"__metadata__": [1]})", 0, "__metadata__ is not a JSON object");
  EXPECT_ERROR(R"({"__metadata__": {"step": 7}})", 0, "'step' is not a string");
  EXPECT_ERROR(R"({"a": 5})", 0, "tensor 'a' is not a JSON object");
  EXPECT_ERROR(R"({"a": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})", 8,
               "unsupported dtype");
  EXPECT_ERROR(R"({"a": {"dtype": 3, "shape": [1], "data_offsets": [0, 4]}})", 4,
               "unsupported dtype");
  EXPECT_ERROR(R"({"a": {"dtype": "F32", "data_offsets": [0, 4]}})", 4, "no shape");
}

TEST_F(SafetensorsFile, ShapesThatAreNotSizes) {
  // Negative dimensions with a positive product passed the size check and reached Tensor.
  EXPECT_ERROR(R"({"a": {"dtype": "F32", "shape": [-1, -4], "data_offsets": [0, 16]}})", 16,
               "not a list of non-negative integers");
  // 1e300 as int64_t is undefined behaviour in the conversion.
  EXPECT_ERROR(R"({"a": {"dtype": "F32", "shape": [1e300], "data_offsets": [0, 4]}})", 4,
               "not a list of non-negative integers");
  // 2^32 * 2^32 wraps to 0 in 64 bits: an empty byte range must not pass for it.
  EXPECT_ERROR(
      R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})", 0,
      "does not match its shape");
  EXPECT_ERROR(R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8,
               "does not match its shape");
}

TEST_F(SafetensorsFile, OffsetsOutsideOverlappingOrLeavingHoles) {
  EXPECT_ERROR(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", 4,
               "no data_offsets");
  EXPECT_ERROR(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 4,
               "no data_offsets");
  EXPECT_ERROR(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 4,
               "outside the 4 bytes");
  EXPECT_ERROR(R"({"a": {"dtype": "F32", "shape": [0], "data_offsets": [4, 0]}})", 4, "outside");
  EXPECT_ERROR(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
               R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
               12, "overlaps");
  EXPECT_ERROR(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8,
               "leaves a hole");
  EXPECT_ERROR(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 9,
               "5 bytes after the last tensor");
}

TEST_F(SafetensorsFile, HeaderLengthBeyondTheFileOrTheCap) {
  const std::string path = (dir_ / "t.safetensors").string();
  for (uint64_t n : {uint64_t{1} << 40, uint64_t{64}, uint64_t{32} << 20}) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << "{}";
    out.close();
    try {
      load_safetensors(path);
      ADD_FAILURE() << "no InputError for header length " << n;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("corrupt safetensors header length"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace sdp
