// Versions of the compute libraries the layers run on, for `sdp-train --version`:
// "9.19.0 (FILE)" (core/device_info.hpp, version_and_file); "" when this build does not
// have the library.
#pragma once

#include <string>

namespace sdp::nn {

std::string onednn_version();
std::string cudnn_version();
// cuBLAS is loaded on first use (cublas_on_demand_cuda.cpp, which defines this in a CUDA
// build): asking its version loads it.
std::string cublas_version();

}  // namespace sdp::nn
