// What every fuzz target shares: the input bytes written to a file the reader opens (the
// readers take paths, as they do in production), and the one rule of the harness: an
// sdp::InputError is the reader rejecting bad input, which is the expected outcome; anything else
// escaping (another exception, a crash, a sanitizer report, an allocation beyond
// -malloc_limit_mb) is a finding.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace sdp::fuzz {

// A directory of this process (libFuzzer's -jobs/-fork run several processes at once).
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    std::string d = "/tmp/sdp-fuzz-" + std::to_string(getpid());
    std::string cmd = "mkdir -p " + d;
    if (std::system(cmd.c_str()) != 0) std::abort();
    return d;
  }();
  return dir;
}

// Writes `size` bytes to scratch_dir()/name (replacing it) and returns the path.
inline std::string write_file(const std::string& name, const uint8_t* data, size_t size) {
  std::string path = scratch_dir() + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

}  // namespace sdp::fuzz
