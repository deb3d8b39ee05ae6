// mlp: flatten -> [Linear -> ReLU (-> Dropout)] per hidden width -> Linear to the classes.
#include "core/error.hpp"
#include "models/builders.hpp"
#include "nn/dropout.hpp"
#include "nn/flatten.hpp"
#include "nn/linear.hpp"
#include "nn/relu.hpp"

namespace sdp::models {

std::unique_ptr<nn::Model> build_mlp(const ModelOptions& o) {
  auto model = std::make_unique<nn::Model>(o.name, Shape{o.in_channels, o.height, o.width},
                                           o.num_classes, o.seed, o.device);
  model->add<nn::Flatten>("flatten");
  int features = o.in_channels * o.height * o.width;
  for (std::size_t i = 0; i < o.hidden.size(); ++i) {
    if (o.hidden[i] < 1) throw InputError("model mlp: hidden widths must be positive");
    const std::string name = "fc" + std::to_string(i + 1);
    model->add<nn::Linear>(name, nn::LinearOptions{features, o.hidden[i], true});
    model->add<nn::ReLU>(name + ".relu");
    if (o.dropout > 0.0f) model->add<nn::Dropout>(name + ".dropout", o.dropout);
    features = o.hidden[i];
  }
  model->add<nn::Linear>("fc" + std::to_string(o.hidden.size() + 1),
                         nn::LinearOptions{features, o.num_classes, true});
  model->build();
  return model;
}

}  // namespace sdp::models
