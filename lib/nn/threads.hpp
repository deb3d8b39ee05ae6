// Thread count of the CPU compute engine (oneDNN's OpenMP pool). Call it before building a
// model: some oneDNN kernels fix their work split when their primitive is created.
#pragma once

namespace sdp::nn {

void set_num_threads(int num_threads);
int num_threads();

}  // namespace sdp::nn
