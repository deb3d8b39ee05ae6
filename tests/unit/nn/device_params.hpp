// Device-parametrized layer tests (Caffe's typed tests over {CPU, GPU}): a suite declared
// with SDP_DEVICE_TEST_SUITE(Name) runs each TEST_P(Name, ...) once per device of
// test_devices(), and the test body builds its layers for GetParam() through the factories.
// Today that is the CPU; the CUDA backend adds Device::cuda(0) when a GPU is present, so the
// same assertions (finite differences, golden values) check the CUDA twin of every layer.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/dtype.hpp"

namespace sdp::nn::testing {

inline std::vector<Device> test_devices() { return {Device::cpu()}; }

inline std::string device_param_name(const ::testing::TestParamInfo<Device>& info) {
  return info.param.is_cpu() ? "cpu" : "cuda" + std::to_string(info.param.index);
}

}  // namespace sdp::nn::testing

#define SDP_DEVICE_TEST_SUITE(Suite)                                                      \
  class Suite : public ::testing::TestWithParam<::sdp::Device> {};                      \
  INSTANTIATE_TEST_SUITE_P(Devices, Suite,                                               \
                           ::testing::ValuesIn(::sdp::nn::testing::test_devices()),     \
                           ::sdp::nn::testing::device_param_name)
