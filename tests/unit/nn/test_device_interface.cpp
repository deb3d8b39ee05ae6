// The device-neutral layer interface: TensorDesc <-> backend layouts, the factories'
// device switch, and the contract that a layer's output matches what configure promised.
#include <gtest/gtest.h>

#include "core/device_info.hpp"
#include "core/error.hpp"
#include "device_params.hpp"
#include "grad_check.hpp"
#include "nn/conv2d.hpp"
#include "nn/model.hpp"
#include "nn/onednn.hpp"
#include "nn/flatten.hpp"
#include "nn/linear.hpp"
#include "nn/pool2d.hpp"
#include "nn/relu.hpp"
#include "nn/conv2d_cuda.hpp"
#include "nn/flatten_cuda.hpp"
#include "nn/linear_cuda.hpp"
#include "nn/relu_cuda.hpp"

namespace sdp::nn {
namespace {

TEST(OneDnnLayout, PlainAndChannelsLastAreDeviceNeutralBlockedIsOpaque) {
  const Dims d = {2, 6, 5, 5};
  const TensorDesc plain = to_tensor_desc(plain_md(d));
  EXPECT_EQ(plain.layout, Layout::kPlain);
  const TensorDesc nhwc = to_tensor_desc(memory::desc(d, memory::data_type::f32, memory::format_tag::acdb));
  EXPECT_EQ(nhwc.layout, Layout::kChannelsLast);
  const memory::desc blocked_md(d, memory::data_type::f32, memory::format_tag::nChw16c);
  const TensorDesc blocked = to_tensor_desc(blocked_md);
  ASSERT_EQ(blocked.layout, Layout::kBackend);
  EXPECT_EQ(blocked.shape, Shape(d.begin(), d.end()));
  // 6 channels padded to a block of 16: the buffer is larger than numel * 4.
  EXPECT_EQ(blocked.nbytes(), 2u * 16 * 5 * 5 * 4);
  EXPECT_TRUE(to_md(blocked) == blocked_md);
  EXPECT_TRUE(to_md(plain) == plain_md(d));
  EXPECT_FALSE(blocked == plain);
  EXPECT_TRUE(blocked == to_tensor_desc(blocked_md));
}

TEST(LayerFactory, RefusesADeviceWithoutAnImplementation) {
#ifdef SDP_HAVE_CUDA
  GTEST_SKIP() << "this build has the CUDA backend (LayerFactory.CudaContext* check it)";
#endif
  ParameterStore store;
  Context ctx(store);
  ctx.device = Device::cuda(0);  // no CUDA layers in this build
  try {
    Conv2d::create(ctx, "conv", Conv2dOptions{3, 8, 3, 1, 1, false, false});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Conv2d"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Context(store, Device::cuda(0)), Error);
}

TEST(LayerFactory, CudaContextWithoutAGpuIsAClearError) {
#ifndef SDP_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA backend";
#else
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  ParameterStore store;
  try {
    Context ctx(store, Device::cuda(0));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    // The CUDA runtime's reason, through the call that failed.
    EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
  }
#endif
}

TEST(LayerFactory, CudaContextGetsTheCudaTwins) {
#ifndef SDP_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA backend";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  ParameterStore store;
  Context ctx(store, Device::cuda(0));
  EXPECT_NE(dynamic_cast<ReLUCuda*>(ReLU::create(ctx, "relu").get()), nullptr);
  EXPECT_NE(dynamic_cast<FlattenCuda*>(Flatten::create(ctx, "flatten").get()), nullptr);
  EXPECT_NE(dynamic_cast<LinearCuda*>(Linear::create(ctx, "fc", LinearOptions{4, 2, true}).get()), nullptr);
#ifdef SDP_HAVE_CUDNN
  EXPECT_NE(dynamic_cast<Conv2dCuda*>(Conv2d::create(ctx, "conv", Conv2dOptions{3, 8, 3, 1, 1}).get()), nullptr);
#endif
#endif
}

TEST(Model, RejectsInputOnAnotherDevice) {
  Model m("tiny", {1, 4, 4}, 2);
  m.add<Flatten>("flatten");
  m.add<Linear>("fc", LinearOptions{16, 2, true});
  m.build();
  auto host = allocate_host(2 * 16 * 4);
  const Tensor x = Tensor::view_of(host, host.get(), {2, 1, 4, 4}, DType::kF32, Device::cuda(0));
  const int32_t labels[2] = {0, 1};
  EXPECT_THROW(m.forward(x, labels, true), InputError);
}

SDP_DEVICE_TEST_SUITE(LayerContract);

TEST_P(LayerContract, OutputsAreDescribedByConfigureAndLiveOnTheDevice) {
  testing::LayerHarness h(GetParam());
  h.make<Conv2d>(Conv2dOptions{3, 5, 3, 2, 1, true, true});
  h.configure({2, 3, 7, 7}, true);
  const TensorDesc out = h.layer_dst_desc();
  EXPECT_EQ(out.shape, (Shape{2, 5, 4, 4}));
  EXPECT_TRUE(out.device == GetParam());
  const TensorRef x = h.device_buffer(TensorDesc::plain({2, 3, 7, 7}, GetParam()));
  h.from_host(testing::random_vector(2 * 3 * 7 * 7, 5), x);
  const TensorRef& y = h.layer().forward(x);
  EXPECT_TRUE(y.desc == out) << y.desc.str() << " vs " << out.str();
  EXPECT_FALSE(y.empty());
}

}  // namespace
}  // namespace sdp::nn
