#include "data/formats/tfrecord.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <optional>

#include "core/bytes.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "data/formats/compressed_file.hpp"
#include "core/crc32c.hpp"
#include "data/formats/data_files.hpp"

namespace sdp {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kHeaderBytes = 12;  // length + its CRC
constexpr int64_t kFooterBytes = 4;   // payload CRC
constexpr int64_t kReadChunk = 16 << 20;
// Sequential reads in 1 MiB blocks, not stdio's 4 KiB: on SageMaker's FastFile mode (S3 mounted
// lazily) every read is a request, and streamed sets read whole shards front to back.
constexpr std::size_t kReadBuffer = 1 << 20;
constexpr const char* kIndexMagic = "sdp-tfrecord-index 1";

void store_le(uint8_t* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

InputError record_error(const std::string& path, int64_t record, int64_t offset,
                        const std::string& what) {
  const std::string which =
      record >= 0 ? "record " + std::to_string(record) + " (from 0) at" : "record at";
  return InputError(path + ": " + which + " byte offset " + std::to_string(offset) + ": " + what);
}

// What is wrong with a record header, or "" when nothing is. `left` is how many bytes the
// file holds after the header, or -1 when that is unknown (gzip).
std::string header_problem(const uint8_t* header, int64_t left) {
  const uint32_t stored = load_le32(header + 8);
  const uint32_t computed = crc32c_mask(crc32c(header, 8));
  if (stored != computed)
    return "bad length checksum (stored " + hex32(stored) + ", computed " + hex32(computed) +
           "): not a TFRecord file, or corrupt";
  const uint64_t length = load_le64(header);
  if (length > static_cast<uint64_t>(kMaxTfRecordBytes))
    return "record length " + std::to_string(length) + " is over the limit of " +
           std::to_string(kMaxTfRecordBytes) + " bytes: corrupt";
  if (left >= 0 && static_cast<int64_t>(length) + kFooterBytes > left)
    return "truncated: the header claims " + std::to_string(length) +
           " bytes of payload and 4 of checksum, the file has " + std::to_string(left) +
           " bytes left";
  return "";
}

std::string payload_crc_problem(const std::vector<uint8_t>& payload, const uint8_t* footer) {
  const uint32_t stored = load_le32(footer);
  const uint32_t computed = crc32c_mask(crc32c(payload.data(), payload.size()));
  if (stored == computed) return "";
  return "bad payload checksum (stored " + hex32(stored) + ", computed " + hex32(computed) +
         " over " + std::to_string(payload.size()) + " bytes): corrupt record";
}

// The one reading of TFRecord's framing, under the sequential reader, the index scan and random
// access (TensorFlow's RecordReader is one checksummed read too). `read(dst, n)` fills up to n
// bytes, going on from the record's start, fewer only at the end of the file. `left`: the bytes
// the file holds from the record's start (-1: unknown, gzip or a pipe). With `payload` null only
// the header is read and checked (the index scan steps over the rest). Returns the payload's
// length; nullopt when `end_ok` and the file ends before the record's first byte.
template <class Read>
std::optional<int64_t> read_framed(Read&& read, const std::string& path, int64_t record, int64_t offset,
                                   int64_t left, bool end_ok, std::vector<uint8_t>* payload) {
  if (payload != nullptr) payload->clear();
  auto fail = [&](const std::string& what) {
    if (payload != nullptr) payload->clear();
    throw record_error(path, record, offset, what);
  };
  uint8_t header[kHeaderBytes];
  int64_t got = read(header, kHeaderBytes);
  if (got == 0 && end_ok) return std::nullopt;
  if (got < kHeaderBytes)
    fail("truncated record header: expected 12 bytes, the file ends after " + std::to_string(got));
  const std::string problem = header_problem(header, left < 0 ? -1 : left - kHeaderBytes);
  if (!problem.empty()) fail(problem);
  const auto length = static_cast<int64_t>(load_le64(header));
  if (payload == nullptr) return length;
  // The length is bounded, and the payload grows as it arrives: a gzip stream's claim costs no
  // more memory than the stream really holds.
  int64_t have = 0;
  while (have < length) {
    const int64_t want = std::min(kReadChunk, length - have);
    payload->resize(static_cast<size_t>(have + want));
    got = read(payload->data() + have, want);
    have += got;
    if (got < want)
      fail("truncated payload: expected " + std::to_string(length) + " bytes, the file ends after " +
           std::to_string(have));
  }
  uint8_t footer[kFooterBytes];
  got = read(footer, kFooterBytes);
  if (got < kFooterBytes)
    fail("truncated payload checksum: expected 4 bytes, the file ends after " + std::to_string(got));
  const std::string crc_problem = payload_crc_problem(*payload, footer);
  if (!crc_problem.empty()) fail(crc_problem);
  return length;
}

InputError not_indexable(const std::string& path) {
  return InputError(path +
                    ": gzip-compressed TFRecord file: its records have no byte offsets to seek "
                    "to, so it cannot be indexed or read in random order; read it in order, or "
                    "decompress it (gunzip) for random access");
}

void require_file(const std::string& path) {
  if (!data_file_exists(path)) throw InputError(path + ": no such file");
}

// pread until n bytes or the end of the file; returns the bytes read.
int64_t pread_full(int fd, void* dst, int64_t n, int64_t offset, const std::string& path) {
  int64_t total = 0;
  auto* out = static_cast<uint8_t*>(dst);
  while (total < n) {
    const ssize_t got =
        ::pread(fd, out + total, static_cast<size_t>(std::min(n - total, kReadChunk)),
                static_cast<off_t>(offset + total));
    if (got < 0) {
      if (errno == EINTR) continue;
      throw RuntimeError(path + ": read error at byte offset " + std::to_string(offset + total) +
                         ": " + std::strerror(errno));
    }
    if (got == 0) break;
    total += got;
  }
  return total;
}

class Fd {
 public:
  explicit Fd(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0) throw InputError(path + ": cannot open for reading: " + std::strerror(errno));
  }
  ~Fd() { ::close(fd_); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

int64_t file_size_of(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    throw RuntimeError(path + ": cannot stat: " + std::string(std::strerror(errno)));
  return static_cast<int64_t>(st.st_size);
}

// The offsets of index file `text` when it is a well-formed index of a data file of
// `data_bytes` bytes; nullopt otherwise (the caller then rescans).
std::optional<std::vector<int64_t>> parse_index(const std::string& text, int64_t data_bytes) {
  const char* p = text.data();
  const char* end = p + text.size();
  auto expect_word = [&](const std::string& word) {
    if (static_cast<size_t>(end - p) < word.size() ||
        text.compare(p - text.data(), word.size(), word) != 0)
      return false;
    p += word.size();
    return true;
  };
  auto number = [&](int64_t& v) {
    const auto [next, ec] = std::from_chars(p, end, v);
    if (ec != std::errc() || next == end || *next != '\n') return false;
    p = next + 1;
    return true;
  };
  int64_t recorded_bytes = -1, count = -1;
  if (!expect_word(std::string(kIndexMagic) + "\ndata_bytes ") || !number(recorded_bytes) ||
      recorded_bytes != data_bytes || !expect_word("records ") || !number(count) || count < 0 ||
      count > data_bytes / (kHeaderBytes + kFooterBytes))
    return std::nullopt;
  std::vector<int64_t> offsets;
  offsets.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    int64_t offset = 0;
    if (!number(offset)) return std::nullopt;
    // Each record takes at least 16 bytes; the first starts the file.
    const int64_t min_offset = i == 0 ? 0 : offsets.back() + kHeaderBytes + kFooterBytes;
    if ((i == 0 && offset != 0) || offset < min_offset ||
        offset > data_bytes - kHeaderBytes - kFooterBytes)
      return std::nullopt;
    offsets.push_back(offset);
  }
  if (p != end) return std::nullopt;
  return offsets;
}

std::optional<std::vector<int64_t>> load_fresh_index(const std::string& path, int64_t data_bytes) {
  // At most ~21 bytes per record of at least 16 bytes: a longer file is not an index of this one.
  const auto text = read_fresh_index(path, tfrecord_index_path(path),
                                     static_cast<uint64_t>(2 * data_bytes + 256));
  if (!text) return std::nullopt;
  return parse_index(*text, data_bytes);
}

}  // namespace

namespace {

// The first kHeaderBytes of a file (fewer when it is shorter), and what they say.
struct FileHead {
  uint8_t bytes[kHeaderBytes] = {};
  size_t size = 0;
  bool gzip_magic() const { return size >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b; }
  bool record_header() const {
    return size == static_cast<size_t>(kHeaderBytes) &&
           load_le32(bytes + 8) == crc32c_mask(crc32c(bytes, 8));
  }
  // A plain file may start with the gzip magic (see tfrecord_is_gzip): the header decides.
  bool gzip() const { return gzip_magic() && !record_header(); }
};

// False when the file cannot be opened.
bool read_head(const std::string& path, FileHead& head) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  head.size = std::fread(head.bytes, 1, sizeof head.bytes, f);
  std::fclose(f);
  return true;
}

}  // namespace

