// CTR samples streamed rather than held: a rank's share of the files (or what its host's reader
// of a SageMaker pipe deals it), pass after pass, through a shuffle buffer (record_stream.hpp),
// each record a packed row (stream_source.hpp's pack_ctr_row). A rank holds the buffer and a
// short queue, whatever the set's size.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "data/loading/record_stream.hpp"

namespace sdp {

// Training: step after step, each the next `batch` records of the rank's stream.
class CtrTrainStream {
 public:
  CtrTrainStream(std::shared_ptr<RankRecords> records, int fields, int64_t batch, uint64_t seed, int rank,
                 int64_t shuffle_buffer);
  // Continues at step `step`, the rank's records step * batch on: where an uninterrupted run
  // would be (the same records, shuffled the same way) when the shares' sizes are known; a pipe
  // cannot be repositioned and goes on from where it is (its first FIFO at the start).
  void start(int64_t step);
  // The next batch: ids and values (batch * fields), labels (batch) and each sample's id
  // (unique within a pass; it keys the dropout). Rethrows a reader's InputError.
  void next(int64_t* ids, float* values, float* labels, int64_t* samples);

 private:
  std::shared_ptr<RankRecords> records_;
  int fields_;
  int64_t batch_;
  int rank_;
  RecordStream stream_;
  int64_t taken_ = -1;  // records handed out (-1: not started)
  StreamedRecord record_;
};

// One pass of `records` (a rank's share of a test set, in reading order) in batches of at most
// `batch`: score(n, ids, values, labels) for each. Rethrows a reader's InputError.
void for_each_ctr_batch(std::shared_ptr<RankRecords> records, int64_t pass, int fields, int64_t batch,
                        const std::function<void(int64_t, const int64_t*, const float*, const float*)>& score);

}  // namespace sdp
