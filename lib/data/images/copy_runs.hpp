// CopyRuns: a list of copies (dst, src, bytes) merged where one continues the last in both
// places, so a batch of samples that sit side by side on both ends goes in one copy (one
// cudaMemcpyAsync for the GPU decoder's batch, not one per sample).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sdp {

struct CopyRuns {
  struct Run {
    uint8_t* dst = nullptr;
    const uint8_t* src = nullptr;
    std::size_t bytes = 0;
  };
  std::vector<Run> runs;

  void add(uint8_t* dst, const uint8_t* src, std::size_t bytes) {
    if (!runs.empty()) {
      Run& last = runs.back();
      if (last.dst + last.bytes == dst && last.src + last.bytes == src) {
        last.bytes += bytes;
        return;
      }
    }
    runs.push_back({dst, src, bytes});
  }
};

}  // namespace sdp
