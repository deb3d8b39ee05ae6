// CIFAR ResNets (He et al. 2016, §4.2): conv3x3(16) -> BN -> ReLU, three stages of n basic
// blocks with 16, 32, 64 channels (stride 2 at the start of stages 2 and 3), global
// average pooling, fc. depth = 6n + 2. Shortcuts are option A (parameter-free).
#include <stdexcept>

#include "models/builders.hpp"
#include "nn/batchnorm2d.hpp"
#include "nn/conv2d.hpp"
#include "nn/flatten.hpp"
#include "nn/linear.hpp"
#include "nn/pool2d.hpp"
#include "nn/residual_block.hpp"

namespace sdp::models {

std::unique_ptr<nn::Model> build_resnet_cifar(const ModelOptions& o, int depth) {
  if ((depth - 2) % 6 != 0) throw std::logic_error("CIFAR ResNet depth must be 6n+2");  // the registry fixes depths
  const int n = (depth - 2) / 6;
  auto model = std::make_unique<nn::Model>(o.name, Shape{o.in_channels, o.height, o.width},
                                           o.num_classes, o.seed, o.device);
  model->add<nn::Conv2d>("conv1", nn::Conv2dOptions{o.in_channels, 16, 3, 1, 1, false, false});
  model->add<nn::BatchNorm2d>("bn1", nn::BatchNorm2dOptions{16, 1e-5f, 0.1f, /*fuse_relu=*/true});
  int in = 16;
  const int widths[3] = {16, 32, 64};
  for (int stage = 0; stage < 3; ++stage) {
    for (int b = 0; b < n; ++b) {
      const int stride = (stage > 0 && b == 0) ? 2 : 1;
      const std::string name = "layer" + std::to_string(stage + 1) + "." + std::to_string(b);
      model->add(nn::make_basic_block(model->context(), name, in, widths[stage], stride,
                                      nn::ShortcutKind::kPad, o.zero_init_residual));
      in = widths[stage];
    }
  }
  model->add<nn::Pool2d>("avgpool", nn::global_avg_pool());
  model->add<nn::Flatten>("flatten");
  model->add<nn::Linear>("fc", nn::LinearOptions{in, o.num_classes, true});
  model->build();
  return model;
}

}  // namespace sdp::models
