#include "ctr/ctr_stream.hpp"

#include <algorithm>

namespace sdp {

namespace {

void unpack(const StreamedRecord& r, int fields, int64_t* ids, float* values, float* label) {
  unpack_ctr_row(r.record.image, fields, ids, values);
  *label = static_cast<float>(r.record.label);
}

}  // namespace

CtrTrainStream::CtrTrainStream(std::shared_ptr<RankRecords> records, int fields, int64_t batch, uint64_t seed,
                               int rank, int64_t shuffle_buffer)
    : records_(records),
      fields_(fields),
      batch_(batch),
      rank_(rank),
      stream_(std::move(records), {seed, rank, shuffle_buffer, /*repeat=*/true, std::max<int64_t>(256, 2 * batch)}) {}

void CtrTrainStream::start(int64_t step) {
  const int64_t records = step * batch_;
  if (records == taken_) return;
  if (const auto position = stream_position(*records_, records, rank_)) {
    stream_.start(position->first, position->second);
  } else if (taken_ < 0) {
    stream_.start(0, 0);
  }
  taken_ = records;
}

void CtrTrainStream::next(int64_t* ids, float* values, float* labels, int64_t* samples) {
  for (int64_t i = 0; i < batch_; ++i) {
    if (!stream_.next(record_)) throw std::logic_error("CtrTrainStream: the repeating stream ended");
    unpack(record_, fields_, ids + i * fields_, values + i * fields_, labels + i);
    samples[i] = records_->sample_id(record_);
  }
  taken_ += batch_;
}

void for_each_ctr_batch(std::shared_ptr<RankRecords> records, int64_t pass, int fields, int64_t batch,
                        const std::function<void(int64_t, const int64_t*, const float*, const float*)>& score) {
  RecordStream stream(records, {0, 0, /*shuffle_buffer=*/0, /*repeat=*/false, std::max<int64_t>(256, 2 * batch)});
  stream.start(pass, 0);
  std::vector<int64_t> ids(static_cast<size_t>(batch * fields));
  std::vector<float> values(ids.size()), labels(static_cast<size_t>(batch));
  StreamedRecord record;
  while (true) {
    int64_t n = 0;
    while (n < batch && stream.next(record)) {
      unpack(record, fields, ids.data() + n * fields, values.data() + n * fields, labels.data() + n);
      ++n;
    }
    if (n == 0) return;
    score(n, ids.data(), values.data(), labels.data());
    if (n < batch) return;
  }
}

}  // namespace sdp
