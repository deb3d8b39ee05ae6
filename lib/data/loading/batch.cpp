#include "data/loading/batch.hpp"

#include <memory>
#include <utility>

#include "core/device_memory.hpp"

namespace sdp {

void Batch::shape_images(int64_t b, int c, int h, int w) {
  const int64_t n = b * c * h * w;
  if (!storage.defined() || storage.numel() < n) {
    if (pinned) {
      std::shared_ptr<void> memory = allocate_pinned_host(static_cast<std::size_t>(n) * sizeof(float));
      void* data = memory.get();
      storage = Tensor::view_of(std::move(memory), data, {n});
    } else {
      storage = Tensor({n});
    }
  }
  images = storage.slice(0, n).reshaped({b, c, h, w});
}

}  // namespace sdp
