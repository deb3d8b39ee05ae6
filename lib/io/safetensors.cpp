#include "io/safetensors.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/crc32c.hpp"
#include "core/error.hpp"
#include "io/atomic_file.hpp"

namespace sdp {

namespace {

const char* dtype_tag(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
  }
  return "?";
}

// The checksums' entry for the metadata, beside the tensors' names.
const char* kMetadataEntry = "__metadata__";

std::string crc_text(uint32_t crc) {
  char text[16];
  std::snprintf(text, sizeof text, "%08x", crc);
  return text;
}

// The CRC-32C of every metadata entry but the checksums, in key order, each key and value
// with its terminating NUL (so that "ab" + "c" and "a" + "bc" differ).
uint32_t metadata_crc(const std::map<std::string, std::string>& metadata) {
  uint32_t crc = 0;
  for (const auto& [key, value] : metadata) {
    if (key == kChecksumsKey) continue;
    crc = crc32c_extend(crc, key.c_str(), key.size() + 1);
    crc = crc32c_extend(crc, value.c_str(), value.size() + 1);
  }
  return crc;
}

bool parse_dtype(const std::string& tag, DType& out) {
  if (tag == "F32") out = DType::kF32;
  else if (tag == "F16") out = DType::kF16;
  else if (tag == "BF16") out = DType::kBF16;
  else return false;
  return true;
}

}  // namespace

void save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  if (metadata.count(kChecksumsKey) != 0)
    throw std::logic_error(std::string("save_safetensors: metadata key '") + kChecksumsKey + "' is the checksums'");
  // The header, padded so that the tensor data stays 8-byte aligned. Every checksum is 8 hex
  // digits: the text has the same length whatever their values.
  nlohmann::json checksums = {{kMetadataEntry, crc_text(metadata_crc(metadata))}};
  auto header_text = [&] {
    nlohmann::json header = nlohmann::json::object();
    header["__metadata__"] = metadata;
    header["__metadata__"][kChecksumsKey] = checksums.dump();
    std::size_t offset = 0;
    for (const NamedTensor& t : tensors) {
      header[t.name] = {{"dtype", dtype_tag(t.tensor.dtype())},
                        {"shape", t.tensor.shape()},
                        {"data_offsets", {offset, offset + t.tensor.nbytes()}}};
      offset += t.tensor.nbytes();
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    return text;
  };
  for (const NamedTensor& t : tensors) checksums[t.name] = crc_text(0);  // places, filled in below
  const std::string placeholder = header_text();
  const uint64_t header_size = placeholder.size();  // little-endian on every platform we build for
  write_file_atomically(path, [&](std::FILE* file) {
    write_all(file, &header_size, sizeof header_size, path);
    write_all(file, placeholder.data(), placeholder.size(), path);
    // Each tensor's CRC is taken a chunk at a time right before the chunk is written, while it
    // is in cache: checksumming adds no pass over memory. The header is written again at the end.
    constexpr std::size_t kChunkBytes = std::size_t{1} << 20;
    Tensor host;  // a GPU tensor goes through host memory (the copy waits for the device)
    for (const NamedTensor& t : tensors) {
      const auto* data = static_cast<const char*>(t.tensor.raw());
      if (!t.tensor.device().is_cpu()) {
        host = Tensor(t.tensor.shape(), t.tensor.dtype(), Device::cpu());
        host.copy_from(t.tensor);
        data = static_cast<const char*>(host.raw());
      }
      uint32_t crc = 0;
      for (std::size_t done = 0; done < t.tensor.nbytes(); done += kChunkBytes) {
        const std::size_t n = std::min(kChunkBytes, t.tensor.nbytes() - done);
        crc = crc32c_extend(crc, data + done, n);
        write_all(file, data + done, n, path);
      }
      checksums[t.name] = crc_text(crc);
    }
    const std::string text = header_text();
    if (text.size() != placeholder.size()) throw std::logic_error("save_safetensors: the header changed length");
    if (std::fseek(file, sizeof header_size, SEEK_SET) != 0)
      throw RuntimeError("cannot seek in '" + path + "' to write its header");
    write_all(file, text.data(), text.size(), path);
  });
}


namespace {

// One tensor's entry of a safetensors header, checked.
struct HeaderEntry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;  // byte range in the data after the header
};

