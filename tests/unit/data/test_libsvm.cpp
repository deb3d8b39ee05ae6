// LibSVM files of CTR samples: labels, padding, plain and gzip, every defect named by file,
// line and field, the skip and hash modes, and the real a9a set when the shared data is there.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/formats/ctr_sample.hpp"
#include "data/formats/libsvm.hpp"
#include "unit/data/expect_input_error.hpp"
#include "unit/data/temp_dir.hpp"

namespace sdp {
namespace {

using sdp::testing::expect_input_error;
using sdp::testing::TempDir;

std::vector<uint8_t> bytes(const std::string& s) {
  return {s.begin(), s.end()};
}

CtrReadOptions options_of(int fields, int64_t table_rows) {
  CtrReadOptions options;
  options.fields = fields;
  options.table_rows = table_rows;
  return options;
}

// Writes `text` to dir/name and reads it with `options`.
CtrRecords read_text(const TempDir& dir, const std::string& text, const CtrReadOptions& options,
                     CtrReadStats* stats = nullptr, const std::string& name = "data.libsvm") {
  testing::write_raw(dir.file(name), bytes(text));
  CtrRecords records;
  const CtrReadStats s = read_libsvm(dir.file(name), options, records);
  if (stats != nullptr) *stats = s;
  return records;
}

const char* const kThreeFields =
    "+1 1:0.5 3:2\n"
    "-1 2:1\n"
    "0 5:1 6:1 7:-1.5e2\n"
    "1.0 4:3\n";

void expect_three_fields(const CtrRecords& r) {
  EXPECT_EQ(r.fields, 3);
  ASSERT_EQ(r.size(), 4);
  EXPECT_EQ(r.labels, (std::vector<float>{1, 0, 0, 1}));
  // Short rows padded with id 0, value 0.
  EXPECT_EQ(r.ids, (std::vector<int64_t>{1, 3, 0, 2, 0, 0, 5, 6, 7, 4, 0, 0}));
  EXPECT_EQ(r.values, (std::vector<float>{0.5f, 2, 0, 1, 0, 0, 1, 1, -150, 3, 0, 0}));
}

TEST(Libsvm, PlainFileLabelsAndPadding) {
  TempDir dir;
  CtrReadStats stats;
  const CtrRecords r = read_text(dir, kThreeFields, options_of(3, 10), &stats);
  expect_three_fields(r);
  EXPECT_EQ(stats.samples, 4);
  EXPECT_EQ(stats.padded, 3);
  EXPECT_EQ(stats.max_id, 7);
  EXPECT_EQ(stats.skipped, 0);
  EXPECT_EQ(stats.hashed_ids, 0);
  EXPECT_EQ(stats.first_skipped, "");
}

TEST(Libsvm, GzipFileReadsTheSame) {
  TempDir dir;
  testing::write_gz(dir.file("data.libsvm.gz"), bytes(kThreeFields));
  CtrRecords r;
  const CtrReadStats stats = read_libsvm(dir.file("data.libsvm.gz"), options_of(3, 10), r);
  expect_three_fields(r);
  EXPECT_EQ(stats.padded, 3);
}

TEST(Libsvm, CrlfBlankLinesCommentsTabsAndNoFinalNewline) {
  TempDir dir;
  const std::string text =
      "# a comment line\r\n"
      "\r\n"
      "+1\t1:0.5  3:2 \r\n"
      "   \n"
      "-1 2:1 # why this row is here\r\n"
      "0 5:1 6:1 7:-1.5e2\n"
      "\n"
      "1.0 4:3";
  expect_three_fields(read_text(dir, text, options_of(3, 10)));
}

TEST(Libsvm, LabelForms) {
  CtrSample s;
  for (const char* one : {"1", "+1", "1.0", "+1.0", "1e0"}) {
    ASSERT_TRUE(parse_libsvm_line(std::string(one) + " 1:1", s)) << one;
    EXPECT_EQ(s.label, 1.0f) << one;
  }
  for (const char* zero : {"0", "-1", "0.0", "-1.0", "-0", "+0"}) {
    ASSERT_TRUE(parse_libsvm_line(std::string(zero) + " 1:1", s)) << zero;
    EXPECT_EQ(s.label, 0.0f) << zero;
  }
  for (const char* bad : {"2", "0.5", "+-1", "--1", "yes", "1:1", "nan", "+"})
    expect_input_error([&] { parse_libsvm_line(std::string(bad) + " 1:1", s); },
                       {"label", "expected 0 or 1 (or -1 / +1)"});
}

TEST(Libsvm, LineLevelParse) {
  CtrSample s;
  EXPECT_FALSE(parse_libsvm_line("", s));
  EXPECT_FALSE(parse_libsvm_line(" \t\r", s));
  EXPECT_FALSE(parse_libsvm_line("# 1 2:3", s));
  ASSERT_TRUE(parse_libsvm_line("1", s));  // a sample with no pairs: all padding
  EXPECT_TRUE(s.ids.empty());
  ASSERT_TRUE(parse_libsvm_line("-1 7:+2 9:1e-50 8:-0.25 7:1", s));  // repeated ids are kept
  EXPECT_EQ(s.ids, (std::vector<int64_t>{7, 9, 8, 7}));
  EXPECT_EQ(s.values, (std::vector<float>{2, 0, -0.25f, 1}));  // under the float range: 0
}

// Each defect, with the file and line and what was expected.
TEST(Libsvm, ErrorsNameFileLineAndField) {
  TempDir dir;
  const std::string path = dir.file("data.libsvm");
  struct Case {
    std::string bad_line;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {"1 3:1 5", {"field 1 (the 2nd pair '5')", "no ':' between id and value; expected id:value"}},
      {"1 3:1 x:1", {"field 1 (the 2nd pair 'x:1')", "id 'x' is not a whole number", "from 0"}},
      {"1 :1", {"field 0 (the 1st pair ':1')", "id '' is not a whole number"}},
      {"1 99999999999999999999:1", {"does not fit in 64 bits"}},
      {"1 3:1 4:abc",
       {"field 1 (the 2nd pair '4:abc')", "value 'abc' is not a number", "such as 1"}},
      {"1 3:1 4:", {"value '' is not a number"}},
      {"1 3:1 4:1e50", {"value '1e50' is beyond the float range"}},
      {"1 3:1 4:1:2", {"value '1:2' is not a number"}},
      {"1 3:1 -4:1", {"field 1 (the 2nd pair)", "id -4 is negative", "from 0"}},
      {"1 3:1 4:nan", {"field 1 (the 2nd pair)", "value nan of id 4 is not finite"}},
      {"1 3:1 4:-inf", {"value -inf of id 4 is not finite"}},
      {"1 3:1 10:1",
       {"field 1 (the 2nd pair)", "id 10 is not below model.table_rows = 10",
        "data.id_overflow: hash"}},
      {"1 1:1 2:1 3:1 4:1",
       {"field 3 (the 4th pair)", "the line has 4 pairs, more than model.fields = 3",
        "set model.fields to at least 4"}},
      {"2 1:1", {"label '2': expected 0 or 1 (or -1 / +1)"}},
  };
  for (const Case& c : cases) {
    testing::write_raw(path, bytes("1 1:1\n\n" + c.bad_line + "\n0 2:1\n"));
    CtrRecords r;
    const std::string message =
        expect_input_error([&] { read_libsvm(path, options_of(3, 10), r); }, {path + ":3: "});
    for (const std::string& part : c.parts)
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  }
}

TEST(Libsvm, SkipModeSkipsAndCountsBadLines) {
  TempDir dir;
  CtrReadOptions options = options_of(2, 10);
  options.skip_bad = true;
  CtrReadStats stats;
  const CtrRecords r =
      read_text(dir, "1 1:1\n1 2:x\n0 3:1 4:2\n1 1:1 2:1 3:1\n1 11:1\n-1 5:2\n", options, &stats);
  ASSERT_EQ(r.size(), 3);  // nothing of the bad lines kept
  EXPECT_EQ(r.ids, (std::vector<int64_t>{1, 0, 3, 4, 5, 0}));
  EXPECT_EQ(r.labels, (std::vector<float>{1, 0, 0}));
  EXPECT_EQ(stats.samples, 3);
  EXPECT_EQ(stats.skipped, 3);
  EXPECT_EQ(stats.padded, 2);
  EXPECT_EQ(stats.max_id, 5);  // the skipped line's id 11 is not counted
  EXPECT_EQ(stats.first_skipped.find(dir.file("data.libsvm") + ":2: field 0 (the 1st pair '2:x')"),
            0u)
      << stats.first_skipped;
}

TEST(Libsvm, HashModeMapsLargeIdsIntoTheTable) {
  TempDir dir;
  CtrReadOptions options = options_of(3, 100);
  options.id_overflow = IdOverflow::kHash;
  CtrReadStats stats;
  const CtrRecords r = read_text(dir, "1 5:1 100:1 123456789012:0.5\n0 99:1\n", options, &stats);
  EXPECT_EQ(r.ids, (std::vector<int64_t>{5, hash_id_into(100, 100), hash_id_into(123456789012, 100),
                                         99, 0, 0}));
  for (int64_t id : r.ids) EXPECT_LT(id, 100);
  EXPECT_EQ(stats.hashed_ids, 2);
  EXPECT_EQ(stats.max_id, 123456789012);
}

TEST(Libsvm, AppendsToRecordsOfTheSameFieldsOnly) {
  TempDir dir;
  testing::write_raw(dir.file("a"), bytes("1 1:1\n"));
  testing::write_raw(dir.file("b"), bytes("0 2:1\n"));
  testing::write_raw(dir.file("empty"), {});
  CtrRecords r;
  read_libsvm(dir.file("a"), options_of(2, 10), r);
  read_libsvm(dir.file("b"), options_of(2, 10), r);
  EXPECT_EQ(r.ids, (std::vector<int64_t>{1, 0, 2, 0}));
  EXPECT_THROW(read_libsvm(dir.file("b"), options_of(3, 10), r), std::logic_error);
  CtrRecords fresh;
  EXPECT_EQ(read_libsvm(dir.file("empty"), options_of(4, 10), fresh).samples, 0);
  EXPECT_EQ(fresh.fields, 4);  // set even by an empty file
  EXPECT_THROW(read_libsvm(dir.file("a"), options_of(0, 10), fresh), std::logic_error);
}

TEST(Libsvm, MissingFileIsAnInputError) {
  TempDir dir;
  CtrRecords r;
  expect_input_error([&] { read_libsvm(dir.file("absent.libsvm"), options_of(2, 10), r); },
                     {"absent.libsvm"});
}

// A line longer than the reader's 1 MiB chunk, and many lines across chunk boundaries.
TEST(Libsvm, LongLinesAndChunkBoundaries) {
  TempDir dir;
  const int pairs = 150000;  // about 1.7 MB on one line
  std::string text = "1";
  for (int i = 0; i < pairs; ++i) text += " " + std::to_string(i) + ":0.25";
  text += "\n0 7:2\n";
  CtrReadStats stats;
  CtrRecords r = read_text(dir, text, options_of(pairs, pairs), &stats);
  ASSERT_EQ(r.size(), 2);
  EXPECT_EQ(r.ids[pairs - 1], pairs - 1);
  EXPECT_EQ(r.values[pairs - 1], 0.25f);
  EXPECT_EQ(r.ids[pairs], 7);
  EXPECT_EQ(stats.padded, 1);
  EXPECT_EQ(longest_libsvm_row(dir.file("data.libsvm")), pairs);

  std::string short_lines;  // about 2.6 MB: lines cut by the chunk ends
  for (int i = 0; i < 200000; ++i)
    short_lines += (i % 3 ? "0 " : "+1 ") + std::to_string(i) + ":" + std::to_string(i % 7) + "\n";
  r = read_text(dir, short_lines, options_of(1, 200000), &stats);
  ASSERT_EQ(r.size(), 200000);
  for (int i = 0; i < 200000; ++i) {
    ASSERT_EQ(r.ids[static_cast<std::size_t>(i)], i);
    ASSERT_EQ(r.values[static_cast<std::size_t>(i)], static_cast<float>(i % 7));
    ASSERT_EQ(r.labels[static_cast<std::size_t>(i)], i % 3 ? 0.0f : 1.0f);
  }
}

// A file with no line end in 64 MiB is not text: the reader stops there instead of holding it all.
TEST(Libsvm, ALineOver64MiBIsAnError) {
  TempDir dir;
  const std::string path = dir.file("one-line.gz");
  testing::write_gz(path, bytes("1" + std::string(65 << 20, ' ')));  // 64 KiB of gzip
  CtrRecords r;
  expect_input_error([&] { read_libsvm(path, options_of(2, 10), r); },
                     {path + ":1: a line longer than 64 MiB"});
}

TEST(Libsvm, LongestRow) {
  TempDir dir;
  testing::write_raw(dir.file("a"), bytes("1 1:1 2:1\n0 1:1 2:1 3:1 # 4:1\n1\n"));
  EXPECT_EQ(longest_libsvm_row(dir.file("a")), 3);
  testing::write_raw(dir.file("labels"), bytes("1\n0\n"));
  EXPECT_EQ(longest_libsvm_row(dir.file("labels")), 0);
  testing::write_raw(dir.file("bad"), bytes("1 1:1\n1 1:1 x\n"));
  expect_input_error([&] { longest_libsvm_row(dir.file("bad")); },
                     {dir.file("bad") + ":2: field 1"});
}

// The real a9a set (LIBSVM's Adult: 123 binary features, at most 14 a row, labels -1 / +1).
TEST(Libsvm, RealA9aData) {
  const std::string path = testing::data_dir() + "/a9a/a9a";
  if (!std::filesystem::exists(path))
    GTEST_SKIP() << "a9a not found at " << path << " (set SDP_DATA_DIR to the shared data)";
  EXPECT_EQ(longest_libsvm_row(path), 14);
  CtrRecords r;
  const auto start = std::chrono::steady_clock::now();
  const CtrReadStats stats = read_libsvm(path, options_of(14, 124), r);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("a9a: %lld samples read in %.1f ms\n", static_cast<long long>(r.size()), ms);
  ASSERT_EQ(r.size(), 32561);
  EXPECT_EQ(stats.samples, 32561);
  EXPECT_EQ(stats.padded, 32561 - 30162);  // all but the rows of 14 pairs
  EXPECT_EQ(stats.max_id, 123);
  double ones = 0;
  for (float label : r.labels) ones += label;
  EXPECT_NEAR(ones / static_cast<double>(r.size()), 0.2408, 0.001);  // 7,841 of +1
  int64_t min_id = INT64_MAX;
  for (std::size_t i = 0; i < r.ids.size(); ++i)
    if (r.values[i] != 0) min_id = std::min(min_id, r.ids[i]);
  EXPECT_EQ(min_id, 1);
}

}  // namespace
}  // namespace sdp
