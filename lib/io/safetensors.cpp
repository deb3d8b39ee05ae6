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
    for (const NamedTensor& t : tensors) write_all(file, t.tensor.raw(), t.tensor.nbytes(), path);
  });
}

SafetensorsContent load_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot open '" + path + "'");
  in.seekg(0, std::ios::end);
  const uint64_t file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  uint64_t header_size = 0;
  if (file_size < 8 || !in.read(reinterpret_cast<char*>(&header_size), 8))
    throw InputError(path + ": not a safetensors file (shorter than its 8-byte header length)");
  if (header_size > file_size - 8 || header_size > (100u << 20))
    throw InputError(path + ": corrupt safetensors header length " + std::to_string(header_size) +
                     " for a file of " + std::to_string(file_size) + " bytes");
  std::string text(header_size, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_size));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(path + ": corrupt safetensors header: " + e.what());
  }
  const uint64_t data_size = file_size - 8 - header_size;
  SafetensorsContent content;
  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  try {
    for (auto it = header.begin(); it != header.end(); ++it) {
      if (it.key() == "__metadata__") {
        for (auto m = it->begin(); m != it->end(); ++m) content.metadata[m.key()] = m->get<std::string>();
        continue;
      }
      Entry e;
      e.name = it.key();
      if (!parse_dtype(it->at("dtype").get<std::string>(), e.dtype))
        throw InputError(path + ": tensor '" + e.name + "' has unsupported dtype " + it->at("dtype").dump());
      e.shape = it->at("shape").get<Shape>();
      auto offsets = it->at("data_offsets").get<std::vector<uint64_t>>();
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data_size)
        throw InputError(path + ": tensor '" + e.name + "' has data offsets outside the file (truncated?)");
      e.begin = offsets[0];
      e.end = offsets[1];
      if (e.end - e.begin != static_cast<uint64_t>(shape_numel(e.shape)) * dtype_size(e.dtype))
        throw InputError(path + ": tensor '" + e.name + "' size does not match its shape " + shape_str(e.shape));
      entries.push_back(std::move(e));
    }
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": malformed safetensors header: " + e.what());
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  for (const Entry& e : entries) {
    Tensor t(e.shape, e.dtype);
    in.seekg(static_cast<std::streamoff>(8 + header_size + e.begin));
    if (!in.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(t.nbytes())))
      throw InputError(path + ": truncated while reading tensor '" + e.name + "'");
    content.tensors.push_back({e.name, t});
  }
  return content;
}

}  // namespace sdp
