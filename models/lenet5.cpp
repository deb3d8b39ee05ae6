// LeNet-5 as usually written for 28x28 MNIST: conv5x5(6, pad 2) -> ReLU -> maxpool2 ->
// conv5x5(16) -> ReLU -> maxpool2 -> fc 120 -> ReLU -> fc 84 -> ReLU -> fc classes.
// The ReLUs after the convolutions are fused into them (oneDNN post-op).
#include "models/builders.hpp"
#include "nn/conv2d.hpp"
#include "nn/flatten.hpp"
#include "nn/linear.hpp"
#include "nn/pool2d.hpp"
#include "nn/relu.hpp"

namespace sdp::models {

std::unique_ptr<nn::Model> build_lenet5(const ModelOptions& o) {
  auto model = std::make_unique<nn::Model>(o.name, Shape{o.in_channels, o.height, o.width},
                                           o.num_classes, o.seed);
  nn::Conv2dOptions c1{o.in_channels, 6, 5, 1, 2, /*bias=*/true, /*fuse_relu=*/true};
  nn::Conv2dOptions c2{6, 16, 5, 1, 0, true, true};
  model->add<nn::Conv2d>("conv1", c1);
  model->add<nn::Pool2d>("pool1", nn::max_pool(2, 2));
  model->add<nn::Conv2d>("conv2", c2);
  model->add<nn::Pool2d>("pool2", nn::max_pool(2, 2));
  model->add<nn::Flatten>("flatten");
  // Spatial size after conv1 (same), pool, conv2 (valid 5x5), pool.
  const int h = ((o.height / 2) - 4) / 2, w = ((o.width / 2) - 4) / 2;
  if (h < 1 || w < 1) throw std::invalid_argument("input must be at least 12x12");
  model->add<nn::Linear>("fc1", nn::LinearOptions{16 * h * w, 120, true});
  model->add<nn::ReLU>("fc1.relu");
  model->add<nn::Linear>("fc2", nn::LinearOptions{120, 84, true});
  model->add<nn::ReLU>("fc2.relu");
  model->add<nn::Linear>("fc3", nn::LinearOptions{84, o.num_classes, true});
  model->build();
  return model;
}

}  // namespace sdp::models
