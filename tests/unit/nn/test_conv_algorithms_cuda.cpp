// train.conv_algorithms: measured on a GPU (nn/conv2d_cuda.hpp, export_measured_conv_algorithms):
// the convolutions time each shape once on their stream and share the choice, the choices export
// as text and a second model that takes them computes the same bits without timing (what rank 0
// gives the other ranks at start, and a checkpoint a resumed run); choices measured elsewhere are
// refused with the reason. Skipped without a GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "device_compare.hpp"
#include "grad_check.hpp"
#include "nn/conv_algorithm_choices.hpp"

namespace sdp::nn {
namespace {

std::unique_ptr<Model> measured_resnet() {
  auto m = testing::tiny_resnet(Device::cuda(0));
  ComputeRules rules;
  rules.measure_algorithms = true;  // deterministic algorithms only, as by default
  m->set_compute_rules(rules);
  return m;
}

// One training step of a fixed batch: the loss and the gradients.
std::pair<float, std::vector<float>> step(Model& m) {
  Tensor x({8, 3, 8, 8});
  testing::set_values(x, testing::random_vector(8 * 192, 31));
  std::vector<int32_t> labels = {0, 1, 2, 3, 4, 0, 1, 2};
  const float loss = m.forward(x, labels.data(), true);
  m.backward();
  return {loss, testing::host_values(m.store().grad_arena())};
}

TEST(MeasuredAlgorithmsOnGpu, ExportedAndTakenByAnotherModelForTheSameBits) {
  SKIP_WITHOUT_GPU();
  auto first = measured_resnet();
  const auto [loss, grads] = step(*first);
  const std::string text = first->measured_conv_algorithms();
  ASSERT_FALSE(text.empty()) << "the convolutions timed nothing";
  const ConvAlgorithmChoices choices = parse_conv_algorithm_choices(text, "the first model's");
  EXPECT_GE(choices.by_shape.size(), 3u) << text;  // the stem and the blocks' shapes, each once
  EXPECT_EQ(choices.library.rfind("cuDNN ", 0), 0u) << choices.library;

  auto second = measured_resnet();
  EXPECT_EQ(second->use_measured_conv_algorithms(text, "the first model's"), "");
  const auto [loss2, grads2] = step(*second);
  EXPECT_EQ(second->measured_conv_algorithms(), text) << "the second model timed something of its own";
  EXPECT_EQ(loss2, loss);
  EXPECT_EQ(grads2, grads) << "the same algorithms, not the same bits";

  ConvAlgorithmChoices elsewhere = choices;
  elsewhere.library = "cuDNN 80000 on another GPU";
  auto third = measured_resnet();
  const std::string why =
      third->use_measured_conv_algorithms(format_conv_algorithm_choices(elsewhere), "a checkpoint's");
  EXPECT_NE(why.find("they were measured with cuDNN 80000 on another GPU, this is cuDNN "), std::string::npos) << why;
  EXPECT_EQ(third->measured_conv_algorithms(), "") << "nothing taken, nothing timed yet";
}

}  // namespace
}  // namespace sdp::nn
