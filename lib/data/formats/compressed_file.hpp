// CompressedFile: sequential reads from a file that is either gzip-compressed or raw
// (zlib's gzread passes raw files through), with every failure turned into an
// InputError naming the file. The readers of every format go through it, so ".gz or
// not" is decided in one place. CompressedWriter: its twin for writing, under the TFRecord
// and tar writers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sdp {

class CompressedFile {
 public:
  // Throws InputError when the file cannot be opened, or when its name ends in ".gz"
  // but it does not start with the gzip magic bytes. A FIFO is read as a stream (plain or
  // gzip, told by its first bytes).
  explicit CompressedFile(const std::string& path);
  ~CompressedFile();
  CompressedFile(const CompressedFile&) = delete;
  CompressedFile& operator=(const CompressedFile&) = delete;

  const std::string& path() const { return path_; }

  // Reads up to n bytes; returns how many were read (less than n only at the end).
  // Throws InputError on a corrupt or truncated gzip stream.
  int64_t read(void* dst, int64_t n);
  // Reads exactly n bytes or throws InputError "<path>: truncated: <what> ...".
  void read_exact(void* dst, int64_t n, const std::string& what);
  // Appends exactly n bytes to `out` or throws like read_exact. `out` grows as the data
  // arrives (in chunks of at most 16 MiB), so a corrupt header claiming terabytes costs
  // no more memory than the file really holds before the truncation is reported.
  void read_exact_into(std::vector<uint8_t>& out, int64_t n, const std::string& what);
  // Reads everything that is left; more than `limit` bytes throws InputError (a gzip
  // stream expands up to ~1000x: a small corrupt or hostile file must not take the memory).
  std::vector<uint8_t> read_all(int64_t limit);
  // True when no byte is left (used to reject trailing garbage).
  bool at_end();

 private:
  std::string path_;
  void* gz_ = nullptr;  // gzFile; void* keeps zlib.h out of this header
  int64_t consumed_ = 0;
};

// Sequential writes to a file, gzip-compressed or plain (zlib writes a plain file through,
// mode "wbT"), every failure a RuntimeError naming the file.
class CompressedWriter {
 public:
  // Throws RuntimeError when the file cannot be created.
  CompressedWriter(const std::string& path, bool gzip);
  ~CompressedWriter();  // closes; an error at that point is lost: call close() to see it
  CompressedWriter(const CompressedWriter&) = delete;
  CompressedWriter& operator=(const CompressedWriter&) = delete;

  const std::string& path() const { return path_; }
  bool is_open() const { return gz_ != nullptr; }
  // std::logic_error after close().
  void write(const void* data, std::size_t n);
  // A gzip stream is sync-flushed (decodable up to here, its end written at close); a plain
  // file's bytes are handed to the operating system.
  void flush();
  // Nothing after a first call.
  void close();

 private:
  [[noreturn]] void fail(int status) const;

  std::string path_;
  void* gz_ = nullptr;  // gzFile; void* keeps zlib.h out of this header
};

}  // namespace sdp
