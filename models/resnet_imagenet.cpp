// ImageNet ResNets as in torchvision: conv7x7/2(64) -> BN -> ReLU -> maxpool3x3/2, four
// stages (64, 128, 256, 512 planes; stride 2 from stage 2 on), adaptive average pooling to
// 1x1, fc. Basic blocks for 18/34, bottlenecks (v1.5: stride on the 3x3) for 50;
// projection shortcuts ("downsample") where shapes change. Any input size that survives
// the five halvings works (32x32 included); the architecture does not change with it.
#include <stdexcept>

#include "models/builders.hpp"
#include "nn/batchnorm2d.hpp"
#include "nn/conv2d.hpp"
#include "nn/flatten.hpp"
#include "nn/linear.hpp"
#include "nn/pool2d.hpp"
#include "nn/residual_block.hpp"

namespace sdp::models {

std::unique_ptr<nn::Model> build_resnet_imagenet(const ModelOptions& o, int depth) {
  std::vector<int> blocks;
  bool bottleneck = false;
  switch (depth) {
    case 18:
      blocks = {2, 2, 2, 2};
      break;
    case 34:
      blocks = {3, 4, 6, 3};
      break;
    case 50:
      blocks = {3, 4, 6, 3};
      bottleneck = true;
      break;
    default:
      throw std::logic_error("unsupported ResNet depth " + std::to_string(depth));
  }
  const int expansion = bottleneck ? 4 : 1;
  auto model = std::make_unique<nn::Model>(o.name, Shape{o.in_channels, o.height, o.width},
                                           o.num_classes, o.seed, o.device);
  model->add<nn::Conv2d>("conv1", nn::Conv2dOptions{o.in_channels, 64, 7, 2, 3, false, false});
  model->add<nn::BatchNorm2d>("bn1", nn::BatchNorm2dOptions{64, 1e-5f, 0.1f, /*fuse_relu=*/true});
  model->add<nn::Pool2d>("maxpool", nn::max_pool(3, 2, 1));
  int in = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const int planes = 64 << stage;
    for (int b = 0; b < blocks[stage]; ++b) {
      const int stride = (stage > 0 && b == 0) ? 2 : 1;
      const std::string name = "layer" + std::to_string(stage + 1) + "." + std::to_string(b);
      if (bottleneck)
        model->add(nn::make_bottleneck_block(model->context(), name, in, planes, stride,
                                                  o.zero_init_residual));
      else
        model->add(nn::make_basic_block(model->context(), name, in, planes, stride,
                                        nn::ShortcutKind::kProjection, o.zero_init_residual));
      in = planes * expansion;
    }
  }
  model->add<nn::Pool2d>("avgpool", nn::global_avg_pool());
  model->add<nn::Flatten>("flatten");
  model->add<nn::Linear>("fc", nn::LinearOptions{in, o.num_classes, true});
  model->build();
  return model;
}

}  // namespace sdp::models