// The 8-byte length and the JSON header of an open safetensors file of `file_size` bytes.
nlohmann::json read_header(std::ifstream& in, const std::string& path, uint64_t file_size, uint64_t& header_size) {
  header_size = 0;
  if (file_size < 8 || !in.read(reinterpret_cast<char*>(&header_size), 8))
    throw InputError(path + ": not a safetensors file (shorter than its 8-byte header length)");
  // The cap bounds what parsing may cost: a JSON document of nested empty arrays takes ~30x
  // its size in memory. Our headers are kilobytes (ResNet-50 with its job spec: ~40 KB).
  constexpr uint64_t kMaxHeader = 16u << 20;
  if (header_size > file_size - 8 || header_size > kMaxHeader)
    throw InputError(path + ": corrupt safetensors header length " + std::to_string(header_size) +
                     " for a file of " + std::to_string(file_size) + " bytes (at most " +
                     std::to_string(kMaxHeader) + ")");
  std::string text(header_size, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(header_size)))
    throw InputError(path + ": truncated while reading the safetensors header");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for 1e999
    throw InputError(path + ": corrupt safetensors header: " + e.what());
  }
  if (!header.is_object()) throw InputError(path + ": corrupt safetensors header: not a JSON object");
  return header;
}

// The entry of tensor `name` (`value` in the header), checked against `data_size` bytes of
// data. Every value is type-checked before it is converted: nlohmann's get<int64_t>() of 1e300
// or get<uint64_t>() of -1 converts silently (the first is undefined behaviour).
HeaderEntry parse_entry(const std::string& name, const nlohmann::json& value, const std::string& path,
                        uint64_t data_size) {
  const std::string where = path + ": tensor '" + name + "'";
  if (!value.is_object()) throw InputError(where + " is not a JSON object");
  HeaderEntry e;
  e.name = name;
  const auto dtype = value.find("dtype");
  if (dtype == value.end() || !dtype->is_string() || !parse_dtype(dtype->get<std::string>(), e.dtype))
    throw InputError(where + " has a missing or unsupported dtype" +
                     (dtype == value.end() ? std::string() : " " + dtype->dump()));
  const auto shape = value.find("shape");
  if (shape == value.end() || !shape->is_array()) throw InputError(where + " has no shape (a list of dimensions)");
  // The element count, overflow-checked: dimensions whose product wraps could otherwise
  // pass the size check below with a small byte range.
  uint64_t numel = 1;
  bool too_big = false;
  for (const auto& d : *shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      throw InputError(where + " has a shape that is not a list of non-negative integers: " + shape->dump());
    e.shape.push_back(d.get<int64_t>());
    too_big = too_big || __builtin_mul_overflow(numel, static_cast<uint64_t>(d.get<int64_t>()), &numel);
  }
  uint64_t nbytes = 0;
  too_big = too_big || __builtin_mul_overflow(numel, uint64_t{dtype_size(e.dtype)}, &nbytes);
  const auto offsets = value.find("data_offsets");
  if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned())
    throw InputError(where + " has no data_offsets [begin, end] of non-negative integers");
  e.begin = (*offsets)[0].get<uint64_t>();
  e.end = (*offsets)[1].get<uint64_t>();
  if (e.begin > e.end || e.end > data_size)
    throw InputError(where + " has data offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                     "] outside the " + std::to_string(data_size) + " bytes of data (truncated?)");
  if (too_big || e.end - e.begin != nbytes)
    throw InputError(where + " size " + std::to_string(e.end - e.begin) + " bytes does not match its shape " +
                     shape->dump() + " and dtype " + dtype_tag(e.dtype));
  return e;
}

// As the safetensors format requires: the tensors (sorted by offset) tile the data exactly, no
// overlap (two tensors sharing bytes) and no hole (bytes no tensor owns, room for a polyglot file).
void check_tiling(const std::vector<HeaderEntry>& sorted, const std::string& path, uint64_t data_size) {
  uint64_t covered = 0;
  for (const HeaderEntry& e : sorted) {
    if (e.begin != covered)
      throw InputError(path + ": tensor '" + e.name + "' at data offset " + std::to_string(e.begin) +
                       (e.begin < covered ? " overlaps the tensor before it (which ends at "
                                          : " leaves a hole after the tensor before it (which ends at ") +
                       std::to_string(covered) + ")");
    covered = e.end;
  }
  if (covered != data_size)
    throw InputError(path + ": " + std::to_string(data_size - covered) +
                     " bytes after the last tensor belong to no tensor (corrupt or not safetensors)");
}

