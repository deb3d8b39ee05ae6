// The safetensors reader on hand-made malformed files: every defect the format can carry
// (header length, JSON, types, shapes, offsets, overlap, holes) is an InputError naming the
// file, never a crash, an undefined conversion or an allocation the file does not back.
// Several are reductions of fuzzing inputs (docs/robustness.md, scripts/fuzz.sh).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

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
