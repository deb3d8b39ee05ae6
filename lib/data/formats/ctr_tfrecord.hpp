// TFRecord files of CTR samples in the layout of the SageMaker DeepFM sample
// (aws-samples/deepfm-tensorflow-distributed-training-on-amazon-sagemaker,
// tools/libsvm_to_tfrecord.py): one tf.train.Example a sample, with the features
//   label   float_list, one value: 0 or 1 (-1 / +1 read as 0 / 1; an int64_list is read too)
//   ids     int64_list, one id a field (fewer: the row is padded, CtrRecords)
//   values  float_list, one value an id; when absent every value is 1 (one-hot features,
//           whose values are all 1, are often written without them)
// named by CtrReadOptions' label_key, ids_key and values_key. Plain or gzip files, every CRC
// checked (TfRecordReader).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/formats/ctr_records.hpp"
#include "data/formats/ctr_sample.hpp"
#include "data/formats/tf_example.hpp"

namespace sdp {

// Decodes the Examples of one file after another, reusing its buffers.
class CtrExampleDecoder {
 public:
  // Takes the feature names from keys.label_key, ids_key and values_key.
  explicit CtrExampleDecoder(const CtrReadOptions& keys);

  // One serialized Example into `sample`. Throws InputError, without the file and record (the
  // caller adds them), for malformed bytes, a missing label or ids feature, a feature of the
  // wrong list kind, a label that is not one value of 0 / 1 / -1 / +1, or values whose count
  // differs from the ids'. Ids are not checked here (append_ctr_sample checks them).
  void decode(const uint8_t* data, std::size_t size, CtrSample& sample);

 private:
  std::vector<NamedFeature> wanted_;  // label, ids, values
};

// Appends every sample of the TFRecord file `path` to `out` (CtrRecords). A record that is not
// a good sample is an InputError "PATH: record N (from 0): what is wrong, what was expected"
// or, with options.skip_bad, skipped and counted. A defect of the framing (a bad CRC, a
// truncated file) is an InputError whatever skip_bad says: the records after it cannot be
// trusted. std::logic_error when `options` does not fit `out` (start_ctr_records).
CtrReadStats read_ctr_tfrecord(const std::string& path, const CtrReadOptions& options,
                               CtrRecords& out);

// Row `row` of `records` as the layout's Example: label, then all records.fields ids and
// values (the padding too, so that TensorFlow reads every row with
// FixedLenFeature([fields])), lists packed as TensorFlow writes them. `out` is replaced.
void encode_ctr_example(const CtrRecords& records, int64_t row, const CtrReadOptions& keys,
                        std::vector<uint8_t>& out);

// Writes every row of `records` to a TFRecord file (gzip when `gzip`), in order, one
// encode_ctr_example each. Throws RuntimeError when the file cannot be written.
void write_ctr_tfrecord(const CtrRecords& records, const std::string& path, bool gzip = false,
                        const CtrReadOptions& keys = {});

}  // namespace sdp
