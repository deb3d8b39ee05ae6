// Where a record keeps its image and its label, whatever the framing: the Example's features
// (TFRecord), the label member's extension (tar shards), and the offset taken off every label
// (ImageNet's TFRecords count from 1). The options of every reader of records share it.
#pragma once

#include <cstdint>
#include <string>

namespace sdp {

struct RecordFields {
  std::string image_key = "image/encoded";      // tfrecord: the Example's encoded image
  std::string label_key = "image/class/label";  // tfrecord: the Example's int64 label
  std::string label_extension = "cls";          // tar-shards: the member holding the label as text
  int64_t label_offset = 0;                     // subtracted from every label
};

}  // namespace sdp