bool tfrecord_is_gzip(const std::string& path) {
  require_file(path);
  FileHead head;
  if (!read_head(path, head))
    throw InputError(path + ": cannot open for reading: " + std::strerror(errno));
  return head.gzip();
}

bool looks_like_tfrecord(const std::string& path) {
  FileHead head;
  return read_head(path, head) && (head.gzip() || head.record_header());
}

// ---- TfRecordReader ----

TfRecordReader::TfRecordReader(const std::string& path) : path_(path) {
  // A pipe (SageMaker's Pipe mode) can be read once, in order: no sniffing for gzip, no size.
  struct stat st {};
  const bool pipe = ::stat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
  if (!pipe && tfrecord_is_gzip(path)) {
    gz_ = std::make_unique<CompressedFile>(path);
    return;
  }
  plain_ = std::fopen(path.c_str(), "rb");
  if (plain_ == nullptr)
    throw InputError(path + ": cannot open for reading: " + std::strerror(errno));
  set_read_buffer();
  plain_size_ = pipe ? -1 : file_size_of(::fileno(plain_), path);
}

void TfRecordReader::set_read_buffer() {
  // glibc ignores the size of a buffer it is to allocate itself: hand it ours. Not zeroed
  // (make_unique would be): a small file touches only the pages it fills.
  read_buffer_.reset(new char[kReadBuffer]);
  std::setvbuf(plain_, read_buffer_.get(), _IOFBF, kReadBuffer);
}

