#include "data/batch.hpp"

namespace sdp {

void Batch::shape_images(int64_t b, int c, int h, int w) {
  const int64_t n = b * c * h * w;
  if (!storage.defined() || storage.numel() < n) storage = Tensor({n});
  images = storage.slice(0, n).reshaped({b, c, h, w});
}

}  // namespace sdp
