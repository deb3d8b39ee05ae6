#include "nn/threads.hpp"

#include <dlfcn.h>

#include <stdexcept>
#include <string>

namespace sdp::nn {

// oneDNN is built with OpenMP (libgomp), loaded as a dependency of libdnnl. sdp_nn does not
// link OpenMP itself, so resolve the OpenMP entry points from the loaded process image
// instead of linking them; this keeps the runtime that oneDNN uses the one we configure.
namespace {
template <typename Fn>
Fn omp_symbol(const char* name) {
  void* sym = dlsym(RTLD_DEFAULT, name);
  return reinterpret_cast<Fn>(sym);
}
}  // namespace

void set_num_threads(int num_threads) {
  if (num_threads < 1)
    throw std::invalid_argument("set_num_threads: " + std::to_string(num_threads) + " < 1");
  auto fn = omp_symbol<void (*)(int)>("omp_set_num_threads");
  if (fn == nullptr) throw std::runtime_error("set_num_threads: OpenMP runtime not loaded");
  fn(num_threads);
}

int num_threads() {
  auto fn = omp_symbol<int (*)()>("omp_get_max_threads");
  return fn ? fn() : 1;
}

}  // namespace sdp::nn
