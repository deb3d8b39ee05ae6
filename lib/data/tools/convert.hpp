// `sdp-train data convert`: an in-memory data set (MNIST, CIFAR-10, or the synthetic one)
// written as JPEGs in the layouts users bring: TFRecord shards of tf.train.Example (with their
// index files), a torchvision image folder, or WebDataset tar shards. Tests and benchmarks get
// real JPEG data sets this way, with no download; labels keep their numbers in every layout.
// And a LibSVM file of CTR samples written as TFRecord shards in the SageMaker DeepFM sample's
// layout (data/formats/ctr_tfrecord.hpp).
#pragma once

#include <cstdint>
#include <string>

#include "data/sets/dataset.hpp"

namespace sdp {

struct ConvertOptions {
  std::string format = "tfrecord";  // tfrecord, image-folder, tar-shards
  std::string output;               // the directory written (created; files in it replaced)
  std::string prefix = "train";     // shard file names: <prefix>-00000-of-00004, <prefix>-00000.tar
  int shards = 1;                   // tfrecord, tar-shards: samples go round-robin over them
  int quality = 95;                 // JPEG quality
  bool full_chroma = false;         // colour at full resolution (4:4:4) instead of 4:2:0
  int resize = 0;                   // > 0: images scaled (bilinear) so the shorter side is this
  int64_t limit = 0;                // > 0: the first `limit` samples only
  int fields = 0;                   // libsvm: ids per Example (0: the longest row of the input)
};

struct ConvertResult {
  int64_t samples = 0;
  int64_t bytes = 0;  // encoded image bytes written (libsvm: serialized Example bytes)
  int files = 0;
  int fields = 0;     // libsvm: ids per Example
  int64_t padded = 0; // libsvm: samples with fewer pairs than fields
};

// Throws InputError for a bad option, RuntimeError when a file cannot be written.
ConvertResult convert_dataset(const Dataset& dataset, const ConvertOptions& options);

// The LibSVM file `input` (plain or gzip) as TFRecord shards of the SageMaker DeepFM sample's
// layout: label, then options.fields ids and values (0: the longest row of the input, found by
// a first pass), short rows padded with id 0, value 0; sample i in shard i % shards, ids as
// they are (no table to fit). Only --format tfrecord. Throws InputError for a bad option or a
// bad line (naming file and line), RuntimeError when a file cannot be written.
ConvertResult convert_libsvm(const std::string& input, const ConvertOptions& options);

}  // namespace sdp
