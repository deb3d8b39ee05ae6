// TFRecord files (TensorFlow's record framing): a sequence of records, each
//   uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes |
//   length bytes of payload       | uint32 masked CRC-32C of the payload,
// the whole file optionally gzip-compressed. TfRecordReader reads either kind in order;
// TfRecordFile reads records of a plain file in any order through a per-file index of byte
// offsets (<file>.idx, made on first use); TfRecordWriter writes both kinds. Every defect of
// a file is an InputError naming the file, the record (counted from 0) and its byte offset.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "data/formats/compressed_file.hpp"

namespace sdp {

// A payload longer than this is treated as corruption: no image record comes near it, and a
// length is then never an allocation the machine cannot make.
constexpr int64_t kMaxTfRecordBytes = int64_t{1} << 30;

// True when `path` is gzip-compressed. A plain TFRecord file may begin with the gzip magic
// bytes 1f 8b (a first record of 0x8b1f + k * 65536 bytes), so a file counts as gzip only
// when its first 12 bytes are not a valid record header. Throws InputError if it cannot be
// opened.
bool tfrecord_is_gzip(const std::string& path);
// True when `path` starts as a TFRecord file does: a gzip stream (tfrecord_is_gzip), or a first
// record header whose length checksum holds. False when it cannot be read; nothing thrown.
bool looks_like_tfrecord(const std::string& path);

// Sequential reader of a plain or gzip TFRecord file, or of a named pipe carrying plain records.
class TfRecordReader {
 public:
  // Throws InputError when the file cannot be opened.
  explicit TfRecordReader(const std::string& path);
  ~TfRecordReader();
  TfRecordReader(const TfRecordReader&) = delete;
  TfRecordReader& operator=(const TfRecordReader&) = delete;

  // Replaces `payload` with the next record's payload; false (payload empty) at the end of
  // the file. Throws InputError "<path>: record <n> (from 0) at byte offset <o>: ..." on a
  // truncated header, payload or checksum, a bad length or payload CRC, or a length over
  // kMaxTfRecordBytes (or, in a plain file, over what the file has left). Offsets count
  // uncompressed bytes.
  bool next(std::vector<uint8_t>& payload);

  const std::string& path() const { return path_; }
  bool gzip() const { return gz_ != nullptr; }
  // Records returned so far, and the (uncompressed) byte offset of the next one.
  int64_t records_read() const { return record_; }
  int64_t offset() const { return offset_; }

 private:
  // Up to n bytes; fewer only at the end of the file.
  int64_t read_some(void* dst, int64_t n);
  void set_read_buffer();

  std::string path_;
  std::unique_ptr<CompressedFile> gz_;  // gzip files
  std::FILE* plain_ = nullptr;          // plain files (see tfrecord_is_gzip for why not gzread)
  std::unique_ptr<char[]> read_buffer_;  // plain_'s stdio buffer: reads of 1 MiB, not 4 KiB
  int64_t plain_size_ = 0;
  int64_t offset_ = 0;
  int64_t record_ = 0;
};

// The byte offset of every record of a plain TFRecord file, by reading the 12-byte headers
// (checking each length CRC and that the payload fits in the file) and seeking over the
// payloads, whose CRCs are checked when a record is read. Throws InputError naming the file,
// record and offset on a defect, and for a gzip file, which has no byte offsets to seek to.
std::vector<int64_t> scan_tfrecord_offsets(const std::string& path);

// The index file of `path`: path + ".idx".
std::string tfrecord_index_path(const std::string& path);

// Scans `path` and writes its index file atomically (a temporary file renamed over it, so
// a reader never sees half an index, and ranks making the same index at once do not
// collide). Returns the offsets. Throws RuntimeError when the index cannot be written.
std::vector<int64_t> write_tfrecord_index(const std::string& path);

// The offsets of `path`'s records: from its index file when that exists, is well formed,
// was modified after the data file and records the data file's size; otherwise by
// scanning, after which the index is written for next time (when the directory is
// read-only, the offsets are returned all the same).
std::vector<int64_t> tfrecord_index(const std::string& path);

// Random access to the records of a plain TFRecord file. The read methods are const and
// use pread, so threads may share one TfRecordFile.
class TfRecordFile {
 public:
  // Opens the file and loads or makes its index (tfrecord_index). Throws InputError for a
  // gzip file or a defect found by the scan.
  explicit TfRecordFile(const std::string& path);
  ~TfRecordFile();
  TfRecordFile(const TfRecordFile&) = delete;
  TfRecordFile& operator=(const TfRecordFile&) = delete;

  const std::string& path() const { return path_; }
  int64_t size() const { return static_cast<int64_t>(offsets_.size()); }
  const std::vector<int64_t>& offsets() const { return offsets_; }

  // Replaces `payload` with record `record` (0 <= record < size()), both CRCs checked.
  // Throws InputError naming the file, the record and its offset.
  void read(int64_t record, std::vector<uint8_t>& payload) const;
  // The record whose header starts at byte `offset` (an offset from the index, or from
  // anywhere else). Throws InputError naming the file and the offset.
  void read_record_at(int64_t offset, std::vector<uint8_t>& payload) const;

 private:
  void read_at(int64_t offset, int64_t record, std::vector<uint8_t>& payload) const;

  std::string path_;
  int fd_ = -1;
  int64_t file_size_ = 0;
  std::vector<int64_t> offsets_;
};

// Writes a TFRecord file, plain or gzip (what TensorFlow's TFRecordOptions("GZIP") reads).
class TfRecordWriter {
 public:
  // Throws RuntimeError when the file cannot be created.
  explicit TfRecordWriter(const std::string& path, bool gzip = false);
  // The destructor closes; errors at that point are lost: call close() to see them.
  TfRecordWriter(const TfRecordWriter&) = delete;
  TfRecordWriter& operator=(const TfRecordWriter&) = delete;

  void write(const void* payload, std::size_t n);
  void write(const std::vector<uint8_t>& payload) { write(payload.data(), payload.size()); }
  // Hands every record written so far to the operating system, so that a process that dies
  // later leaves them whole in a plain file (TensorBoard's event files are read while training
  // runs, and after a crash); a gzip stream is sync-flushed (decodable so far, its end written
  // at close). Throws RuntimeError naming the file on a failed write.
  void flush();
  // Flushes and closes; throws RuntimeError naming the file on a failed write.
  void close();
  int64_t records_written() const { return records_; }

 private:
  CompressedWriter out_;
  int64_t records_ = 0;
};

}  // namespace sdp
