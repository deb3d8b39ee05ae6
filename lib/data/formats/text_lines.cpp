#include "data/formats/text_lines.hpp"

#include <cstring>

#include "core/error.hpp"

namespace sdp {

namespace {
// Reads start at 64 KiB, so a small file costs little, and grow to 1 MiB while the file goes
// on: a read that large goes from the file straight into the buffer, past zlib's own.
constexpr std::size_t kFirstChunkBytes = std::size_t{64} << 10;
constexpr std::size_t kChunkBytes = std::size_t{1} << 20;
}  // namespace

TextLines::TextLines(const std::string& path) : file_(path), buffer_(kFirstChunkBytes) {}

bool TextLines::next(std::string_view& line) {
  while (true) {
    const char* start = buffer_.data() + begin_;
    const std::size_t have = end_ - begin_;
    if (const void* newline = std::memchr(start + scanned_, '\n', have - scanned_)) {
      const auto length = static_cast<std::size_t>(static_cast<const char*>(newline) - start);
      line = std::string_view(start, length);
      begin_ += length + 1;
      scanned_ = 0;
      ++line_number_;
      return true;
    }
    scanned_ = have;
    if (at_eof_) {
      if (have == 0) return false;
      line = std::string_view(start, have);  // the last line, without a '\n'
      begin_ = end_;
      scanned_ = 0;
      ++line_number_;
      return true;
    }
    // Keep the partial line, moved to the front, and read more behind it.
    if (begin_ > 0) {
      std::memmove(buffer_.data(), start, have);
      begin_ = 0;
      end_ = have;
    }
    const bool full = end_ == buffer_.size();  // one line fills it: make room
    if (full && static_cast<int64_t>(buffer_.size()) >= kMaxTextLineBytes)
      throw InputError(path() + ":" + std::to_string(line_number_ + 1) + ": a line longer than " +
                       std::to_string(kMaxTextLineBytes >> 20) +
                       " MiB: not a text file of lines, or corrupt");
    if (full || (buffer_.size() < kChunkBytes && bytes_read_ >= buffer_.size()))
      buffer_.resize(buffer_.size() * 2);
    const int64_t got =
        file_.read(buffer_.data() + end_, static_cast<int64_t>(buffer_.size() - end_));
    if (got == 0) at_eof_ = true;
    end_ += static_cast<std::size_t>(got);
    bytes_read_ += static_cast<std::size_t>(got);
  }
}

}  // namespace sdp
