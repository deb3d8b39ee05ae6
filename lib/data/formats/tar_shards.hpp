// WebDataset shards: tar files (POSIX ustar, pax or GNU; plain or gzip: .tar.gz / .tgz) whose
// consecutive members with the same key form one sample, "dir/n0001.jpg" + "dir/n0001.cls"
// -> sample "dir/n0001" {jpg, cls}. TarReader reads the regular files of a tar in order,
// TarShardReader groups them into samples, TarWriter writes small tars (tests, converter).
// Every defect is an InputError naming the file, the member and its header's byte offset.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "data/formats/compressed_file.hpp"

namespace sdp {

// A regular member over this size is treated as corruption (no sample file comes near it).
constexpr int64_t kMaxTarMemberBytes = int64_t{1} << 30;

struct TarMember {
  std::string name;           // the full path: GNU long name / pax path / ustar prefix honoured
  std::vector<uint8_t> data;  // its contents
  int64_t offset = 0;         // byte offset of its header (uncompressed)
};

// Sequential reader of the regular files of a tar. Directories, links, devices, pax global
// headers and other entries are skipped; a pax extended header ('x': path, size) or a GNU
// long name ('L') applies to the member after it. The archive ends at a zero block (as in
// Python's tarfile: the second one is not required) or at the end of the file after a
// complete member.
class TarReader {
 public:
  // Throws InputError when the file cannot be opened (or is a ".gz" that is not gzip).
  // `concatenated`: archives back to back, as a Pipe-mode FIFO carries a channel's objects:
  // zero blocks are skipped (GNU tar's --ignore-zeros) and only the end of the stream ends it.
  explicit TarReader(const std::string& path, bool concatenated = false);

  // Replaces `member` with the next regular file; false at the end of the archive. Throws
  // InputError "<path>: member '<name>' at byte offset <o>: ..." on a truncated header or
  // member, a bad header checksum, a bad octal or base-256 number, a malformed pax record,
  // or a member over kMaxTarMemberBytes.
  bool next_member(TarMember& member);

  const std::string& path() const { return file_.path(); }

 private:
  // One 512-byte header, parsed: the name (ustar prefix joined), the data's size, the type.
  struct Header {
    std::string name;
    int64_t size = 0;
    char type = '0';
    int64_t offset = 0;  // where the header begins
  };
  // What GNU long-name and pax records said of the member after them.
  struct PendingMetadata {
    std::optional<std::string> name;
    std::optional<int64_t> size;
    int64_t offset = -1;  // where the first of those records began; -1: none pending
  };
  // Checks the block's checksum and parses its fields; `got` is how much of it the file held.
  Header parse_header(const uint8_t* block, int64_t got, int64_t header_offset) const;
  // Reads a 'L' (GNU long name) or 'x' (pax) record's data into `pending`.
  void read_metadata(const Header& header, PendingMetadata& pending);
  // Reads exactly n bytes into dst, or fails naming `name` and `header_offset`.
  void read_exact(void* dst, int64_t n, const std::string& name, int64_t header_offset,
                  const char* what);
  std::vector<uint8_t> read_contents(int64_t size, const std::string& name, int64_t header_offset);
  void skip(int64_t n, const std::string& name, int64_t header_offset);
  [[noreturn]] void fail(const std::string& name, int64_t header_offset,
                         const std::string& what) const;

  CompressedFile file_;
  int64_t offset_ = 0;
  bool ended_ = false;
  bool concatenated_ = false;
};

// WebDataset's split of a member name: key = the path up to the first '.' of its base name,
// extension = the rest, lower-cased ("dir/a.b.JPG" -> "dir/a", "b.jpg"). False (the member
// is not part of any sample) when the base name has no '.' or starts with one, or for a
// top-level "__...__" metadata file, as WebDataset skips them.
bool split_sample_name(const std::string& name, std::string& key, std::string& extension);

struct TarSample {
  std::string key;
  std::map<std::string, std::vector<uint8_t>> files;  // extension -> contents
};

// A label member (WebDataset's .cls): the label as decimal text, surrounding space allowed.
// Throws InputError for an empty member or one that is not an integer.
int64_t parse_tar_label(const std::vector<uint8_t>& bytes);
// The sample's image member: the first of .jpg, .jpeg, .png it has (the formats the decoder reads); nullptr when none.
std::vector<uint8_t>* tar_sample_image(TarSample& sample);

// The samples of a WebDataset shard, in order.
class TarShardReader {
 public:
  // `concatenated`: as TarReader's.
  explicit TarShardReader(const std::string& path, bool concatenated = false);

  // Replaces `sample` with the next group of consecutive members sharing a key; false at
  // the end. Throws what TarReader throws, and InputError for two members of one sample with
  // the same extension.
  bool next(TarSample& sample);

  const std::string& path() const { return tar_.path(); }

 private:
  TarReader tar_;
  std::optional<TarMember> pending_;  // read ahead: the first member of the next sample
};

// Writes a ustar archive (GNU 'L' records for names over 100 bytes), plain or gzip.
class TarWriter {
 public:
  // Throws RuntimeError when the file cannot be created.
  explicit TarWriter(const std::string& path, bool gzip = false);
  ~TarWriter();  // finishes the archive; errors at that point are lost: call close()
  TarWriter(const TarWriter&) = delete;
  TarWriter& operator=(const TarWriter&) = delete;

  void add_file(const std::string& name, const std::vector<uint8_t>& data);
  void add_directory(const std::string& name);
  // One header of type `type` ('0' file, '5' directory, 'x' pax, 'L' long name, ...) and
  // its data; `name` is cut to the header's 100 bytes. For tests that build odd archives.
  void add_entry(const std::string& name, char type, const std::vector<uint8_t>& data);
  // Writes the two zero blocks that end the archive and closes the file. Throws RuntimeError.
  void close();

 private:
  void put(const void* data, std::size_t n);

  CompressedWriter out_;
};

}  // namespace sdp
