// TFRecord files of CTR samples in the SageMaker DeepFM sample's layout (label, ids, values):
// our writer and reader agree with each other and with TensorFlow, every defect is named by
// file and record, and the skip and hash modes work as in the LibSVM reader.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/bytes.hpp"
#include "data/formats/ctr_tfrecord.hpp"
#include "data/formats/libsvm.hpp"
#include "data/formats/tf_example.hpp"
#include "data/formats/tfrecord.hpp"
#include "unit/data/expect_input_error.hpp"
#include "unit/data/temp_dir.hpp"

namespace sdp {
namespace {

using Bytes = std::vector<uint8_t>;
using sdp::testing::expect_input_error;
using sdp::testing::TempDir;

CtrReadOptions options_of(int fields, int64_t table_rows) {
  CtrReadOptions options;
  options.fields = fields;
  options.table_rows = table_rows;
  return options;
}

void expect_same(const CtrRecords& a, const CtrRecords& b) {
  EXPECT_EQ(a.fields, b.fields);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.values, b.values);
}

CtrRecords from_libsvm(const TempDir& dir, const std::string& text, int fields) {
  testing::write_raw(dir.file("in.libsvm"), Bytes(text.begin(), text.end()));
  CtrRecords records;
  read_libsvm(dir.file("in.libsvm"), options_of(fields, int64_t{1} << 40), records);
  return records;
}

// A file of the given serialized Examples.
std::string write_examples(const TempDir& dir, const std::vector<Bytes>& examples) {
  const std::string path = dir.file("examples.tfrecord");
  TfRecordWriter writer(path);
  for (const Bytes& e : examples) writer.write(e);
  writer.close();
  return path;
}

Bytes example_of(float label, const std::vector<int64_t>& ids, const std::vector<float>& values) {
  Bytes out;
  encode_numeric_example({NumericFeature::float_list("label", &label, 1),
                          NumericFeature::int64_list("ids", ids.data(), ids.size()),
                          NumericFeature::float_list("values", values.data(), values.size())},
                         out);
  return out;
}

TEST(CtrTfrecord, LibsvmRoundTripPlainAndGzip) {
  TempDir dir;
  const CtrRecords original =
      from_libsvm(dir, "1 1:0.5 3:2\n-1 2:1\n0 5:1 6:1 1099511627000:-1.5e2\n1 4:3e-3\n1\n", 3);
  ASSERT_EQ(original.size(), 5);
  for (bool gzip : {false, true}) {
    const std::string path = dir.file(gzip ? "out.tfrecord.gz" : "out.tfrecord");
    write_ctr_tfrecord(original, path, gzip);
    EXPECT_EQ(tfrecord_is_gzip(path), gzip);
    CtrRecords back;
    const CtrReadStats stats = read_ctr_tfrecord(path, options_of(3, int64_t{1} << 40), back);
    expect_same(back, original);
    EXPECT_EQ(stats.samples, 5);
    EXPECT_EQ(stats.padded, 0);  // the padding is written: every Example has `fields` ids
    EXPECT_EQ(stats.max_id, 1099511627000);
  }
}

// One Example a sample: label a float_list of one value, ids and values `fields` each, packed.
TEST(CtrTfrecord, ExampleLayout) {
  TempDir dir;
  const CtrRecords records = from_libsvm(dir, "-1 7:0.5\n", 3);
  Bytes example;
  encode_ctr_example(records, 0, CtrReadOptions{}, example);
  const auto features = parse_example_features(example.data(), example.size());
  ASSERT_EQ(features.size(), 3u);
  EXPECT_EQ(features.at("label").kind, FeatureKind::kFloatList);
  EXPECT_EQ(features.at("label").float_values, (std::vector<float>{0}));
  EXPECT_EQ(features.at("ids").kind, FeatureKind::kInt64List);
  EXPECT_EQ(features.at("ids").int64_values, (std::vector<int64_t>{7, 0, 0}));
  EXPECT_EQ(features.at("values").float_values, (std::vector<float>{0.5f, 0, 0}));
  // Packed: the ids list is one length-delimited field "0a 03 07 00 00".
  const Bytes packed_ids = {0x1a, 0x05, 0x0a, 0x03, 0x07, 0x00, 0x00};
  EXPECT_NE(std::search(example.begin(), example.end(), packed_ids.begin(), packed_ids.end()),
            example.end());

  CtrReadOptions keys;
  keys.label_key = "clicked";
  keys.ids_key = "feat_ids";
  keys.values_key = "feat_vals";
  encode_ctr_example(records, 0, keys, example);
  EXPECT_EQ(parse_example_features(example.data(), example.size()).count("feat_ids"), 1u);
  CtrSample sample;
  CtrExampleDecoder(keys).decode(example.data(), example.size(), sample);
  EXPECT_EQ(sample.ids, (std::vector<int64_t>{7, 0, 0}));
  EXPECT_THROW(encode_ctr_example(records, 1, keys, example), std::out_of_range);
}

// A file TensorFlow 2.21 wrote, of the sample's converter's Examples:
//   import tensorflow as tf
//   def ex(label, ids, values):
//       return tf.train.Example(features=tf.train.Features(feature={
//           "label": tf.train.Feature(float_list=tf.train.FloatList(value=[label])),
//           "ids": tf.train.Feature(int64_list=tf.train.Int64List(value=ids)),
//           "values":
//           tf.train.Feature(float_list=tf.train.FloatList(value=values))})).SerializeToString()
//   with tf.io.TFRecordWriter("tf.tfrecord") as w:
//       for r in [(1.0, [3, 70000, 0], [0.5, 1.0, 0.0]), (0.0, [1, 2, 300], [1.0, -2.25, 3.0])]:
//           w.write(ex(*r))
// (TensorFlow writes the map's entries values, ids, label: any order reads the same.)
const char* const kTensorFlowFile =
    "4300000000000000b18525a00a410a1a0a0676616c7565731210120e0a0c0000"
    "003f0000803f000000000a100a0369647312091a070a0503f0a204000a110a05"
    "6c6162656c120812060a040000803fd880a5db420000000000000079f36eaa0a"
    "400a1a0a0676616c7565731210120e0a0c0000803f000010c0000040400a0f0a"
    "0369647312081a060a040102ac020a110a056c6162656c120812060a04000000"
    "005fb8949f";

Bytes from_hex(const std::string& hex) {
  Bytes out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

TEST(CtrTfrecord, ReadsAFileTensorFlowWrote) {
  TempDir dir;
  testing::write_raw(dir.file("tf.tfrecord"), from_hex(kTensorFlowFile));
  CtrRecords r;
  const CtrReadStats stats = read_ctr_tfrecord(dir.file("tf.tfrecord"), options_of(4, 100000), r);
  ASSERT_EQ(r.size(), 2);
  EXPECT_EQ(r.labels, (std::vector<float>{1, 0}));
  EXPECT_EQ(r.ids, (std::vector<int64_t>{3, 70000, 0, 0, 1, 2, 300, 0}));
  EXPECT_EQ(r.values, (std::vector<float>{0.5f, 1, 0, 0, 1, -2.25f, 3, 0}));
  EXPECT_EQ(stats.padded, 2);
  EXPECT_EQ(stats.max_id, 70000);

  // Our Example of the first row holds what TensorFlow's does, entry for entry.
  Bytes ours;
  encode_ctr_example(r, 0, CtrReadOptions{}, ours);
  const Bytes file = from_hex(kTensorFlowFile);
  const Bytes theirs(file.begin() + 12, file.begin() + 12 + 0x43);  // record 0's payload
  const auto theirs_features = parse_example_features(theirs.data(), theirs.size());
  const auto ours_features = parse_example_features(ours.data(), ours.size());
  EXPECT_EQ(ours_features.at("label").float_values, theirs_features.at("label").float_values);
  std::vector<int64_t> padded_ids = theirs_features.at("ids").int64_values;
  padded_ids.push_back(0);
  EXPECT_EQ(ours_features.at("ids").int64_values, padded_ids);
}

// Protobuf lets a writer leave lists unpacked; some label columns are int64; `values` may be
// left out of one-hot data.
TEST(CtrTfrecord, UnpackedListsInt64LabelsAndAbsentValues) {
  auto put_varint_field = [](Bytes& out, uint32_t number, uint64_t v) {
    put_varint(out, uint64_t{number} << 3);
    put_varint(out, v);
  };
  auto put_message = [](Bytes& out, uint32_t number, const Bytes& body) {
    put_varint(out, uint64_t{number} << 3 | 2);
    put_varint(out, body.size());
    out.insert(out.end(), body.begin(), body.end());
  };
  auto entry = [&](const std::string& key, uint32_t list_kind, const Bytes& list) {
    Bytes feature, e;
    put_message(feature, list_kind, list);
    put_message(e, 1, Bytes(key.begin(), key.end()));
    put_message(e, 2, feature);
    return e;
  };
  Bytes ids_list, label_list, values_list;
  for (int64_t id : {4, 9}) put_varint_field(ids_list, 1, static_cast<uint64_t>(id));
  put_varint_field(label_list, 1, static_cast<uint64_t>(int64_t{-1}));  // int64 label -1
  for (float v : {0.25f, 2.0f}) {  // unpacked floats: fixed32 fields
    put_varint(values_list, uint64_t{1} << 3 | 5);
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    for (int b = 0; b < 4; ++b) values_list.push_back(static_cast<uint8_t>(bits >> (8 * b)));
  }
  Bytes features, unpacked, no_values;
  put_message(features, 1, entry("ids", 3, ids_list));
  put_message(features, 1, entry("label", 3, label_list));
  Bytes without_values = features;
  put_message(features, 1, entry("values", 2, values_list));
  put_message(unpacked, 1, features);
  put_message(no_values, 1, without_values);

  TempDir dir;
  const std::string path = write_examples(dir, {unpacked, no_values, example_of(1, {}, {})});
  CtrRecords r;
  const CtrReadStats stats = read_ctr_tfrecord(path, options_of(2, 10), r);
  EXPECT_EQ(r.labels, (std::vector<float>{0, 0, 1}));
  EXPECT_EQ(r.ids, (std::vector<int64_t>{4, 9, 4, 9, 0, 0}));
  EXPECT_EQ(r.values, (std::vector<float>{0.25f, 2, 1, 1, 0, 0}));  // absent values: all 1
  EXPECT_EQ(stats.padded, 1);
}

TEST(CtrTfrecord, ErrorsNameFileAndRecord) {
  TempDir dir;
  const Bytes good = example_of(1, {1, 2}, {1, 1});
  float label = 1;
  const std::vector<int64_t> ids{1, 2};
  const std::vector<float> one_value{1};
  auto without = [&](const char* missing) {
    Bytes out;
    const std::string m = missing;
    if (m == "ids")
      encode_numeric_example({NumericFeature::float_list("label", &label, 1),
                              NumericFeature::float_list("values", one_value.data(), 1)},
                             out);
    else
      encode_numeric_example({NumericFeature::int64_list("ids", ids.data(), 2),
                              NumericFeature::float_list("other", &label, 1)},
                             out);
    return out;
  };
  Bytes float_ids, two_labels;
  const std::vector<float> float_list{1, 2};
  encode_numeric_example({NumericFeature::float_list("label", &label, 1),
                          NumericFeature::float_list("ids", float_list.data(), 2)},
                         float_ids);
  encode_numeric_example({NumericFeature::float_list("label", float_list.data(), 2),
                          NumericFeature::int64_list("ids", ids.data(), 2)},
                         two_labels);
  struct Case {
    Bytes example;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {without("ids"), {"no feature 'ids' (the ids); it has 'label', 'values'"}},
      {without("label"), {"no feature 'label' (the label); it has 'ids', 'other'"}},
      {example_of(1, {1, 2}, {1}),
       {"'values' (the values) holds 1 values, 'ids' holds 2 ids; expected one value per id"}},
      {example_of(1, {1, 2, 3, 4}, {1, 1, 1, 1}),
       {"field 3 (ids[3]): 'ids' holds 4 ids, more than model.fields = 3",
        "model.fields to at least 4"}},
      {example_of(1, {1, -2}, {1, 1}), {"field 1 (ids[1]): id -2 is negative"}},
      {example_of(1, {1, 10}, {1, 1}),
       {"field 1 (ids[1]): id 10 is not below model.table_rows = 10", "data.id_overflow: hash"}},
      {example_of(0.5f, {1}, {1}),
       {"feature 'label' (the label) is 0.5, expected 0 or 1 (or -1 / +1)"}},
      {two_labels, {"feature 'label' (the label) holds 2 values, expected 1"}},
      {float_ids, {"feature 'ids' (the ids) is a float_list, expected an int64_list"}},
      {example_of(1, {1}, {std::numeric_limits<float>::infinity()}),
       {"field 0 (ids[0]): value inf of id 1 is not finite"}},
      {Bytes{0x0a, 0x05, 0x01}, {"bad tf.train.Example"}},
  };
  for (const Case& c : cases) {
    const std::string path = write_examples(dir, {good, good, c.example, good});
    CtrRecords r;
    const std::string message = expect_input_error(
        [&] { read_ctr_tfrecord(path, options_of(3, 10), r); }, {path + ": record 2 (from 0): "});
    for (const std::string& part : c.parts)
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  }
}

TEST(CtrTfrecord, SkipModeSkipsBadRecordsButNotBadFraming) {
  TempDir dir;
  CtrReadOptions options = options_of(2, 10);
  options.skip_bad = true;
  const std::string path =
      write_examples(dir, {example_of(1, {1}, {1}), example_of(1, {1, 2, 3}, {1, 1, 1}),
                           example_of(0, {11}, {1}), example_of(-1, {3, 4}, {2, 2})});
  CtrRecords r;
  const CtrReadStats stats = read_ctr_tfrecord(path, options, r);
  EXPECT_EQ(r.ids, (std::vector<int64_t>{1, 0, 3, 4}));
  EXPECT_EQ(r.labels, (std::vector<float>{1, 0}));
  EXPECT_EQ(stats.samples, 2);
  EXPECT_EQ(stats.skipped, 2);
  EXPECT_EQ(stats.first_skipped.find(path + ": record 1 (from 0): field 2 (ids[2])"), 0u)
      << stats.first_skipped;

  // A corrupt payload checksum: the framing cannot be trusted, skip_bad or not.
  Bytes file = testing::read_raw(path);
  file[12 + 3] ^= 0xff;
  testing::write_raw(path, file);
  CtrRecords again;
  expect_input_error([&] { read_ctr_tfrecord(path, options, again); },
                     {path, "record 0 (from 0)", "checksum"});
}

TEST(CtrTfrecord, HashMode) {
  TempDir dir;
  CtrReadOptions options = options_of(2, 50);
  options.id_overflow = IdOverflow::kHash;
  const std::string path =
      write_examples(dir, {example_of(1, {49, 50}, {1, 1}), example_of(0, {700}, {1})});
  CtrRecords r;
  const CtrReadStats stats = read_ctr_tfrecord(path, options, r);
  EXPECT_EQ(r.ids, (std::vector<int64_t>{49, hash_id_into(50, 50), hash_id_into(700, 50), 0}));
  EXPECT_EQ(stats.hashed_ids, 2);
  EXPECT_EQ(stats.max_id, 700);
}

// TensorFlow itself reads our file as the sample's input_fn does (FixedLenFeature([fields])),
// plain and gzip, and writes the same rows into a file we read back. Skipped when the
// TensorFlow environment (SDP_TF_PYTHON, default /opt/sdp-bench-venv/bin/python) is absent.
TEST(CtrTfrecord, TensorFlowReadsOursAndWeReadTheirs) {
  const char* env = std::getenv("SDP_TF_PYTHON");
  const std::string python = env && *env ? env : "/opt/sdp-bench-venv/bin/python";
  if (::access(python.c_str(), X_OK) != 0)
    GTEST_SKIP() << python << " not found: set SDP_TF_PYTHON to a Python with TensorFlow";
  TempDir dir;
  const CtrRecords records =
      from_libsvm(dir, "1 1:0.5 3:2\n-1 2:1\n0 5:1 6:1 123456789:-1.5e2\n", 3);
  write_ctr_tfrecord(records, dir.file("ours.tfrecord"));
  write_ctr_tfrecord(records, dir.file("ours.tfrecord.gz"), /*gzip=*/true);
  const std::string script = R"(
import sys
try:
    import tensorflow as tf
except ImportError:
    sys.exit(77)
d, fields = sys.argv[1], 3
spec = {"label": tf.io.FixedLenFeature([], tf.float32),
        "ids": tf.io.FixedLenFeature([fields], tf.int64),
        "values": tf.io.FixedLenFeature([fields], tf.float32)}
rows = []
for name, compression in (("ours.tfrecord", ""), ("ours.tfrecord.gz", "GZIP")):
    rows = []
    for record in tf.data.TFRecordDataset(d + "/" + name, compression_type=compression):
        e = tf.io.parse_single_example(record, spec)
        rows.append((float(e["label"]), [int(i) for i in e["ids"]], [float(v) for v in e["values"]]))
    with open(d + "/" + name + ".txt", "w") as out:
        for label, ids, values in rows:
            out.write(" ".join(str(x) for x in [label] + ids + values) + "\n")
with tf.io.TFRecordWriter(d + "/theirs.tfrecord", options="GZIP") as w:
    for label, ids, values in rows:
        w.write(tf.train.Example(features=tf.train.Features(feature={
            "label": tf.train.Feature(float_list=tf.train.FloatList(value=[label])),
            "ids": tf.train.Feature(int64_list=tf.train.Int64List(value=ids)),
            "values": tf.train.Feature(float_list=tf.train.FloatList(value=values))})).SerializeToString())
)";
  std::ofstream(dir.file("check.py")) << script;
  const std::string command = "TF_CPP_MIN_LOG_LEVEL=3 " + python + " " + dir.file("check.py") +
                              " " + dir.str() + " >" + dir.file("log") + " 2>&1";
  const int status = std::system(command.c_str());
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
    GTEST_SKIP() << python << " has no TensorFlow";
  std::stringstream log;
  log << std::ifstream(dir.file("log")).rdbuf();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << log.str();

  for (const char* name : {"ours.tfrecord.txt", "ours.tfrecord.gz.txt"}) {
    std::ifstream in(dir.file(name));
    for (int64_t row = 0; row < records.size(); ++row) {
      double label = 0;
      ASSERT_TRUE(in >> label) << name;
      EXPECT_EQ(label, records.labels[static_cast<std::size_t>(row)]);
      for (int k = 0; k < 3; ++k) {
        int64_t id = 0;
        in >> id;
        EXPECT_EQ(id, records.ids[static_cast<std::size_t>(row * 3 + k)]) << name << " row " << row;
      }
      for (int k = 0; k < 3; ++k) {
        double value = 0;
        in >> value;
        EXPECT_EQ(value, records.values[static_cast<std::size_t>(row * 3 + k)])
            << name << " row " << row;
      }
    }
  }
  CtrRecords theirs;
  read_ctr_tfrecord(dir.file("theirs.tfrecord"), options_of(3, int64_t{1} << 40), theirs);
  expect_same(theirs, records);
}

}  // namespace
}  // namespace sdp
