// Device-parametrized layer tests (Caffe's typed tests over {CPU, GPU}): a suite declared
// with SDP_DEVICE_TEST_SUITE(Name) runs each TEST_P(Name, ...) once per device of
// test_devices(), and the test body builds its layers for GetParam() through the factories.
// That is the CPU and, in a build with the CUDA backend, Device::cuda(0): the same assertions
// (finite differences, golden values) check the CUDA twin of every layer. Without a GPU the
// cuda instantiations skip at run time with "no CUDA device", so the count of what did not
// run shows in every test report.
#pragma once

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "core/device_info.hpp"
#include "core/dtype.hpp"

namespace sdp::nn::testing {

inline std::vector<Device> test_devices() {
#ifdef SDP_HAVE_CUDA
  return {Device::cpu(), Device::cuda(0)};
#else
  return {Device::cpu()};
#endif
}

// True when `device` can run here; a CUDA device needs a GPU (and a driver).
inline bool device_available(const Device& device) {
  return device.is_cpu() || cuda_device_count() > 0;
}

inline std::string device_param_name(const ::testing::TestParamInfo<Device>& info) {
  return info.param.is_cpu() ? "cpu" : "cuda" + std::to_string(info.param.index);
}

}  // namespace sdp::nn::testing

#define SDP_DEVICE_TEST_SUITE(Suite)                                                      \
  class Suite : public ::testing::TestWithParam<::sdp::Device> {                        \
   protected:                                                                            \
    void SetUp() override {                                                              \
      if (!::sdp::nn::testing::device_available(GetParam())) GTEST_SKIP() << "no CUDA device"; \
    }                                                                                    \
  };                                                                                     \
  INSTANTIATE_TEST_SUITE_P(Devices, Suite,                                               \
                           ::testing::ValuesIn(::sdp::nn::testing::test_devices()),     \
                           ::sdp::nn::testing::device_param_name)

namespace sdp {
// Test names and failure messages print "cpu" / "cuda:0" instead of the Device's bytes.
inline void PrintTo(const Device& device, std::ostream* os) { *os << device.str(); }
}  // namespace sdp
