#include "distributed/communicator.hpp"

#include <algorithm>

namespace sdp {

const char* reduce_op_name(ReduceOp op) { return op == ReduceOp::kSum ? "sum" : "avg"; }

std::shared_ptr<Work> completed_work() {
  static const std::shared_ptr<Work> done = std::make_shared<CompletedWork>();
  return done;
}

std::vector<int64_t> part_offsets(const std::vector<int64_t>& counts) {
  std::vector<int64_t> offsets(counts.size(), 0);
  for (std::size_t i = 1; i < counts.size(); ++i) offsets[i] = offsets[i - 1] + counts[i - 1];
  return offsets;
}

std::vector<int64_t> split_counts(int64_t count, int parts, int64_t align) {
  std::vector<int64_t> counts(parts, 0);
  if (align <= 1) {
    for (int i = 0; i < parts; ++i) counts[i] = count / parts + (i < count % parts ? 1 : 0);
    return counts;
  }
  int64_t chunk = (count + parts - 1) / parts;
  chunk = (chunk + align - 1) / align * align;
  for (int i = 0; i < parts; ++i) counts[i] = std::clamp<int64_t>(count - i * chunk, 0, chunk);
  return counts;
}

}  // namespace sdp
