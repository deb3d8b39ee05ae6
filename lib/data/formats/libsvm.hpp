// LibSVM (SVMlight) text files of CTR samples, plain or gzip: one sample a line,
//   label id:value id:value ...
// separated by spaces or tabs. The label is 0 or 1, or -1 / +1 (also 0.0, 1.0, ...), stored as
// 0 or 1; ids are whole numbers from 0, values finite numbers. Blank lines, a '\r' before the
// line end (files from Windows) and '#' to the end of a line (SVMlight's comments) are
// ignored. The k-th pair of a line is field k - 1 of its sample (CtrSample, CtrRecords).
#pragma once

#include <string>
#include <string_view>

#include "data/formats/ctr_records.hpp"
#include "data/formats/ctr_sample.hpp"
#include "data/formats/text_lines.hpp"

namespace sdp {

// Parses one line (without its '\n') into `sample` (its vectors' storage reused). False when
// the line holds no sample (blank, or a comment only). Throws InputError, without the file and
// line (the caller adds them), for a bad label or a pair that is not id:value with a whole
// number id and a number value (a value under the float range reads as 0, one over it is an
// error). Ids are not checked against a table here, nor is the pair count (append_ctr_sample).
bool parse_libsvm_line(std::string_view line, CtrSample& sample);

// A LibSVM file sample by sample, for tools that stream a file larger than memory (read_libsvm
// reads a whole file into CtrRecords).
class LibsvmReader {
 public:
  // Throws InputError when the file cannot be opened.
  explicit LibsvmReader(const std::string& path);
  // The next sample into `sample`; false at the end. Throws InputError "PATH:LINE: ..." for a
  // bad line (parse_libsvm_line) or a corrupt gzip stream.
  bool next(CtrSample& sample);
  const std::string& path() const { return lines_.path(); }
  // "PATH:LINE" of the sample last returned (or of the bad line).
  std::string where() const { return lines_.where(); }

 private:
  TextLines lines_;
};

// True when the lines of `path` in its first 64 KiB (plain or gzip) parse as LibSVM up to the
// first with an id:value pair: how `data inspect` tells a LibSVM file from others. False when
// the file cannot be read; nothing thrown.
bool looks_like_libsvm(const std::string& path);

// Appends every sample of `path` to `out`, each as options.fields pairs (CtrRecords). A bad
// line is an InputError "PATH:LINE: field N (the K-th pair): what is wrong, what was expected"
// (or "PATH:LINE: label ...") or, with options.skip_bad, skipped and counted. An unreadable file
// or corrupt gzip stream is an InputError whatever skip_bad says. std::logic_error when
// `options` does not fit `out` (start_ctr_records).
CtrReadStats read_libsvm(const std::string& path, const CtrReadOptions& options, CtrRecords& out);

// The most pairs on one line of `path` (0 when no line has any): the fields a model needs to
// read it whole. Every line is parsed; a bad one is an InputError as read_libsvm reports it.
int longest_libsvm_row(const std::string& path);

}  // namespace sdp