// The checksums a file recorded (name -> CRC), taken out of `metadata`; empty when it has none.
std::map<std::string, uint32_t> take_checksums(std::map<std::string, std::string>& metadata, const std::string& path) {
  std::map<std::string, uint32_t> crcs;
  const auto it = metadata.find(kChecksumsKey);
  if (it == metadata.end()) return crcs;
  const std::string where = path + ": the checksums (metadata '" + kChecksumsKey + "') ";
  nlohmann::json table;
  try {
    table = nlohmann::json::parse(it->second);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(where + "are damaged: " + e.what());
  }
  if (!table.is_object() || table.find(kMetadataEntry) == table.end())
    throw InputError(where + "are damaged: not a JSON object with an entry '" + kMetadataEntry + "'");
  for (auto entry = table.begin(); entry != table.end(); ++entry) {
    const std::string text = entry->is_string() ? entry->get<std::string>() : std::string();
    if (text.size() != 8 || text.find_first_not_of("0123456789abcdef") != std::string::npos)
      throw InputError(where + "are damaged: '" + entry.key() + "' is " + entry->dump() + ", not 8 hex digits");
    crcs[entry.key()] = static_cast<uint32_t>(std::stoul(text, nullptr, 16));
  }
  metadata.erase(it);
  return crcs;
}

// The metadata and every tensor's bytes (their CRCs in `computed`, in content.tensors' order)
// against the checksums the file recorded.
void verify_checksums(const SafetensorsContent& content, const std::vector<uint32_t>& computed,
                      const std::map<std::string, uint32_t>& recorded, const std::string& path) {
  auto mismatch = [&](const std::string& what, uint32_t actual, uint32_t stored) {
    throw InputError(path + ": " + what + " is damaged: its CRC-32C is " + crc_text(actual) + ", the file recorded " +
                     crc_text(stored) + " (the file changed after it was written: a disk or copy error)");
  };
  const uint32_t meta = metadata_crc(content.metadata);
  if (meta != recorded.at(kMetadataEntry)) mismatch("the metadata", meta, recorded.at(kMetadataEntry));
  if (recorded.size() != content.tensors.size() + 1)
    throw InputError(path + ": the checksums are damaged: they name " + std::to_string(recorded.size() - 1) +
                     " tensors, the file holds " + std::to_string(content.tensors.size()));
  for (std::size_t i = 0; i < content.tensors.size(); ++i) {
    const std::string& name = content.tensors[i].name;
    const auto stored = recorded.find(name);
    if (stored == recorded.end())
      throw InputError(path + ": the checksums are damaged: tensor '" + name + "' has none");
    if (computed[i] != stored->second) mismatch("tensor '" + name + "'", computed[i], stored->second);
  }
}

// Reads n bytes into dst and returns their CRC-32C in crc; false when the file ends first.
bool read_checksummed(std::ifstream& in, char* dst, uint64_t n, uint32_t& crc) {
  if (!in.read(dst, static_cast<std::streamsize>(n))) return false;
  crc = crc32c(dst, n);
  return true;
}

}  // namespace

SafetensorsContent load_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot open '" + path + "'");
  in.seekg(0, std::ios::end);
  const uint64_t file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  uint64_t header_size = 0;
  const nlohmann::json header = read_header(in, path, file_size, header_size);
  const uint64_t data_size = file_size - 8 - header_size;
  SafetensorsContent content;
  std::vector<HeaderEntry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() != "__metadata__") {
      entries.push_back(parse_entry(it.key(), *it, path, data_size));
      continue;
    }
    if (!it->is_object()) throw InputError(path + ": safetensors __metadata__ is not a JSON object");
    for (auto m = it->begin(); m != it->end(); ++m) {
      if (!m->is_string()) throw InputError(path + ": safetensors __metadata__ '" + m.key() + "' is not a string");
      content.metadata[m.key()] = m->get<std::string>();
    }
  }
  const std::map<std::string, uint32_t> checksums = take_checksums(content.metadata, path);
  std::sort(entries.begin(), entries.end(),
            [](const HeaderEntry& a, const HeaderEntry& b) { return a.begin < b.begin; });
  check_tiling(entries, path, data_size);
  std::vector<uint32_t> crcs;
  for (const HeaderEntry& e : entries) {
    Tensor t(e.shape, e.dtype);
    in.seekg(static_cast<std::streamoff>(8 + header_size + e.begin));
    uint32_t crc = 0;
    if (!read_checksummed(in, static_cast<char*>(t.raw()), t.nbytes(), crc))
      throw InputError(path + ": truncated while reading tensor '" + e.name + "'");
    content.tensors.push_back({e.name, t});
    crcs.push_back(crc);
  }
  if (!checksums.empty()) {
    verify_checksums(content, crcs, checksums, path);
    content.checksummed = true;
  }
  return content;
}

}  // namespace sdp
