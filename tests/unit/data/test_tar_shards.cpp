#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/formats/tar_shards.hpp"
#include "expect_input_error.hpp"
#include "temp_dir.hpp"

namespace sdp {
namespace {

using Bytes = std::vector<uint8_t>;
using testing::expect_input_error;
using testing::TempDir;
namespace fs = std::filesystem;

Bytes text(const std::string& s) {
  return Bytes(s.begin(), s.end());
}

Bytes pattern(std::size_t n, int seed) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>((i * 13 + seed) % 251);
  return b;
}

std::vector<TarSample> read_samples(const std::string& path) {
  TarShardReader reader(path);
  std::vector<TarSample> samples;
  TarSample sample;
  while (reader.next(sample)) samples.push_back(sample);
  EXPECT_FALSE(reader.next(sample));
  EXPECT_TRUE(sample.files.empty());
  return samples;
}

// Rewrites the checksum of the header at `offset` after a test edited it (independently of
// the reader: the sum of the 512 bytes with the checksum field as 8 spaces, 6 octal digits).
void fix_checksum(Bytes& tar, std::size_t offset) {
  std::fill(tar.begin() + offset + 148, tar.begin() + offset + 156, ' ');
  unsigned sum = 0;
  for (std::size_t i = 0; i < 512; ++i) sum += tar[offset + i];
  char digits[8];
  std::snprintf(digits, sizeof digits, "%06o", sum);
  std::copy(digits, digits + 7, tar.begin() + offset + 148);
}

void set_field(Bytes& tar, std::size_t offset, std::size_t field, const Bytes& value) {
  std::copy(value.begin(), value.end(), tar.begin() + offset + field);
  fix_checksum(tar, offset);
}

TEST(TarShards, SplitSampleName) {
  struct Case {
    std::string name, key, extension;
    bool ok;
  };
  for (const Case& c : std::vector<Case>{{"dir/n0001.jpg", "dir/n0001", "jpg", true},
                                         {"a.b.cls", "a", "b.cls", true},
                                         {"x/y.z/w.JPEG", "x/y.z/w", "jpeg", true},
                                         {"./s1.txt", "./s1", "txt", true},
                                         {"noext", "", "", false},
                                         {"dir/.hidden", "", "", false},
                                         {"dir.d/noext", "", "", false},
                                         {"__meta__", "", "", false}}) {
    std::string key, extension;
    EXPECT_EQ(split_sample_name(c.name, key, extension), c.ok) << c.name;
    if (c.ok) {
      EXPECT_EQ(key, c.key) << c.name;
      EXPECT_EQ(extension, c.extension) << c.name;
    }
  }
}

// A shard as WebDataset writes it, with the members the reader must skip between samples.
void write_shard(const std::string& path, bool gzip) {
  TarWriter tar(path, gzip);
  tar.add_directory("train");
  tar.add_file("train/n0001.jpg", pattern(1000, 1));
  tar.add_file("train/n0001.cls", text("3"));
  tar.add_entry("train/n0001.link", '2', {});  // a symlink: skipped
  tar.add_file("train/n0002.JPG", pattern(512, 2));
  tar.add_file("train/n0002.cls", text("7"));
  tar.add_file("train/n0002.meta.json", text("{}"));
  tar.add_file("README", text("not a sample"));
  tar.add_entry("pax_global_header", 'g', text("22 comment=whatever 1\n"));
  tar.add_file("a.b.cls", {});
  tar.close();
}

void check_shard(const std::vector<TarSample>& samples) {
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_EQ(samples[0].key, "train/n0001");
  ASSERT_EQ(samples[0].files.size(), 2u);
  EXPECT_EQ(samples[0].files.at("jpg"), pattern(1000, 1));
  EXPECT_EQ(samples[0].files.at("cls"), text("3"));
  EXPECT_EQ(samples[1].key, "train/n0002");
  ASSERT_EQ(samples[1].files.size(), 3u);
  EXPECT_EQ(samples[1].files.at("jpg"), pattern(512, 2));
  EXPECT_EQ(samples[1].files.at("cls"), text("7"));
  EXPECT_EQ(samples[1].files.at("meta.json"), text("{}"));
  EXPECT_EQ(samples[2].key, "a");
  ASSERT_EQ(samples[2].files.count("b.cls"), 1u);
  EXPECT_TRUE(samples[2].files.at("b.cls").empty());
}

TEST(TarShards, PlainAndGzipShards) {
  TempDir dir;
  for (const std::string name : {"shard.tar", "shard.tar.gz", "shard.tgz"}) {
    SCOPED_TRACE(name);
    const bool gzip = name != "shard.tar";
    write_shard(dir.file(name), gzip);
    const Bytes raw = testing::read_raw(dir.file(name));
    EXPECT_EQ(raw[0] == 0x1f && raw[1] == 0x8b, gzip);
    check_shard(read_samples(dir.file(name)));
  }
}

TEST(TarShards, MembersInOrderWithOffsets) {
  TempDir dir;
  write_shard(dir.file("s.tar"), false);
  TarReader reader(dir.file("s.tar"));
  TarMember m;
  std::vector<std::string> names;
  std::vector<int64_t> offsets;
  while (reader.next_member(m)) {
    names.push_back(m.name);
    offsets.push_back(m.offset);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"train/n0001.jpg", "train/n0001.cls",
                                             "train/n0002.JPG", "train/n0002.cls",
                                             "train/n0002.meta.json", "README", "a.b.cls"}));
  // directory (512), n0001.jpg (512 + 1024), n0001.cls (1024), link (512), n0002.JPG (1024).
  EXPECT_EQ(offsets[0], 512);
  EXPECT_EQ(offsets[1], 512 + 1536);
  EXPECT_EQ(offsets[2], 512 + 1536 + 1024 + 512);
}

