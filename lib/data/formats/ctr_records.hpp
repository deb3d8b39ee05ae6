// CtrRecords: samples of sparse categorical features, as CTR models read them. Each sample
// has exactly `fields` (id, value) pairs and a 0/1 label; a LibSVM line or a tf.train.Example
// of the SageMaker DeepFM sample's layout (label, ids, values) becomes one sample. Rows with
// fewer pairs than fields are padded with id 0, value 0 (a zero value contributes nothing to
// the model's output or gradients).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/loading/random.hpp"

namespace sdp {

struct CtrRecords {
  int fields = 0;
  std::vector<int64_t> ids;    // size() * fields, row-major by sample
  std::vector<float> values;   // size() * fields
  std::vector<float> labels;   // size(), each 0 or 1

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

// What happens to an id at or above the table's rows.
enum class IdOverflow {
  kError,  // an InputError naming file, line and field (the default)
  kHash,   // mapped into the table by a fixed hash (id -> splitmix64(id) % rows), counted
};

struct CtrReadOptions {
  int fields = 0;            // F: a row with fewer pairs is padded, one with more is an error
  int64_t table_rows = 0;    // ids must be below this (or are hashed into it)
  IdOverflow id_overflow = IdOverflow::kError;
  bool skip_bad = false;     // data.on_bad_record: skip: a bad line/record is skipped and counted
  // tfrecord: the Example's feature names (the sample's layout by default)
  std::string label_key = "label";
  std::string ids_key = "ids";
  std::string values_key = "values";
};

// What reading a file met, for the log and `data inspect`.
struct CtrReadStats {
  int64_t samples = 0;       // appended
  int64_t skipped = 0;       // bad lines/records skipped (skip_bad)
  int64_t padded = 0;        // samples with fewer pairs than fields
  int64_t hashed_ids = 0;    // ids at or above table_rows mapped by the hash
  int64_t max_id = -1;       // the largest id seen before hashing
  std::string first_skipped; // the first skipped line's error, "FILE:LINE: ..." ("" if none)
};

// The row an id at or above `rows` maps to under IdOverflow::kHash.
inline int64_t hash_id_into(int64_t id, int64_t rows) {
  return static_cast<int64_t>(mix64(static_cast<uint64_t>(id)) % static_cast<uint64_t>(rows));
}

}  // namespace sdp
