// The convolution algorithms a job measured (train.conv_algorithms: measured), as text: what
// keeps every rank and a resumed run on the same ones. cuDNN's timing can rank two algorithms
// in another order from one run to the next, and two algorithms give different bits, so a
// resumed run that measured again could leave the trajectory it resumes. Rank 0's choices go to
// the other ranks at start and into every checkpoint (nn/model.hpp: measured_conv_algorithms,
// use_measured_conv_algorithms); they hold only for the library and GPU that measured them.
// Device-neutral (no CUDA type): the CUDA convolution fills and reads them (conv2d_cuda.cpp).
//
// The text: a first line naming the library and GPU, then one line a shape,
//   cuDNN 91900 on NVIDIA H100 80GB HBM3
//   <shape key> = <forward> <backward filter> <backward data> <forward workspace> <backward workspace>
// the key everything the choice depends on (input sizes, filters, kernel, stride, padding, dtype,
// layout and the rules), the rest cuDNN's algorithm numbers and the workspace bytes they need.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace sdp::nn {

struct ConvAlgorithmChoice {
  int forward = 0, backward_filter = 0, backward_data = 0;
  uint64_t forward_workspace = 0, backward_workspace = 0;
  bool operator==(const ConvAlgorithmChoice& o) const {
    return forward == o.forward && backward_filter == o.backward_filter && backward_data == o.backward_data &&
           forward_workspace == o.forward_workspace && backward_workspace == o.backward_workspace;
  }
};

struct ConvAlgorithmChoices {
  std::string library;  // "cuDNN 91900 on NVIDIA H100 80GB HBM3": where the choices hold
  std::map<std::string, ConvAlgorithmChoice> by_shape;
};

std::string format_conv_algorithm_choices(const ConvAlgorithmChoices& choices);
// Throws InputError naming `what` (where the text came from) and the line when it is malformed.
ConvAlgorithmChoices parse_conv_algorithm_choices(const std::string& text, const std::string& what);

}  // namespace sdp::nn