TEST(TarShards, GnuLongNamesAndPaxPaths) {
  TempDir dir;
  const std::string long_dir = std::string(120, 'd') + "/";
  const std::string pax_dir = std::string(150, 'p') + "/";
  {
    TarWriter tar(dir.file("long.tar"));
    tar.add_file(long_dir + "sample1.jpg", text("j1"));  // GNU 'L' record before it
    tar.add_file(long_dir + "sample1.cls", text("1"));
    const std::string record = "path=" + pax_dir + "sample2.jpg\n";
    // "<length> path=...\n", the length counting its own digits.
    std::string pax = std::to_string(record.size() + 4) + " " + record;
    ASSERT_EQ(pax.size(), record.size() + 4);
    tar.add_entry("PaxHeaders/sample2.jpg", 'x', text(pax));
    tar.add_file("truncated-name-in-header.jpg", text("j2"));
    tar.add_file("after.cls", text("after"));  // the long name applied to one member only
    tar.close();
  }
  const std::vector<TarSample> samples = read_samples(dir.file("long.tar"));
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_EQ(samples[0].key, long_dir + "sample1");
  EXPECT_EQ(samples[0].files.size(), 2u);
  EXPECT_EQ(samples[1].key, pax_dir + "sample2");
  EXPECT_EQ(samples[1].files.at("jpg"), text("j2"));
  EXPECT_EQ(samples[2].key, "after");
}

// A pax "size" replaces the header's size field (GNU tar writes one for members over 8 GiB).
TEST(TarShards, PaxSizeOverridesTheHeader) {
  TempDir dir;
  {
    TarWriter tar(dir.file("pax-size.tar"));
    tar.add_entry("PaxHeaders/a.jpg", 'x', text("10 size=5\n"));
    tar.add_file("a.jpg", text("12345"));
    tar.add_file("b.jpg", text("b"));
    tar.close();
  }
  Bytes tar = testing::read_raw(dir.file("pax-size.tar"));
  set_field(tar, 1024, 124, text("00000000000"));  // a.jpg's header says 0 bytes
  testing::write_raw(dir.file("pax-size.tar"), tar);
  const std::vector<TarSample> samples = read_samples(dir.file("pax-size.tar"));
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].files.at("jpg"), text("12345"));
  EXPECT_EQ(samples[1].files.at("jpg"), text("b"));
}

