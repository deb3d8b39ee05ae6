// The optimizers' range tables for the CUDA twins (optim/optimizer.hpp). Built only with the
// CUDA backend.
#include "optim/cuda_updates.hpp"
#include "optim/optimizer.hpp"

namespace sdp {

const cuda_updates::RangeTable& Optimizer::segment_table() {
  if (!segment_table_) {
    std::vector<cuda_updates::Range> ranges;
    for (const Segment& seg : segments_) ranges.push_back({seg.begin, seg.count, seg.weight_decay, 0});
    segment_table_ = cuda_updates::make_range_table(ranges, store_.device().index);
  }
  return *segment_table_;
}

const cuda_updates::RangeTable& Optimizer::parameter_table(float weight_decay) {
  if (!parameter_table_) {
    std::vector<cuda_updates::Range> ranges;
    for (const Param& p : store_.params())
      ranges.push_back({p.offset, shape_numel(p.shape), p.weight_decay ? weight_decay : 0.0f, p.weight_decay ? 1 : 0});
    parameter_table_ = cuda_updates::make_range_table(ranges, store_.device().index);
  }
  return *parameter_table_;
}

}  // namespace sdp
