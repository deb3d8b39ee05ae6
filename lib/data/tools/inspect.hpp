// `sdp-train data inspect PATH`: what a data set holds and whether every record of it reads,
// before a job spends an allocation finding out. PATH is a file or a directory of shards.
// Formats: tfrecord (tf.train.Example records with an encoded image and an int64 label) and
// tar-shards (WebDataset: members grouped by key, the label in a .cls member); auto picks by
// name (.tar, .tar.gz, .tgz) and otherwise by the TFRecord framing of the first 12 bytes.
// Every record is read and checked (CRCs, the Example's keys); the first defect is reported
// with its file, record and message, and reading stops there. An image folder (torchvision's
// ImageFolder layout: a directory of class folders; auto picks it for a directory holding
// folders and no data file) is listed as training lists it: each class with its label and
// image count, as ImageFolder.classes and class_to_idx say.
// CTR samples (libsvm: LibSVM text, plain or gzip; ctr-tfrecord: TFRecord Examples of label,
// ids, values, data/formats/ctr_tfrecord.hpp; auto picks libsvm for text that parses as LibSVM
// and ctr-tfrecord for a TFRecord file whose first Example has the ids feature) are read the
// same way, and summed up for choosing model.fields and model.table_rows: the longest row,
// the rows shorter than that (padded), the id range, the distinct ids, how much of the data the
// ten most frequent ids take, and the share of positive labels.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data/formats/record_fields.hpp"

namespace sdp {

struct InspectOptions : RecordFields {
  std::string format = "auto";  // auto, tfrecord, tar-shards, image-folder, libsvm, ctr-tfrecord
  int64_t max_records = 0;      // 0: every record
  // ctr-tfrecord: the Examples' ids and values; the label is label_key, or "label" while
  // label_key keeps the image default.
  std::string ids_key = "ids";
  std::string values_key = "values";
};

// What the CTR formats add to an inspection. Ids are counted before any table's hashing;
// trailing pairs of id 0, value 0 are padding, not id occurrences (a file written by
// `data convert` holds its padding).
struct CtrInspection {
  int64_t fields = 0;          // the longest row: the least model.fields that reads it all
  int64_t padded = 0;          // rows shorter than `fields` (or padded to it)
  int64_t min_id = -1, max_id = -1;
  int64_t distinct_ids = 0;
  int64_t id_occurrences = 0;  // pairs in all rows
  double top10_share = 0;      // the ten most frequent ids' share of id_occurrences
};

struct DataInspection {
  std::string format;
  std::vector<std::string> files;
  int64_t records = 0;
  std::map<int64_t, int64_t> labels;       // label -> records
  std::map<std::string, int64_t> members;  // tar-shards: extension -> samples that have it
  std::vector<std::string> classes;        // image-folder: the class folders, label = index
  int64_t image_bytes_min = 0, image_bytes_max = 0;
  double image_bytes_mean = 0;
  CtrInspection ctr;  // libsvm, ctr-tfrecord; labels then counts 0 and 1
  bool complete = true;  // false when max_records stopped the reading early
  // The first defect: bad_message empty when every record read; it names the file and record.
  std::string bad_file;
  int64_t bad_record = -1;
  std::string bad_message;
};

// Throws InputError when PATH does not exist, holds no data file, or the format is unknown;
// a defective record does not throw: it is reported in the result.
DataInspection inspect_data(const std::string& path, const InspectOptions& options);
// The report, one fact a line.
std::string format_inspection(const DataInspection& inspection);

}  // namespace sdp
