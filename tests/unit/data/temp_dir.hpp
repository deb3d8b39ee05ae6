// Test helpers: a temporary directory removed at scope exit, and writers for the small
// raw / gzip files the reader tests decode.
#pragma once

#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace sdp::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "sdp-data-test-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

inline void write_raw(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

inline void write_gz(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("gzopen failed: " + path);
  if (!bytes.empty()) gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

inline std::vector<uint8_t> read_raw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void put_be32(std::vector<uint8_t>& v, uint32_t x) {
  for (int s = 24; s >= 0; s -= 8) v.push_back(static_cast<uint8_t>(x >> s));
}

// IDX image file: count images of rows x cols, pixel (i, k) = (i * 7 + k) % 256.
inline std::vector<uint8_t> idx_images(uint32_t count, uint32_t rows, uint32_t cols,
                                       uint32_t magic = 0x803) {
  std::vector<uint8_t> v;
  put_be32(v, magic);
  put_be32(v, count);
  put_be32(v, rows);
  put_be32(v, cols);
  for (uint32_t i = 0; i < count; ++i)
    for (uint32_t k = 0; k < rows * cols; ++k) v.push_back(static_cast<uint8_t>((i * 7 + k) % 256));
  return v;
}

// IDX label file: label i = i % 10.
inline std::vector<uint8_t> idx_labels(uint32_t count, uint32_t magic = 0x801) {
  std::vector<uint8_t> v;
  put_be32(v, magic);
  put_be32(v, count);
  for (uint32_t i = 0; i < count; ++i) v.push_back(static_cast<uint8_t>(i % 10));
  return v;
}

// CIFAR records: label (first_label + r) % 10, pixel k of record r = (r * 3 + k) % 256.
inline std::vector<uint8_t> cifar_records(int count, int first_label = 0) {
  std::vector<uint8_t> v;
  for (int r = 0; r < count; ++r) {
    v.push_back(static_cast<uint8_t>((first_label + r) % 10));
    for (int k = 0; k < 3072; ++k) v.push_back(static_cast<uint8_t>((r * 3 + k) % 256));
  }
  return v;
}

// Where the shared real data sets live: $SDP_DATA_DIR, else the build-time default.
inline std::string data_dir() {
  const char* env = std::getenv("SDP_DATA_DIR");
  if (env && *env) return env;
#ifdef SDP_DEFAULT_DATA_DIR
  return SDP_DEFAULT_DATA_DIR;
#else
  return "../shared/data";
#endif
}

}  // namespace sdp::testing
