#include "data/formats/tar_shards.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "core/error.hpp"
#include "data/formats/printable.hpp"

namespace sdp {

namespace {

constexpr int64_t kBlock = 512;
constexpr int64_t kReadChunk = 16 << 20;
// Pax and GNU long-name records hold a path and a few numbers; more is corruption.
constexpr int64_t kMaxMetadataBytes = 1 << 20;

// Header fields: offset and width (POSIX.1-1988 ustar; GNU uses the same positions for
// every field read here).
struct Field {
  int offset;
  int width;
};
constexpr Field kName{0, 100}, kSize{124, 12}, kChecksum{148, 8}, kType{156, 1}, kMagic{257, 6},
    kPrefix{345, 155};

std::string_view field_bytes(const uint8_t* header, Field f) {
  return {reinterpret_cast<const char*>(header) + f.offset, static_cast<std::size_t>(f.width)};
}

// A NUL-terminated string field (no NUL when it fills the field).
std::string field_string(const uint8_t* header, Field f) {
  const std::string_view bytes = field_bytes(header, f);
  return std::string(bytes.substr(0, bytes.find('\0')));
}

// A numeric field: octal digits between optional spaces and NULs, or GNU base-256 (first
// byte 0x80, then a big-endian number; 0xff would be negative). Nullopt when malformed.
std::optional<int64_t> parse_number(std::string_view bytes) {
  const auto first = static_cast<uint8_t>(bytes[0]);
  if (first == 0x80) {
    int64_t value = 0;
    for (std::size_t i = 1; i < bytes.size(); ++i) {
      if (value > (INT64_MAX >> 8)) return std::nullopt;
      value = (value << 8) | static_cast<uint8_t>(bytes[i]);
    }
    return value;
  }
  if (first & 0x80) return std::nullopt;  // negative base-256, or not a number
  std::size_t i = 0;
  while (i < bytes.size() && bytes[i] == ' ') ++i;
  int64_t value = 0;
  for (; i < bytes.size() && bytes[i] >= '0' && bytes[i] <= '7'; ++i) {
    if (value > (INT64_MAX >> 3)) return std::nullopt;
    value = value * 8 + (bytes[i] - '0');
  }
  for (; i < bytes.size(); ++i)
    if (bytes[i] != ' ' && bytes[i] != '\0') return std::nullopt;
  return value;
}

bool all_zero(const uint8_t* block) {
  return std::all_of(block, block + kBlock, [](uint8_t b) { return b == 0; });
}

int64_t padding(int64_t size) {
  return (kBlock - size % kBlock) % kBlock;
}

// The header's checksum: the sum of its bytes with the checksum field read as spaces.
// Old tars summed signed chars; both sums are accepted, as GNU tar and Python do.
bool checksum_matches(const uint8_t* header, int64_t stored, int64_t* computed_unsigned) {
  int64_t unsigned_sum = 0, signed_sum = 0;
  for (int i = 0; i < kBlock; ++i) {
    const bool in_field = i >= kChecksum.offset && i < kChecksum.offset + kChecksum.width;
    const uint8_t b = in_field ? ' ' : header[i];
    unsigned_sum += b;
    signed_sum += static_cast<int8_t>(b);
  }
  *computed_unsigned = unsigned_sum;
  return stored == unsigned_sum || stored == signed_sum;
}

// What a pax extended header says about the next member.
struct PaxOverrides {
  std::optional<std::string> path;
  std::optional<int64_t> size;
};

// Records "<length> <key>=<value>\n", length counting the whole record. Returns an error
// text, or "" when the records are well formed.
std::string parse_pax(const std::vector<uint8_t>& data, PaxOverrides& out) {
  const std::string_view text(reinterpret_cast<const char*>(data.data()), data.size());
  std::size_t pos = 0;
  while (pos < text.size()) {
    if (text[pos] == '\0') break;  // some writers pad with NULs
    std::size_t i = pos;
    int64_t length = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9' && length <= kMaxMetadataBytes)
      length = length * 10 + (text[i++] - '0');
    if (i == pos || i >= text.size() || text[i] != ' ' ||
        length <= static_cast<int64_t>(i - pos) + 1 ||
        length > static_cast<int64_t>(text.size() - pos))
      return "bad pax record length at byte " + std::to_string(pos) + " of the pax header";
    const std::string_view record = text.substr(i + 1, pos + length - (i + 1));  // key=value\n
    const std::size_t eq = record.find('=');
    if (record.empty() || record.back() != '\n' || eq == std::string_view::npos)
      return "bad pax record at byte " + std::to_string(pos) + " of the pax header";
    const std::string_view key = record.substr(0, eq);
    const std::string_view value = record.substr(eq + 1, record.size() - eq - 2);
    if (key == "path") {
      out.path = std::string(value);
    } else if (key == "size") {
      int64_t size = 0;
      if (value.empty() || value.size() > 18 ||
          !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return "bad pax size " + printable(value);
      for (char c : value) size = size * 10 + (c - '0');
      out.size = size;
    }
    pos += static_cast<std::size_t>(length);
  }
  return "";
}

}  // namespace

int64_t parse_tar_label(const std::vector<uint8_t>& bytes) {
  std::string text(bytes.begin(), bytes.end());
  const auto first = text.find_first_not_of(" \t\r\n");
  const auto last = text.find_last_not_of(" \t\r\n");
  if (first == std::string::npos) throw InputError("the label member is empty");
  text = text.substr(first, last - first + 1);
  std::size_t used = 0;
  int64_t label = 0;
  try {
    label = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size()) throw InputError("the label member holds " + printable(text.substr(0, 40)) + ", not an integer");
  return label;
}

std::vector<uint8_t>* tar_sample_image(TarSample& sample) {
  for (const char* extension : {"jpg", "jpeg", "png"}) {
    const auto found = sample.files.find(extension);
    if (found != sample.files.end()) return &found->second;
  }
  return nullptr;
}

// ---- TarReader ----

TarReader::TarReader(const std::string& path, bool concatenated) : file_(path), concatenated_(concatenated) {}

void TarReader::fail(const std::string& name, int64_t header_offset,
                     const std::string& what) const {
  throw InputError(file_.path() + ": member " + printable(name) + " at byte offset " +
                   std::to_string(header_offset) + ": " + what);
}

void TarReader::read_exact(void* dst, int64_t n, const std::string& name, int64_t header_offset,
                           const char* what) {
  const int64_t got = file_.read(dst, n);
  offset_ += got;
  if (got < n)
    fail(name, header_offset,
         std::string("truncated ") + what + ": expected " + std::to_string(n) +
             " bytes, the file ends after " + std::to_string(got));
}

std::vector<uint8_t> TarReader::read_contents(int64_t size, const std::string& name,
                                              int64_t header_offset) {
  // Grown as the bytes arrive: a header's claim costs no more memory than the file holds.
  std::vector<uint8_t> data;
  int64_t have = 0;
  while (have < size) {
    const int64_t want = std::min(kReadChunk, size - have);
    data.resize(static_cast<std::size_t>(have + want));
    const int64_t got = file_.read(data.data() + have, want);
    offset_ += got;
    have += got;
    if (got < want)
      fail(name, header_offset,
           "truncated member: expected " + std::to_string(size) + " bytes, the file ends after " +
               std::to_string(have));
  }
  skip(padding(size), name, header_offset);
  return data;
}

void TarReader::skip(int64_t n, const std::string& name, int64_t header_offset) {
  uint8_t scratch[64 << 10];
  int64_t left = n;
  while (left > 0) {
    const int64_t want = std::min<int64_t>(left, sizeof scratch);
    const int64_t got = file_.read(scratch, want);
    offset_ += got;
    left -= got;
    if (got < want)
      fail(name, header_offset,
           "truncated member: expected " + std::to_string(n) +
               " more bytes (data and padding), the file ends after " + std::to_string(n - left));
  }
}

TarReader::Header TarReader::parse_header(const uint8_t* block, int64_t got, int64_t header_offset) const {
  Header h;
  h.offset = header_offset;
  h.name = field_string(block, kName);
  if (got < kBlock)
    fail(h.name, header_offset, "truncated header: expected 512 bytes, the file ends after " + std::to_string(got));
  const std::optional<int64_t> stored = parse_number(field_bytes(block, kChecksum));
  int64_t computed = 0;
  if (!stored || !checksum_matches(block, *stored, &computed))
    fail(h.name, header_offset,
         "bad header checksum (stored " + std::string(stored ? std::to_string(*stored) : "unreadable") +
             ", computed " + std::to_string(computed) + "): not a tar file, or corrupt");
  const std::optional<int64_t> size = parse_number(field_bytes(block, kSize));
  if (!size)
    fail(h.name, header_offset, "bad octal number in the size field: " + printable(field_bytes(block, kSize)));
  h.size = *size;
  h.type = static_cast<char>(block[kType.offset]);
  if (field_bytes(block, kMagic) == std::string_view("ustar\0", 6)) {
    const std::string prefix = field_string(block, kPrefix);
    if (!prefix.empty()) h.name = prefix + "/" + h.name;
  }
  return h;
}

void TarReader::read_metadata(const Header& h, PendingMetadata& pending) {
  if (h.size > kMaxMetadataBytes)
    fail(h.name, h.offset,
         std::string(h.type == 'x' ? "pax" : "long-name") + " header of " + std::to_string(h.size) +
             " bytes: corrupt");
  if (pending.offset < 0) pending.offset = h.offset;
  const std::vector<uint8_t> data = read_contents(h.size, h.name, h.offset);
  if (h.type == 'L') {
    const std::string_view text(reinterpret_cast<const char*>(data.data()), data.size());
    pending.name = std::string(text.substr(0, text.find('\0')));
    return;
  }
  PaxOverrides pax;
  const std::string problem = parse_pax(data, pax);
  if (!problem.empty()) fail(h.name, h.offset, problem);
  if (pax.path) pending.name = pax.path;
  if (pax.size) pending.size = pax.size;
}

bool TarReader::next_member(TarMember& member) {
  member.name.clear();
  member.data.clear();
  PendingMetadata pending;
  while (!ended_) {
    const int64_t header_offset = offset_;
    uint8_t block[kBlock];
    const int64_t got = file_.read(block, kBlock);
    offset_ += got;
    if (got == kBlock && all_zero(block) && concatenated_ && pending.offset < 0)
      continue;  // the end of one archive (or its padding); another may follow
    if (got == 0 || (got == kBlock && all_zero(block))) {
      ended_ = true;
      if (pending.offset >= 0)
        fail(pending.name.value_or(""), pending.offset,
             "a long-name or pax header with no member after it: truncated archive");
      return false;
    }
    Header h = parse_header(block, got, header_offset);
    if (h.type == 'x' || h.type == 'L') {  // metadata for the next member
      read_metadata(h, pending);
      continue;
    }
    if (pending.name) h.name = *pending.name;
    if (pending.size) h.size = *pending.size;
    pending = PendingMetadata{};

    // '0' and '\0' (old tars) are files, '7' a contiguous file; an old-style name ending
    // in '/' is a directory. Everything else (directories, links, devices, pax globals,
    // GNU long link names, volume labels) is skipped over its data.
    const bool regular =
        h.type == '0' || h.type == '7' || (h.type == '\0' && (h.name.empty() || h.name.back() != '/'));
    if (!regular) {
      skip(h.size + padding(h.size), h.name, header_offset);
      continue;
    }
    if (h.size > kMaxTarMemberBytes)
      fail(h.name, header_offset,
           "member of " + std::to_string(h.size) + " bytes is over the limit of " +
               std::to_string(kMaxTarMemberBytes) + " bytes: corrupt");
    member.data = read_contents(h.size, h.name, header_offset);
    member.name = std::move(h.name);
    member.offset = header_offset;
    return true;
  }
  return false;
}

// ---- samples ----

bool split_sample_name(const std::string& name, std::string& key, std::string& extension) {
  const std::size_t slash = name.rfind('/');
  const std::size_t base = slash == std::string::npos ? 0 : slash + 1;
  const std::size_t dot = name.find('.', base);
  if (dot == std::string::npos || dot == base) return false;
  if (slash == std::string::npos && name.size() >= 4 && name.compare(0, 2, "__") == 0 &&
      name.compare(name.size() - 2, 2, "__") == 0)
    return false;
  key = name.substr(0, dot);
  extension = name.substr(dot + 1);
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return true;
}

TarShardReader::TarShardReader(const std::string& path, bool concatenated) : tar_(path, concatenated) {}

bool TarShardReader::next(TarSample& sample) {
  sample.key.clear();
  sample.files.clear();
  std::string key, extension;
  for (;;) {
    if (!pending_) {
      TarMember member;
      if (!tar_.next_member(member)) break;
      pending_ = std::move(member);
    }
    if (!split_sample_name(pending_->name, key, extension)) {
      pending_.reset();
      continue;
    }
    if (!sample.files.empty() && key != sample.key) break;  // pending_ starts the next sample
    if (sample.files.count(extension))
      throw InputError(tar_.path() + ": member " + printable(pending_->name) + " at byte offset " +
                       std::to_string(pending_->offset) + ": a second '" + extension +
                       "' file in sample " + printable(key));
    sample.key = key;
    sample.files[extension] = std::move(pending_->data);
    pending_.reset();
  }
  return !sample.files.empty();
}

// ---- TarWriter ----

namespace {

// `digits` octal digits of `value`, zero-padded.
void write_octal(uint8_t* dst, int digits, uint64_t value) {
  for (int i = digits - 1; i >= 0; --i, value >>= 3)
    dst[i] = static_cast<uint8_t>('0' + (value & 7));
}

// A numeric field as tar writes it: width - 1 octal digits and a NUL; a value too large
// for them in base-256.
void put_number(uint8_t* header, Field f, int64_t value) {
  if (value >= (int64_t{1} << (3 * (f.width - 1)))) {
    header[f.offset] = 0x80;
    for (int i = f.width - 1; i >= 1; --i, value >>= 8)
      header[f.offset + i] = static_cast<uint8_t>(value & 0xff);
    return;
  }
  write_octal(header + f.offset, f.width - 1, static_cast<uint64_t>(value));
  header[f.offset + f.width - 1] = '\0';
}

}  // namespace

TarWriter::TarWriter(const std::string& path, bool gzip) : out_(path, gzip) {}

TarWriter::~TarWriter() {
  try {
    close();
  } catch (const RuntimeError&) {  // a destructor must not throw; close() reports it
  }
}

void TarWriter::put(const void* data, std::size_t n) {
  if (!out_.is_open()) throw std::logic_error("TarWriter: write after close: " + out_.path());
  out_.write(data, n);
}

void TarWriter::add_entry(const std::string& name, char type, const std::vector<uint8_t>& data) {
  uint8_t header[kBlock] = {};
  std::memcpy(header + kName.offset, name.data(), std::min<std::size_t>(name.size(), kName.width));
  put_number(header, {100, 8}, type == '5' ? 0755 : 0644);  // mode
  put_number(header, {108, 8}, 0);                          // uid
  put_number(header, {116, 8}, 0);                          // gid
  put_number(header, kSize, static_cast<int64_t>(data.size()));
  put_number(header, {136, 12}, 0);  // mtime
  header[kType.offset] = static_cast<uint8_t>(type);
  std::memcpy(header + kMagic.offset,
              "ustar\0"
              "00",
              8);
  std::memset(header + kChecksum.offset, ' ', kChecksum.width);
  int64_t sum = 0;
  for (uint8_t b : header) sum += b;
  // "dddddd\0 ", as tar writes it; the sum is at most 512 * 255, six octal digits.
  write_octal(header + kChecksum.offset, 6, static_cast<uint64_t>(sum));
  header[kChecksum.offset + 6] = '\0';
  header[kChecksum.offset + 7] = ' ';
  put(header, kBlock);
  put(data.data(), data.size());
  const uint8_t zeros[kBlock] = {};
  put(zeros, static_cast<std::size_t>(padding(static_cast<int64_t>(data.size()))));
}

void TarWriter::add_file(const std::string& name, const std::vector<uint8_t>& data) {
  if (name.size() > static_cast<std::size_t>(kName.width)) {
    std::vector<uint8_t> long_name(name.begin(), name.end());
    long_name.push_back('\0');
    add_entry("././@LongLink", 'L', long_name);
  }
  add_entry(name, '0', data);
}

void TarWriter::add_directory(const std::string& name) {
  add_entry(name.empty() || name.back() == '/' ? name : name + "/", '5', {});
}

void TarWriter::close() {
  if (!out_.is_open()) return;
  const uint8_t zeros[2 * kBlock] = {};
  put(zeros, sizeof zeros);
  out_.close();
}

}  // namespace sdp
