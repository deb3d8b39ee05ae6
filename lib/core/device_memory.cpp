#include "core/device_memory.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace sdp {

#ifdef SDP_HAVE_CUDA
// device_memory_cuda.cpp (compiled only with the CUDA backend).
std::shared_ptr<void> cuda_allocate(int ordinal, std::size_t bytes);
void cuda_zero(int ordinal, void* data, std::size_t bytes);
void cuda_copy(void* dst, const void* src, std::size_t bytes);
std::shared_ptr<void> cuda_allocate_pinned_host(std::size_t bytes);
#endif

bool device_supported(const Device& device) {
#ifdef SDP_HAVE_CUDA
  (void)device;  // every device kind is addressable
  return true;
#else
  return device.is_cpu();
#endif
}

void require_device(const Device& device, const char* what) {
  if (!device_supported(device))
    throw InputError(std::string(what) + ": device " + device.str() +
                     " needs the CUDA backend, which this build of sdp-train does not have "
                     "(configure with -DSDP_WITH_CUDA=ON on a machine with the CUDA toolkit)");
}

std::shared_ptr<void> allocate_host(std::size_t bytes) {
  constexpr std::size_t kAlign = 64;
  std::size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  if (rounded == 0) rounded = kAlign;
  void* p = std::aligned_alloc(kAlign, rounded);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

std::shared_ptr<void> allocate_pinned_host(std::size_t bytes) {
#ifdef SDP_HAVE_CUDA
  if (std::shared_ptr<void> pinned = cuda_allocate_pinned_host(bytes)) return pinned;
#endif
  return allocate_host(bytes);
}

namespace {

constexpr int kPurposes = static_cast<int>(MemoryPurpose::kCount);
using PurposeBytes = std::array<std::size_t, kPurposes>;

struct MemoryCounter {
  std::atomic<std::size_t> current{0}, peak{0};
  std::array<std::atomic<std::size_t>, kPurposes> by_purpose{};
  std::mutex at_peak_mutex;  // a new peak is rare (allocations are set-up work): a lock is cheap there
  PurposeBytes at_peak{};
  void add(std::size_t bytes, MemoryPurpose purpose) {
    by_purpose[static_cast<int>(purpose)].fetch_add(bytes);
    const std::size_t now = current.fetch_add(bytes) + bytes;
    std::size_t seen = peak.load();
    while (now > seen) {
      if (peak.compare_exchange_weak(seen, now)) {
        snapshot();
        break;
      }
    }
  }
  void remove(std::size_t bytes, MemoryPurpose purpose) {
    current.fetch_sub(bytes);
    by_purpose[static_cast<int>(purpose)].fetch_sub(bytes);
  }
  void snapshot() {
    std::lock_guard<std::mutex> lock(at_peak_mutex);
    for (int i = 0; i < kPurposes; ++i) at_peak[i] = by_purpose[i].load();
  }
};

MemoryCounter& counter(DeviceKind kind) {
  static std::array<MemoryCounter, 2> counters;
  return counters[kind == DeviceKind::kCpu ? 0 : 1];
}

thread_local MemoryPurpose current_purpose = MemoryPurpose::kLayers;

// `memory`, counted while it lives, under this thread's purpose.
std::shared_ptr<void> counted(DeviceKind kind, std::size_t bytes, std::shared_ptr<void> memory) {
  void* address = memory.get();
  const MemoryPurpose purpose = current_purpose;
  counter(kind).add(bytes, purpose);
  return std::shared_ptr<void>(address, [kind, bytes, purpose, memory = std::move(memory)](void*) mutable {
    memory.reset();
    counter(kind).remove(bytes, purpose);
  });
}

}  // namespace

std::string format_megabytes(std::size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

std::string out_of_memory_message(const Device& device, std::size_t asked, const MemoryUse& held,
                                  std::size_t device_free, std::size_t device_total) {
  const auto mb = format_megabytes;
  return device.str() + " is out of memory: sdp-train asked for " + mb(asked) + " more while holding " +
         mb(held.current) + " (" + mb(device_free) + " free of the GPU's " + mb(device_total) +
         "; other processes and the libraries hold the rest); lower data.batch_size, let a step's buffers share "
         "one arena (model.memory_plan: shared), or compute in 16 bits (precision: amp-fp16 or amp-bf16 halves "
         "the activations)";
}

MemoryUse memory_use(DeviceKind kind) {
  return {counter(kind).current.load(), counter(kind).peak.load()};
}

void reset_peak_memory(DeviceKind kind) {
  counter(kind).peak.store(counter(kind).current.load());
  counter(kind).snapshot();
}

const char* memory_purpose_name(MemoryPurpose purpose) {
  switch (purpose) {
    case MemoryPurpose::kLayers: return "layers' own and the rest";
    case MemoryPurpose::kArena: return "arena";
    case MemoryPurpose::kParameters: return "parameters";
    case MemoryPurpose::kOptimizer: return "optimizer";
    case MemoryPurpose::kWorkspace: return "cuDNN workspace";
    case MemoryPurpose::kInput: return "input";
    case MemoryPurpose::kBatchNormReserve: return "BatchNorm reserve";
    case MemoryPurpose::kCount: break;
  }
  return "?";
}

MemoryPurposeScope::MemoryPurposeScope(MemoryPurpose purpose) : previous_(current_purpose) {
  current_purpose = purpose;
}
MemoryPurposeScope::~MemoryPurposeScope() { current_purpose = previous_; }

PurposeBytes memory_at_peak(DeviceKind kind) {
  MemoryCounter& c = counter(kind);
  std::lock_guard<std::mutex> lock(c.at_peak_mutex);
  return c.at_peak;
}

std::string describe_memory_at_peak(DeviceKind kind) {
  const PurposeBytes bytes = memory_at_peak(kind);
  std::vector<int> order;
  for (int i = 0; i < kPurposes; ++i)
    if (bytes[i] > 0) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return bytes[a] > bytes[b]; });
  std::string text;
  for (int i : order)
    text += (text.empty() ? "" : ", ") + std::string(memory_purpose_name(static_cast<MemoryPurpose>(i))) + " " +
            format_megabytes(bytes[i]);
  return text;
}

std::shared_ptr<void> allocate(const Device& device, std::size_t bytes) {
  if (device.is_cpu()) return counted(device.kind, bytes, allocate_host(bytes));
  require_device(device, "allocate");
#ifdef SDP_HAVE_CUDA
  return counted(device.kind, bytes, cuda_allocate(device.index, bytes));
#else
  return nullptr;  // unreachable: require_device threw
#endif
}

void zero_bytes(const Device& device, void* data, std::size_t bytes) {
  if (bytes == 0) return;
  if (device.is_cpu()) {
    std::memset(data, 0, bytes);
    return;
  }
  require_device(device, "zero");
#ifdef SDP_HAVE_CUDA
  cuda_zero(device.index, data, bytes);
#endif
}

void copy_bytes(const Device& dst_device, void* dst, const Device& src_device, const void* src,
                std::size_t bytes) {
  if (bytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, bytes);
    return;
  }
  require_device(dst_device, "copy");
  require_device(src_device, "copy");
#ifdef SDP_HAVE_CUDA
  cuda_copy(dst, src, bytes);
#endif
}

}  // namespace sdp
