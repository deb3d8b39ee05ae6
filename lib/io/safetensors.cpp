#include "io/safetensors.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

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
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::size_t offset = 0;
  for (const NamedTensor& t : tensors) {
    header[t.name] = {{"dtype", dtype_tag(t.tensor.dtype())},
                      {"shape", t.tensor.shape()},
                      {"data_offsets", {offset, offset + t.tensor.nbytes()}}};
    offset += t.tensor.nbytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the tensor data 8-byte aligned
  const uint64_t header_size = text.size();     // little-endian on every platform we build for
  write_file_atomically(path, [&](std::FILE* file) {
    write_all(file, &header_size, sizeof header_size, path);
    write_all(file, text.data(), text.size(), path);
    Tensor host;  // a GPU tensor goes through host memory (the copy waits for the device)
    for (const NamedTensor& t : tensors) {
      const void* data = t.tensor.raw();
      if (!t.tensor.device().is_cpu()) {
        host = Tensor(t.tensor.shape(), t.tensor.dtype(), Device::cpu());
        host.copy_from(t.tensor);
        data = host.raw();
      }
      write_all(file, data, t.tensor.nbytes(), path);
    }
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
  std::sort(entries.begin(), entries.end(),
            [](const HeaderEntry& a, const HeaderEntry& b) { return a.begin < b.begin; });
  check_tiling(entries, path, data_size);
  for (const HeaderEntry& e : entries) {
    Tensor t(e.shape, e.dtype);
    in.seekg(static_cast<std::streamoff>(8 + header_size + e.begin));
    if (!in.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(t.nbytes())))
      throw InputError(path + ": truncated while reading tensor '" + e.name + "'");
    content.tensors.push_back({e.name, t});
  }
  return content;
}

}  // namespace sdp
