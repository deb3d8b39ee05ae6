// TextLines: the lines of a plain or gzip text file (CompressedFile), read in chunks of up to
// 1 MiB and handed out as views into the chunk, so a reader of millions of short lines (LibSVM)
// makes no allocation and no copy per line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/formats/compressed_file.hpp"

namespace sdp {

// A line longer than this is taken for a file that is not text (or has no line ends at all),
// so a hostile file cannot make the reader hold more than this at once.
constexpr int64_t kMaxTextLineBytes = int64_t{64} << 20;

class TextLines {
 public:
  // Throws InputError when the file cannot be opened (CompressedFile).
  explicit TextLines(const std::string& path);

  // The next line, without its '\n' (a '\r' before it is kept: the parser decides); false at
  // the end. The last line needs no '\n'. `line` is valid until the next call. Throws
  // InputError for a corrupt gzip stream or a line over kMaxTextLineBytes.
  bool next(std::string_view& line);

  const std::string& path() const { return file_.path(); }
  // The line last returned, counted from 1.
  int64_t line_number() const { return line_number_; }
  // "PATH:LINE" of the line last returned, for messages.
  std::string where() const { return path() + ":" + std::to_string(line_number_); }

 private:
  CompressedFile file_;
  std::vector<char> buffer_;
  std::size_t begin_ = 0;    // the first byte not yet handed out
  std::size_t scanned_ = 0;  // bytes from begin_ known to hold no '\n'
  std::size_t end_ = 0;      // the end of the bytes read
  std::size_t bytes_read_ = 0;
  bool at_eof_ = false;
  int64_t line_number_ = 0;
};

}  // namespace sdp
