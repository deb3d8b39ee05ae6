// Encoded image sources: where an encoded image set's sample i (its JPEG or PNG bytes and its
// label) is read from, by index: TFRecord files read by offset, or an image folder
// (encoded_images.hpp decodes them).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/formats/record_fields.hpp"

namespace sdp {

// Where sample i's encoded image and label come from.
class EncodedSource {
 public:
  virtual ~EncodedSource() = default;
  virtual std::string name() const = 0;
  virtual int64_t count() const = 0;
  // Classes the source itself knows (an image folder's class directories); 0 when it does
  // not (records carry labels only): then the job's model.num_classes bounds them.
  virtual int num_classes() const { return 0; }
  // Their names by label, when the source has them (an image folder's class folders).
  virtual std::vector<std::string> class_names() const { return {}; }
  // Sample i's encoded bytes (into `bytes`, reused) and label. Called by several workers at
  // once. Throws InputError naming the file and record.
  virtual int64_t read(int64_t i, std::vector<uint8_t>& bytes) const = 0;
  // Names sample i in an error ("FILE record R (from 0)", or the image's path).
  virtual std::string where(int64_t i) const = 0;
};

struct TfRecordSourceOptions : RecordFields {};

// The TFRecord files under `path` (itself when a file; a directory's files sorted by name,
// `.idx` and hidden files skipped), every record a tf.train.Example. Each file is indexed
// (tfrecord.hpp's <file>.idx, made on first use) and read by offset. Throws InputError for a
// missing path, a directory with no file, a gzip file (no offsets: decompress it) or a
// defect the index scan meets.
std::unique_ptr<EncodedSource> open_tfrecord_source(const std::string& path, const TfRecordSourceOptions& options);

// A torchvision ImageFolder tree, root/<class>/.../<image> (data/image_folder.hpp): labels
// are the sorted class folders' indices, as in PyTorch. Throws what list_image_folder throws.
std::unique_ptr<EncodedSource> open_image_folder_source(const std::string& root);

}  // namespace sdp
