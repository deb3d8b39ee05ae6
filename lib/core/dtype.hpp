// Element types and devices a Tensor can live on.
#pragma once

#include <cstddef>
#include <string>

namespace sdp {

enum class DType { kF32, kF16, kBF16 };

inline std::size_t dtype_size(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }

inline const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
  }
  return "?";
}

enum class DeviceKind { kCpu, kCuda };

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;  // GPU ordinal for kCuda; unused for kCpu

  static Device cpu() { return {}; }
  static Device cuda(int ordinal) { return {DeviceKind::kCuda, ordinal}; }
  bool is_cpu() const { return kind == DeviceKind::kCpu; }
  bool is_cuda() const { return kind == DeviceKind::kCuda; }
  bool operator==(const Device& other) const {
    return kind == other.kind && (kind == DeviceKind::kCpu || index == other.index);
  }
  std::string str() const {
    return kind == DeviceKind::kCpu ? "cpu" : "cuda:" + std::to_string(index);
  }
};

}  // namespace sdp
