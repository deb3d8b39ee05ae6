#include "nn/threads.hpp"

#include <omp.h>

#include <stdexcept>
#include <string>

namespace sdp::nn {

// oneDNN (Debian's build) and nn/'s own loops run on the same OpenMP runtime (libgomp), so
// one setting governs both.
void set_num_threads(int num_threads) {
  if (num_threads < 1)
    throw std::invalid_argument("set_num_threads: " + std::to_string(num_threads) + " < 1");
  omp_set_num_threads(num_threads);
}

int num_threads() {
  return omp_get_max_threads();
}

}  // namespace sdp::nn
