#include "data/formats/compressed_file.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <filesystem>

#include "core/bytes.hpp"
#include "core/error.hpp"
#include "data/formats/data_files.hpp"

namespace sdp {

namespace {
gzFile as_gz(void* p) {
  return static_cast<gzFile>(p);
}

}  // namespace

CompressedFile::CompressedFile(const std::string& path) : path_(path) {
  // A FIFO (SageMaker's Pipe mode) is read once, in order: nothing may be read ahead of gzopen.
  std::error_code ec;
  const bool fifo = std::filesystem::is_fifo(path, ec);
  if (!fifo && !data_file_exists(path)) throw InputError(path + ": no such file");
  if (!fifo && ends_with(path, ".gz")) {
    // gzread would pass a non-gzip file through silently; a ".gz" that is not gzip is
    // more likely a broken download than a raw file with a misleading name.
    unsigned char magic[2] = {0, 0};
    std::FILE* f = std::fopen(path.c_str(), "rb");
    std::size_t got = f ? std::fread(magic, 1, 2, f) : 0;
    if (f) std::fclose(f);
    if (got != 2 || magic[0] != 0x1f || magic[1] != 0x8b)
      throw InputError(path + ": bad gzip file: missing gzip magic bytes 1f 8b");
  }
  gz_ = gzopen(path.c_str(), "rb");
  if (gz_ == nullptr) throw InputError(path + ": cannot open for reading");
  gzbuffer(as_gz(gz_), 1 << 20);  // fewer syscalls for the 30 MB CIFAR batches
}

CompressedFile::~CompressedFile() {
  if (gz_) gzclose(as_gz(gz_));
}

int64_t CompressedFile::read(void* dst, int64_t n) {
  int64_t total = 0;
  auto* out = static_cast<unsigned char*>(dst);
  while (total < n) {
    // gzread takes an unsigned count and returns int: read in chunks below INT_MAX.
    unsigned chunk = static_cast<unsigned>(std::min<int64_t>(n - total, 1 << 30));
    int got = gzread(as_gz(gz_), out + total, chunk);
    if (got < 0) {
      int errnum = 0;
      const char* msg = gzerror(as_gz(gz_), &errnum);
      throw InputError(path_ + ": bad gzip data after " + std::to_string(consumed_ + total) +
                       " bytes: " + (msg ? msg : "unknown zlib error"));
    }
    if (got == 0) {
      // End of input. A gzip stream cut short reports Z_BUF_ERROR here, not at gzread.
      int errnum = 0;
      const char* msg = gzerror(as_gz(gz_), &errnum);
      if (errnum != Z_OK && errnum != Z_STREAM_END)
        throw InputError(path_ + ": bad gzip data after " + std::to_string(consumed_ + total) +
                         " bytes: " + (msg ? msg : "unknown zlib error"));
      break;
    }
    total += got;
  }
  consumed_ += total;
  return total;
}

void CompressedFile::read_exact(void* dst, int64_t n, const std::string& what) {
  int64_t before = consumed_;
  int64_t got = read(dst, n);
  if (got != n)
    throw InputError(path_ + ": truncated: expected " + std::to_string(n) + " bytes of " + what +
                     " at offset " + std::to_string(before) + ", found " + std::to_string(got) +
                     " (" + std::to_string(before + got) + " bytes of data in total)");
}

void CompressedFile::read_exact_into(std::vector<uint8_t>& out, int64_t n, const std::string& what) {
  constexpr int64_t kChunk = 16 << 20;
  const int64_t before = consumed_;
  int64_t got = 0;
  while (got < n) {
    const int64_t want = std::min(kChunk, n - got);
    const std::size_t old = out.size();
    out.resize(old + static_cast<std::size_t>(want));
    const int64_t chunk = read(out.data() + old, want);
    got += chunk;
    if (chunk < want) {
      out.resize(old + static_cast<std::size_t>(chunk));
      throw InputError(path_ + ": truncated: expected " + std::to_string(n) + " bytes of " + what +
                       " at offset " + std::to_string(before) + ", found " + std::to_string(got) +
                       " (" + std::to_string(before + got) + " bytes of data in total)");
    }
  }
}

std::vector<uint8_t> CompressedFile::read_all(int64_t limit) {
  std::vector<uint8_t> data;
  constexpr int64_t kChunk = 8 << 20;
  for (;;) {
    std::size_t old = data.size();
    // One byte past the limit tells "exactly the limit" from "more than the limit".
    const int64_t want = std::min<int64_t>(kChunk, limit + 1 - static_cast<int64_t>(old));
    data.resize(old + want);
    int64_t got = read(data.data() + old, want);
    data.resize(old + got);
    if (static_cast<int64_t>(data.size()) > limit)
      throw InputError(path_ + ": more than " + std::to_string(limit) +
                       " bytes of data (uncompressed), more than any file of this kind holds");
    if (got < want) break;
  }
  return data;
}

bool CompressedFile::at_end() {
  unsigned char byte;
  return read(&byte, 1) == 0;
}

CompressedWriter::CompressedWriter(const std::string& path, bool gzip) : path_(path) {
  gz_ = gzopen(path.c_str(), gzip ? "wb" : "wbT");
  if (gz_ == nullptr) throw RuntimeError("cannot create '" + path + "': " + std::strerror(errno));
}

CompressedWriter::~CompressedWriter() {
  if (gz_) gzclose(static_cast<gzFile>(gz_));
}

void CompressedWriter::fail(int status) const {
  int errnum = status;
  const char* msg = gz_ ? gzerror(static_cast<gzFile>(gz_), &errnum) : nullptr;
  throw RuntimeError("cannot write '" + path_ + "': " +
                     (errnum == Z_ERRNO ? std::strerror(errno)
                      : msg && *msg     ? msg
                                        : "zlib error " + std::to_string(status)));
}

void CompressedWriter::write(const void* data, std::size_t n) {
  if (gz_ == nullptr) throw std::logic_error("write after close: " + path_);
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    // gzwrite takes an unsigned count and returns int: write in chunks below INT_MAX.
    const auto chunk = static_cast<unsigned>(std::min<std::size_t>(n, 1u << 30));
    if (gzwrite(static_cast<gzFile>(gz_), p, chunk) != static_cast<int>(chunk)) fail(Z_ERRNO);
    p += chunk;
    n -= chunk;
  }
}

void CompressedWriter::flush() {
  if (gz_ == nullptr) throw std::logic_error("flush after close: " + path_);
  const int status = gzflush(static_cast<gzFile>(gz_), Z_SYNC_FLUSH);
  if (status != Z_OK) fail(status);
}

void CompressedWriter::close() {
  if (gz_ == nullptr) return;
  const int status = gzclose(static_cast<gzFile>(gz_));
  gz_ = nullptr;
  if (status != Z_OK)
    throw RuntimeError("cannot write '" + path_ + "': " +
                       (status == Z_ERRNO ? std::strerror(errno) : "zlib error " + std::to_string(status)));
}

}  // namespace sdp
