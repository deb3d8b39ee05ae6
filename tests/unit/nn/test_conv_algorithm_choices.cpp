// train.conv_algorithms: measured keeps every rank and a resumed run on the algorithms rank 0
// timed: their text (nn/conv_algorithm_choices.hpp) goes to the other ranks and into checkpoints,
// so it must read back exactly, and damaged text must be an error naming where it came from, never
// choices half taken. Model: the CPU has no algorithms to give and takes none (bad text is still
// bad). The GPU's side (the convolutions share, export and take them) is in
// test_conv_algorithms_cuda.cpp.
#include <gtest/gtest.h>

#include <string>

#include "core/error.hpp"
#include "device_compare.hpp"
#include "nn/conv_algorithm_choices.hpp"

namespace sdp::nn {
namespace {

ConvAlgorithmChoices two_shapes() {
  ConvAlgorithmChoices c;
  c.library = "cuDNN 91900 on NVIDIA H100 80GB HBM3";
  c.by_shape["256,64,56,56 k64 r3 s1 p1 f16 nhwc deterministic ws536870912"] = {1, 3, 1, 0, 4194304};
  c.by_shape["256,3,224,224 k64 r7 s2 p3 f16 nhwc deterministic ws536870912"] = {6, 1, 5, 123, 0};
  return c;
}

TEST(ConvAlgorithmChoices, ReadBackExactly) {
  const ConvAlgorithmChoices c = two_shapes();
  const std::string text = format_conv_algorithm_choices(c);
  EXPECT_EQ(text.substr(0, text.find('\n')), "cuDNN 91900 on NVIDIA H100 80GB HBM3");
  const ConvAlgorithmChoices back = parse_conv_algorithm_choices(text, "ckpt-5.safetensors: conv_algorithms");
  EXPECT_EQ(back.library, c.library);
  EXPECT_EQ(back.by_shape, c.by_shape);
  EXPECT_EQ(format_conv_algorithm_choices(back), text);
}

TEST(ConvAlgorithmChoices, DamagedTextNamesWhereAndWhichLine) {
  const std::string where = "ckpt-5.safetensors: conv_algorithms";
  const auto error_of = [&](const std::string& text) {
    try {
      parse_conv_algorithm_choices(text, where);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(error_of(""), where + ": empty");
  EXPECT_EQ(error_of("\n"), where + ": line 1: no library and GPU named ('')");
  EXPECT_EQ(error_of("cuDNN 1 on G\n256,64,56,56 k64 1 3 1 0 0\n"),
            where + ": line 2: not '<shape> = <algorithms>' ('256,64,56,56 k64 1 3 1 0 0')");
  EXPECT_EQ(error_of("cuDNN 1 on G\nshape = 1 3\n"),
            where + ": line 2: expected three algorithm numbers and two workspace sizes ('shape = 1 3')");
  EXPECT_EQ(error_of("cuDNN 1 on G\nshape = 1 3 1 0 0 7\n"),
            where + ": line 2: unexpected '7' ('shape = 1 3 1 0 0 7')");
  EXPECT_EQ(error_of("cuDNN 1 on G\nshape = 1 -3 1 0 0\n"),
            where + ": line 2: a negative algorithm number ('shape = 1 -3 1 0 0')");
  EXPECT_EQ(error_of("cuDNN 1 on G\nshape = 1 3 1 0 0\nshape = 2 3 1 0 0\n"),
            where + ": line 3: the shape twice ('shape = 2 3 1 0 0')");
}

TEST(ConvAlgorithmChoices, TheCpuModelHasNoneToGiveAndTakesNone) {
  auto m = testing::tiny_resnet(Device::cpu());
  EXPECT_EQ(m->measured_conv_algorithms(), "");
  EXPECT_EQ(m->use_measured_conv_algorithms(format_conv_algorithm_choices(two_shapes()), "rank 0's"), "");
  EXPECT_THROW(m->use_measured_conv_algorithms("cuDNN 1 on G\nbroken\n", "rank 0's"), InputError);
}

}  // namespace
}  // namespace sdp::nn