// Cross-check with GNU tar, an independent writer, when the machine has it.
TEST(TarShards, ReadsWhatGnuTarWrites) {
  if (std::system("tar --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "no tar command";
  TempDir dir;
  const std::string deep =
      std::string(90, 'a') + "/" + std::string(90, 'b');  // > 155: no ustar split
  fs::create_directories(dir.file("src/" + deep));
  fs::create_directories(dir.file("src/short"));
  testing::write_raw(dir.file("src/" + deep + "/k1.jpg"), pattern(3000, 5));
  testing::write_raw(dir.file("src/" + deep + "/k1.cls"), text("9"));
  testing::write_raw(dir.file("src/short/k2.jpg"), pattern(10, 6));
  for (const std::string format : {"gnu", "pax", "ustar-split"}) {
    SCOPED_TRACE(format);
    const std::string archive = dir.file("gnu-" + format + ".tar.gz");
    // ustar stores a path of up to 255 bytes as prefix + name; only a shorter one fits.
    const std::string members =
        format == "ustar-split" ? "short " + std::string(90, 'a') : deep + " short";
    const std::string cmd = "cd " + dir.file("src") + " && tar --sort=name --format=" +
                            (format == "ustar-split" ? "ustar" : format) + " -czf " + archive +
                            " " + members + " 2>/dev/null";
    if (format == "ustar-split") {
      const std::string mid = std::string(90, 'a') + "/" + std::string(60, 'c');
      fs::create_directories(dir.file("src/" + mid));
      testing::write_raw(dir.file("src/" + mid + "/k3.png"), pattern(700, 7));
    }
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::map<std::string, TarSample> by_key;
    for (TarSample& s : read_samples(archive)) by_key[s.key] = s;
    if (format == "ustar-split") {
      const std::string key = std::string(90, 'a') + "/" + std::string(60, 'c') + "/k3";
      ASSERT_EQ(by_key.count(key), 1u);
      EXPECT_EQ(by_key[key].files.at("png"), pattern(700, 7));
      ASSERT_EQ(by_key.count("short/k2"), 1u);
      continue;
    }
    ASSERT_EQ(by_key.size(), 2u);
    EXPECT_EQ(by_key[deep + "/k1"].files.at("jpg"), pattern(3000, 5));
    EXPECT_EQ(by_key[deep + "/k1"].files.at("cls"), text("9"));
    EXPECT_EQ(by_key["short/k2"].files.at("jpg"), pattern(10, 6));
  }
}

TEST(TarShards, EndOfArchive) {
  TempDir dir;
  {
    TarWriter tar(dir.file("a.tar"));
    tar.add_file("s1.txt", text("one"));
    tar.close();
  }
  Bytes tar = testing::read_raw(dir.file("a.tar"));
  ASSERT_EQ(tar.size(), 512u * 4);
  // No end blocks at all, after a complete member: accepted.
  testing::write_raw(dir.file("no-end.tar"), Bytes(tar.begin(), tar.begin() + 1024));
  EXPECT_EQ(read_samples(dir.file("no-end.tar")).size(), 1u);
  // One zero block ends the archive; what follows is not read.
  Bytes lone = tar;
  lone.resize(1024 + 512);
  lone.insert(lone.end(), tar.begin(), tar.begin() + 1024);
  lone.insert(lone.end(), 700, 0xee);
  testing::write_raw(dir.file("lone.tar"), lone);
  EXPECT_EQ(read_samples(dir.file("lone.tar")).size(), 1u);
  // An empty file is an empty archive.
  testing::write_raw(dir.file("empty.tar"), {});
  EXPECT_TRUE(read_samples(dir.file("empty.tar")).empty());
}

// A Pipe-mode FIFO carries a channel's archives back to back: read as concatenated, every
// archive's samples come in order across the zero blocks between them (GNU tar's
// --ignore-zeros; gzip members back to back too); read as one archive, the first ends it.
TEST(TarShards, ConcatenatedArchivesAsAPipeCarriesThem) {
  TempDir dir;
  for (bool gzip : {false, true}) {
    const std::string ext = gzip ? ".tar.gz" : ".tar";
    for (int part = 0; part < 2; ++part) {
      TarWriter tar(dir.file("part" + std::to_string(part) + ext), gzip);
      tar.add_file("a" + std::to_string(part) + ".jpg", pattern(700, part));
      tar.add_file("a" + std::to_string(part) + ".cls", text(std::to_string(part)));
      tar.close();
    }
    // Plain: the first archive padded to GNU tar's 10 KiB record, then the second. Gzip: the
    // two compressed files back to back, as S3 objects arrive.
    Bytes both = testing::read_raw(dir.file("part0" + ext));
    if (!gzip) both.insert(both.end(), 10240 - both.size() % 10240, 0);
    const Bytes second = testing::read_raw(dir.file("part1" + ext));
    both.insert(both.end(), second.begin(), second.end());
    const std::string path = dir.file("both" + ext);
    testing::write_raw(path, both);
    TarShardReader stream(path, /*concatenated=*/true);
    std::vector<std::string> keys;
    for (TarSample sample; stream.next(sample);) {
      keys.push_back(sample.key);
      EXPECT_EQ(sample.files.at("cls"), text(sample.key.substr(1)));
    }
    EXPECT_EQ(keys, (std::vector<std::string>{"a0", "a1"})) << ext;
    EXPECT_EQ(read_samples(path).size(), 1u) << ext;  // one archive: the first end block ends it
  }
}

// A tar of two samples: s1.jpg (600 bytes, header at 0), s2.jpg (1500 bytes, header at 1536,
// data at 2048), s2.cls (header at 3584).
Bytes two_sample_tar(const TempDir& dir) {
  {
    TarWriter tar(dir.file("good.tar"));
    tar.add_file("s1.jpg", pattern(600, 1));
    tar.add_file("s2.jpg", pattern(1500, 2));
    tar.add_file("s2.cls", text("2"));
    tar.close();
  }
  return testing::read_raw(dir.file("good.tar"));
}

void expect_tar_error(const TempDir& dir, const Bytes& tar, bool gzip,
                      std::initializer_list<std::string> parts) {
  const std::string path = dir.file(gzip ? "bad.tar.gz" : "bad.tar");
  (gzip ? testing::write_gz : testing::write_raw)(path, tar);
  std::vector<std::string> all(parts);
  all.push_back(path);
  TarShardReader reader(path);
  TarSample sample;
  try {
    while (reader.next(sample)) {
    }
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    for (const std::string& part : all)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "'" << part << "' not in: " << e.what();
  }
}

TEST(TarShards, TruncatedArchives) {
  TempDir dir;
  const Bytes tar = two_sample_tar(dir);
  for (bool gzip : {false, true}) {
    SCOPED_TRACE(gzip ? "gzip" : "plain");
    expect_tar_error(dir, Bytes(tar.begin(), tar.begin() + 2048 + 1000), gzip,
                     {"member 's2.jpg' at byte offset 1536",
                      "truncated member: expected 1500 bytes, the file ends after 1000"});
    // In the padding after the data.
    expect_tar_error(
        dir, Bytes(tar.begin(), tar.begin() + 2048 + 1510), gzip,
        {"member 's2.jpg' at byte offset 1536",
         "truncated member: expected 36 more bytes (data and padding), the file ends after 10"});
    expect_tar_error(dir, Bytes(tar.begin(), tar.begin() + 1536 + 300), gzip,
                     {"member 's2.jpg' at byte offset 1536",
                      "truncated header: expected 512 bytes, the file ends after 300"});
  }
}

TEST(TarShards, BadHeaders) {
  TempDir dir;
  const Bytes good = two_sample_tar(dir);
  Bytes flipped = good;
  flipped[1536 + 1] ^= 0x01;  // 's2.jpg' -> 's3.jpg' without a new checksum
  expect_tar_error(
      dir, flipped, false,
      {"member 's3.jpg' at byte offset 1536", "bad header checksum", "not a tar file"});
  Bytes bad_octal = good;
  set_field(bad_octal, 1536, 124, text("0000000z750"));
  expect_tar_error(
      dir, bad_octal, true,
      {"member 's2.jpg' at byte offset 1536", "bad octal number in the size field: '0000000z750"});
  Bytes negative = good;
  set_field(negative, 1536, 124, Bytes(12, 0xff));
  expect_tar_error(dir, negative, false, {"member 's2.jpg'", "bad octal number in the size field"});
  // Not a tar at all.
  expect_tar_error(dir, Bytes(2000, 'x'), false,
                   {"member 'xxxx", "at byte offset 0", "bad header checksum"});
  // 8 GiB - 1 (the largest octal size) in a small file: over the limit, nothing allocated.
  Bytes huge = good;
  set_field(huge, 1536, 124, text("77777777777"));
  expect_tar_error(dir, huge, false, {"member 's2.jpg'", "over the limit"});
  // 512 MiB claimed: read as it arrives, then the truncation is reported.
  Bytes big = good;
  set_field(big, 1536, 124, text("04000000000"));
  expect_tar_error(dir, big, true,
                   {"member 's2.jpg'", "truncated member: expected 536870912 bytes"});
}

TEST(TarShards, Base256Size) {
  TempDir dir;
  Bytes tar = two_sample_tar(dir);
  Bytes size(12, 0);
  size[0] = 0x80;
  size[10] = 1500 >> 8;
  size[11] = 1500 & 0xff;
  set_field(tar, 1536, 124, size);
  testing::write_raw(dir.file("b256.tar"), tar);
  const std::vector<TarSample> samples = read_samples(dir.file("b256.tar"));
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[1].files.at("jpg"), pattern(1500, 2));
}

TEST(TarShards, BadPaxAndDanglingLongName) {
  TempDir dir;
  for (const std::string& pax : {std::string("99 path=x\n"), std::string("x path=y\n"),
                                 std::string("9 pathy\n\n"), std::string("12 size=-1\n")}) {
    {
      TarWriter tar(dir.file("pax.tar"));
      tar.add_entry("PaxHeaders/a", 'x', text(pax));
      tar.add_file("a.jpg", text("a"));
      tar.close();
    }
    expect_tar_error(dir, testing::read_raw(dir.file("pax.tar")), false,
                     {"member 'PaxHeaders/a' at byte offset 0", "pax"});
  }
  {
    TarWriter tar(dir.file("dangling.tar"));
    tar.add_file("s1.jpg", text("a"));
    tar.add_entry("././@LongLink", 'L', text("long/name.jpg"));
    tar.close();
  }
  expect_tar_error(dir, testing::read_raw(dir.file("dangling.tar")), false,
                   {"member 'long/name.jpg' at byte offset 1024", "no member after it"});
}

TEST(TarShards, DuplicateExtensionInOneSample) {
  TempDir dir;
  {
    TarWriter tar(dir.file("dup.tar"));
    tar.add_file("s1.jpg", text("a"));
    tar.add_file("s1.JPG", text("b"));
    tar.close();
  }
  expect_tar_error(dir, testing::read_raw(dir.file("dup.tar")), false,
                   {"member 's1.JPG' at byte offset 1024", "a second 'jpg' file in sample 's1'"});
}

}  // namespace
}  // namespace sdp