TfRecordReader::~TfRecordReader() {
  if (plain_) std::fclose(plain_);
}

int64_t TfRecordReader::read_some(void* dst, int64_t n) {
  int64_t got = 0;
  if (gz_) {
    try {
      got = gz_->read(dst, n);
    } catch (const InputError& e) {  // a corrupt gzip stream: add the record it broke
      throw InputError(std::string(e.what()) + " (in record " + std::to_string(record_) +
                       " (from 0))");
    }
  } else {
    got = static_cast<int64_t>(std::fread(dst, 1, static_cast<size_t>(n), plain_));
    if (got < n && std::ferror(plain_))
      throw RuntimeError(path_ + ": read error at byte offset " + std::to_string(offset_ + got) +
                         ": " + std::strerror(errno));
  }
  offset_ += got;
  return got;
}

bool TfRecordReader::next(std::vector<uint8_t>& payload) {
  const int64_t start = offset_;
  const int64_t left = gz_ || plain_size_ < 0 ? -1 : plain_size_ - start;
  const auto length = read_framed([&](void* dst, int64_t n) { return read_some(dst, n); }, path_, record_, start,
                                  left, /*end_ok=*/true, &payload);
  if (!length) return false;
  ++record_;
  return true;
}

// ---- index ----

std::vector<int64_t> scan_tfrecord_offsets(const std::string& path) {
  if (tfrecord_is_gzip(path)) throw not_indexable(path);
  Fd fd(path);
  const int64_t size = file_size_of(fd.get(), path);
  std::vector<int64_t> offsets;
  int64_t offset = 0;
  while (offset < size) {
    int64_t at = offset;
    const int64_t length = *read_framed(
        [&](void* dst, int64_t n) {
          const int64_t got = pread_full(fd.get(), dst, n, at, path);
          at += got;
          return got;
        },
        path, static_cast<int64_t>(offsets.size()), offset, size - offset, /*end_ok=*/false, nullptr);
    offsets.push_back(offset);
    offset += kHeaderBytes + length + kFooterBytes;
  }
  return offsets;
}

