#include "data/formats/libsvm.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <system_error>
#include <vector>

#include "core/error.hpp"
#include "data/formats/compressed_file.hpp"
#include "data/formats/printable.hpp"

namespace sdp {

namespace {

bool is_blank(char c) {
  return c == ' ' || c == '\t';
}

std::string quoted(const char* begin, const char* end) {
  return printable(std::string_view(begin, static_cast<std::size_t>(end - begin)), 60);
}

// 0 / 1, -1 / +1 and their decimal forms (0.0, 1.0, 1e0); -1 means "not clicked", as 0 does.
bool parse_label(const char* begin, const char* end, float& label) {
  const std::string_view text(begin, static_cast<std::size_t>(end - begin));
  if (text == "1" || text == "+1") {
    label = 1;
    return true;
  }
  if (text == "0" || text == "-1") {
    label = 0;
    return true;
  }
  if (begin != end && *begin == '+') ++begin;  // from_chars takes no '+'
  if (begin != end && *begin == '-' && begin != text.data()) return false;  // "+-1"
  double value = 0;
  const auto [stop, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || stop != end) return false;
  if (value != 1 && value != 0 && value != -1) return false;
  label = value == 1 ? 1.0f : 0.0f;
  return true;
}

// Up to 18 decimal digits and nothing else: the common case of ids and one-hot values, read
// without from_chars (a third of the parse time of a9a goes there otherwise). 10^18 < 2^63.
bool parse_short_digits(const char* begin, const char* end, int64_t& n) {
  if (begin == end || end - begin > 18) return false;
  int64_t v = 0;
  for (const char* p = begin; p < end; ++p) {
    const unsigned digit = static_cast<unsigned>(*p - '0');
    if (digit > 9) return false;
    v = v * 10 + digit;
  }
  n = v;
  return true;
}

bool parse_id(const char* begin, const char* end, int64_t& id) {
  if (parse_short_digits(begin, end, id)) return true;
  const auto [stop, ec] = std::from_chars(begin, end, id);
  return ec == std::errc() && stop == end;  // a negative id is append_ctr_sample's to report
}

// A value's text as a float. A magnitude under the float range (1e-50) reads as 0, as it would
// in any float computation; one over it (1e50) fails, as does anything but a number.
bool parse_value(const char* begin, const char* end, float& value) {
  int64_t whole = 0;
  if (end - begin <= 7 && parse_short_digits(begin, end, whole)) {  // below 2^24: exact in a float
    value = static_cast<float>(whole);
    return true;
  }
  if (end - begin > 1 && *begin == '+' && begin[1] != '-') ++begin;  // from_chars takes no '+'
  const auto [stop, ec] = std::from_chars(begin, end, value);
  if (stop != end) return false;
  if (ec == std::errc()) return true;
  double wide = 0;
  if (ec != std::errc::result_out_of_range || std::from_chars(begin, end, wide).ec != std::errc() ||
      !(std::fabs(wide) < 1))
    return false;
  value = static_cast<float>(wide);
  return true;
}

// The error for pair `index` (its text in [begin, end)), which did not parse: why.
[[noreturn]] void bad_pair(std::size_t index, const char* begin, const char* end) {
  const std::string pair = "field " + std::to_string(index) + " (the " +
                           ordinal(static_cast<int64_t>(index) + 1) + " pair " +
                           quoted(begin, end) + ")";
  const char* colon =
      static_cast<const char*>(std::memchr(begin, ':', static_cast<std::size_t>(end - begin)));
  if (colon == nullptr) throw InputError(pair + ": no ':' between id and value; expected id:value");
  int64_t id = 0;
  if (!parse_id(begin, colon, id)) {
    const bool too_long = std::from_chars(begin, colon, id).ec == std::errc::result_out_of_range;
    throw InputError(pair + ": id " + quoted(begin, colon) +
                     (too_long
                          ? " does not fit in 64 bits; expected an id below 2^63"
                          : " is not a whole number; expected id:value with an integer id from 0"));
  }
  float value = 0;
  const char* digits = end - colon > 2 && colon[1] == '+' ? colon + 2 : colon + 1;
  const auto parsed = std::from_chars(digits, end, value);
  const bool too_large = parsed.ec == std::errc::result_out_of_range && parsed.ptr == end;
  throw InputError(
      pair + ": value " + quoted(colon + 1, end) +
      (too_large ? " is beyond the float range (about 3.4e38); expected a smaller number"
                 : " is not a number; expected id:value with a number value such as 1 or 0.25"));
}

}  // namespace

bool parse_libsvm_line(std::string_view line, CtrSample& sample) {
  sample.label = 0;
  sample.ids.clear();
  sample.values.clear();
  const char* p = line.data();
  const char* end = p + line.size();
  if (p == end) return false;  // also keeps a null data() away from memchr
  if (end[-1] == '\r') --end;
  if (const void* comment = std::memchr(p, '#', static_cast<std::size_t>(end - p)))
    end = static_cast<const char*>(comment);

  while (p < end && is_blank(*p)) ++p;
  if (p == end) return false;
  const char* token = p;
  while (p < end && !is_blank(*p)) ++p;
  if (!parse_label(token, p, sample.label))
    throw InputError("label " + quoted(token, p) +
                     ": expected 0 or 1 (or -1 / +1) first on the line");

  while (true) {
    while (p < end && is_blank(*p)) ++p;
    if (p == end) return true;
    token = p;
    const char* colon = nullptr;
    for (; p < end && !is_blank(*p); ++p)
      if (*p == ':' && colon == nullptr) colon = p;
    int64_t id = 0;
    float value = 0;
    if (colon == nullptr || !parse_id(token, colon, id) || !parse_value(colon + 1, p, value))
      bad_pair(sample.ids.size(), token, p);
    sample.ids.push_back(id);
    sample.values.push_back(value);
  }
}

CtrReadStats read_libsvm(const std::string& path, const CtrReadOptions& options, CtrRecords& out) {
  start_ctr_records(options, out);
  TextLines lines(path);
  CtrSample sample;
  CtrReadStats stats;
  std::string_view line;
  while (lines.next(line)) {
    try {
      if (parse_libsvm_line(line, sample))
        append_ctr_sample(sample, options, CtrSampleSource::kLibsvmLine, out, stats);
    } catch (const InputError& e) {
      skip_or_throw(lines.where() + ": " + e.what(), options, stats);
    }
  }
  return stats;
}

LibsvmReader::LibsvmReader(const std::string& path) : lines_(path) {}

bool LibsvmReader::next(CtrSample& sample) {
  std::string_view line;
  while (lines_.next(line)) {
    try {
      if (parse_libsvm_line(line, sample)) return true;
    } catch (const InputError& e) {
      throw InputError(lines_.where() + ": " + e.what());
    }
  }
  return false;
}

bool looks_like_libsvm(const std::string& path) {
  constexpr int64_t kSniffBytes = 64 << 10;
  std::vector<char> head(kSniffBytes);
  try {
    CompressedFile file(path);
    head.resize(static_cast<std::size_t>(file.read(head.data(), kSniffBytes)));
  } catch (const Error&) {
    return false;
  }
  std::string_view rest(head.data(), head.size());
  CtrSample sample;
  while (!rest.empty()) {
    const std::size_t newline = rest.find('\n');
    // A line cut by the 64 KiB says nothing either way: only whole lines are judged.
    if (newline == std::string_view::npos && head.size() == static_cast<std::size_t>(kSniffBytes))
      return false;
    const std::string_view line = rest.substr(0, newline);
    rest = newline == std::string_view::npos ? std::string_view() : rest.substr(newline + 1);
    try {
      // A line of a label alone is LibSVM too, but so is a file of numbers: look on for pairs.
      if (parse_libsvm_line(line, sample) && !sample.ids.empty()) return true;
    } catch (const InputError&) {
      return false;
    }
  }
  return false;
}

int longest_libsvm_row(const std::string& path) {
  LibsvmReader reader(path);
  CtrSample sample;
  std::size_t longest = 0;
  while (reader.next(sample)) longest = std::max(longest, sample.ids.size());
  // A line is at most kMaxTextLineBytes, and a pair takes 4 bytes or more ("1:1 "): this fits.
  return static_cast<int>(longest);
}

}  // namespace sdp
