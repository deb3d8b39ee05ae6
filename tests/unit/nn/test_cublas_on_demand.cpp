// cuBLAS is loaded when LinearCuda first needs it, not at start (nn/cublas_on_demand_cuda.cpp):
// a CPU run of a CUDA build must not carry libcublasLt's ~90 MB. Runs without a GPU.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#ifdef SDP_HAVE_CUDA
#include <cublas_v2.h>
#endif

namespace {

bool cublas_mapped() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.find("libcublas") != std::string::npos) return true;
  return false;
}

TEST(CublasOnDemand, NotLoadedAtStartThenLoadedOnFirstUse) {
#ifndef SDP_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA backend";
#else
  if (!std::ifstream("/proc/self/maps")) GTEST_SKIP() << "no /proc/self/maps";
  EXPECT_FALSE(cublas_mapped()) << "libcublas is mapped before any cuBLAS call";
  // A call that needs no GPU: the shim loads the library and forwards to it.
  const std::string text = cublasGetStatusString(CUBLAS_STATUS_SUCCESS);
  EXPECT_FALSE(text.empty());
  EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_NOT_INITIALIZED), "CUBLAS_STATUS_NOT_INITIALIZED");
  EXPECT_TRUE(cublas_mapped());
#endif
}

}  // namespace
