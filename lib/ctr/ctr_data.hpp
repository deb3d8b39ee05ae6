// Where a CTR job's samples come from: files read into memory (CtrRecords: LibSVM or the
// sample's TFRecord layout) or the planted synthetic set, generated per sample index on demand
// (any size, nothing on disk).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/formats/ctr_records.hpp"

namespace sdp {

class CtrSource {
 public:
  virtual ~CtrSource() = default;
  virtual int64_t size() const = 0;
  virtual int fields() const = 0;
  // Samples `indices[0..n)` into ids/values (n * fields) and labels (n).
  virtual void fill(const int64_t* indices, int64_t n, int64_t* ids, float* values, float* labels) const = 0;
};

class CtrRecordsSource : public CtrSource {
 public:
  explicit CtrRecordsSource(CtrRecords records) : records_(std::move(records)) {}
  int64_t size() const override { return records_.size(); }
  int fields() const override { return records_.fields; }
  void fill(const int64_t* indices, int64_t n, int64_t* ids, float* values, float* labels) const override;
  const CtrRecords& records() const { return records_; }

 private:
  CtrRecords records_;
};

struct PlantedCtrOptions {
  int64_t samples = 0;
  int fields = 0;
  int64_t rows = 0;       // ids over all fields; field f owns rows [f*rows/F, (f+1)*rows/F)
  double zipf = 1.1;      // each field's ids ~ Zipf(zipf) over its rows
  uint64_t seed = 0;      // the planted model's, shared by the train and test splits
  uint64_t split = 0;     // 0 train, 1 test: which samples the indices name
};

// Labels drawn from a planted DeepFM (first order, an FM term over K = 4 and a hidden layer of
// 16), so the best test AUC any model can reach is known: planted_auc().
class PlantedCtrSource : public CtrSource {
 public:
  explicit PlantedCtrSource(const PlantedCtrOptions& options);
  int64_t size() const override { return options_.samples; }
  int fields() const override { return options_.fields; }
  void fill(const int64_t* indices, int64_t n, int64_t* ids, float* values, float* labels) const override;
  // The planted model's click probability of sample i.
  double probability(int64_t index, const int64_t* ids) const;
  // The AUC of the planted probabilities on this split's labels.
  double planted_auc() const;

 private:
  PlantedCtrOptions options_;
  std::vector<double> hidden_;  // [16, F * 4]: the planted hidden layer
  std::vector<double> output_;  // [16]
};

}  // namespace sdp
