#include "data/loading/batch.hpp"

#include <memory>
#include <utility>

#include "core/device_memory.hpp"

namespace sdp {

void Batch::shape_images(int64_t b, int c, int h, int w, DType dtype, bool channels_last) {
  // `storage` counts f32 elements; a 16-bit batch takes as many of them as its bytes need.
  const int64_t elements = b * c * h * w;
  const auto bytes = static_cast<int64_t>(elements * static_cast<int64_t>(dtype_size(dtype)));
  const int64_t n = (bytes + 3) / 4;
  if (!storage.defined() || storage.numel() < n) {
    if (pinned) {
      std::shared_ptr<void> memory = allocate_pinned_host(static_cast<std::size_t>(n) * sizeof(float));
      void* data = memory.get();
      storage = Tensor::view_of(std::move(memory), data, {n});
    } else {
      storage = Tensor({n});
    }
  }
  images = channels_last ? storage.reinterpreted({b, h, w, c}, dtype)
                         : storage.reinterpreted({b, c, h, w}, dtype);
}

}  // namespace sdp