std::string tfrecord_index_path(const std::string& path) {
  return path + ".idx";
}

std::vector<int64_t> write_tfrecord_index(const std::string& path) {
  std::vector<int64_t> offsets = scan_tfrecord_offsets(path);
  const auto data_bytes = static_cast<int64_t>(fs::file_size(path));
  std::string text = std::string(kIndexMagic) + "\ndata_bytes " + std::to_string(data_bytes) +
                     "\nrecords " + std::to_string(offsets.size()) + "\n";
  for (int64_t offset : offsets) text += std::to_string(offset) + "\n";

  write_file_atomically(tfrecord_index_path(path), text);
  return offsets;
}

std::vector<int64_t> tfrecord_index(const std::string& path) {
  if (tfrecord_is_gzip(path)) throw not_indexable(path);
  const auto data_bytes = static_cast<int64_t>(fs::file_size(path));
  if (auto loaded = load_fresh_index(path, data_bytes)) return std::move(*loaded);
  try {
    return write_tfrecord_index(path);
  } catch (const RuntimeError& e) {
    // A read-only data directory (SageMaker's input channels are) only costs the scan.
    log_warn(std::string("TFRecord index not saved, the file was scanned instead: ") + e.what());
    return scan_tfrecord_offsets(path);
  }
}

// ---- TfRecordFile ----

TfRecordFile::TfRecordFile(const std::string& path) : path_(path) {
  if (tfrecord_is_gzip(path)) throw not_indexable(path);
  Fd fd(path);
  file_size_ = file_size_of(fd.get(), path);
  offsets_ = tfrecord_index(path);
  fd_ = fd.release();
}

TfRecordFile::~TfRecordFile() {
  if (fd_ >= 0) ::close(fd_);
}

void TfRecordFile::read(int64_t record, std::vector<uint8_t>& payload) const {
  if (record < 0 || record >= size())
    throw std::out_of_range("TfRecordFile::read: record " + std::to_string(record) + " of " +
                            std::to_string(size()));
  read_at(offsets_[static_cast<size_t>(record)], record, payload);
}

void TfRecordFile::read_record_at(int64_t offset, std::vector<uint8_t>& payload) const {
  read_at(offset, -1, payload);
}

void TfRecordFile::read_at(int64_t offset, int64_t record, std::vector<uint8_t>& payload) const {
  payload.clear();
  if (offset < 0 || offset > file_size_)
    throw record_error(path_, record, offset,
                       "offset outside the file (" + std::to_string(file_size_) + " bytes)");
  int64_t at = offset;
  read_framed(
      [&](void* dst, int64_t n) {
        const int64_t got = pread_full(fd_, dst, n, at, path_);
        at += got;
        return got;
      },
      path_, record, offset, file_size_ - offset, /*end_ok=*/false, &payload);
}

// ---- TfRecordWriter ----

TfRecordWriter::TfRecordWriter(const std::string& path, bool gzip) : out_(path, gzip) {}

void TfRecordWriter::write(const void* payload, std::size_t n) {
  if (!out_.is_open()) throw std::logic_error("TfRecordWriter::write after close: " + out_.path());
  uint8_t header[kHeaderBytes];
  store_le(header, n, 8);
  store_le(header + 8, crc32c_mask(crc32c(header, 8)), 4);
  uint8_t footer[kFooterBytes];
  store_le(footer, crc32c_mask(crc32c(payload, n)), 4);
  out_.write(header, sizeof header);
  out_.write(payload, n);
  out_.write(footer, sizeof footer);
  ++records_;
}

void TfRecordWriter::flush() {
  out_.flush();
}

void TfRecordWriter::close() {
  out_.close();
}

}  // namespace sdp
