// LeNet-5 as usually written for 28x28 MNIST: conv5x5(6, pad 2) -> ReLU -> maxpool2 ->
// conv5x5(16) -> ReLU -> maxpool2 -> fc 120 -> ReLU -> fc 84 -> ReLU -> fc classes.
//
// The layers run conv -> maxpool -> ReLU instead of conv -> ReLU -> maxpool. That is the same
// function with the same gradients: ReLU is monotonic, so max(relu(a), relu(b), ...) ==
// relu(max(a, b, ...)), and the gradient reaches the window's maximum exactly when that
// maximum is positive in both orders. The ReLU then touches a 4x smaller tensor, and it is
// fused into the pooling layer (tests/unit/models checks this against the reference order).
// conv2 keeps its activations in NHWC: with 6 input channels oneDNN's blocked layouts send
// its weight gradient to a slower AVX2 kernel behind two reorders. pool1 (hand-written, see
// nn/direct_max_pool.hpp) reads conv1's blocked output and writes NHWC for conv2 directly.
#include "core/error.hpp"
#include "models/builders.hpp"
#include "nn/conv2d.hpp"
#include "nn/flatten.hpp"
#include "nn/linear.hpp"
#include "nn/pool2d.hpp"
#include "nn/relu.hpp"

namespace sdp::models {

std::unique_ptr<nn::Model> build_lenet5(const ModelOptions& o) {
  auto model = std::make_unique<nn::Model>(o.name, Shape{o.in_channels, o.height, o.width},
                                           o.num_classes, o.seed, o.device);
  nn::Conv2dOptions c1{o.in_channels, 6, 5, 1, 2, /*bias=*/true, /*fuse_relu=*/false};
  nn::Conv2dOptions c2{6, 16, 5, 1, 0, true, false, /*channels_last=*/true};
  model->add<nn::Conv2d>("conv1", c1);
  model->add<nn::Pool2d>("pool1",
                         nn::max_pool(2, 2, 0, /*fuse_relu=*/true, /*channels_last=*/true));
  model->add<nn::Conv2d>("conv2", c2);
  model->add<nn::Pool2d>("pool2", nn::max_pool(2, 2, 0, /*fuse_relu=*/true));
  model->add<nn::Flatten>("flatten");
  // Spatial size after conv1 (same), pool, conv2 (valid 5x5), pool.
  const int h = ((o.height / 2) - 4) / 2, w = ((o.width / 2) - 4) / 2;
  if (h < 1 || w < 1) throw InputError("model " + o.name + ": input must be at least 12x12");
  model->add<nn::Linear>("fc1", nn::LinearOptions{16 * h * w, 120, true});
  model->add<nn::ReLU>("fc1.relu");
  model->add<nn::Linear>("fc2", nn::LinearOptions{120, 84, true});
  model->add<nn::ReLU>("fc2.relu");
  model->add<nn::Linear>("fc3", nn::LinearOptions{84, o.num_classes, true});
  model->build();
  return model;
}

}  // namespace sdp::models
