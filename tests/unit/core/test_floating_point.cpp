// numerics.flush_denormals: a subnormal input becomes 0 in every kind of thread that
// computes when the mode is on, and stays subnormal when it is off.
#include "core/floating_point.hpp"

#include <gtest/gtest.h>
#include <omp.h>

#include <cfloat>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace sdp {
namespace {

// 1e-39 * 1: the input is subnormal (below FLT_MIN, 1.2e-38), the result too unless the
// thread treats denormal inputs as zero (DAZ) or flushes results (FTZ).
float subnormal_times_one() {
  volatile float tiny = 1e-39f;  // volatile: computed at run time, in this thread's mode
  volatile float one = 1.0f;
  return tiny * one;
}

class FloatingPointMode : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { set_flush_denormals(GetParam()); }
  void TearDown() override { set_flush_denormals(true); }  // the product's default
  float expected() const { return GetParam() ? 0.0f : 1e-39f; }
};

TEST_P(FloatingPointMode, MainThread) {
  EXPECT_EQ(flush_denormals(), GetParam());
  EXPECT_EQ(thread_flushes_denormals(), GetParam());
  EXPECT_EQ(subnormal_times_one(), expected());
}

TEST_P(FloatingPointMode, EveryOpenMpPoolThread) {
  // Set again with a team of 2 (ctest runs units with OMP_NUM_THREADS=1): the pool's threads.
  const int before = omp_get_max_threads();
  omp_set_num_threads(2);
  set_flush_denormals(GetParam());
  std::vector<float> results(2, -1.0f);
  std::vector<int> modes(2, -1);
#pragma omp parallel num_threads(2)
  {
    const int t = omp_get_thread_num();
    results[t] = subnormal_times_one();
    modes[t] = thread_flushes_denormals() ? 1 : 0;
  }
  omp_set_num_threads(before);
  for (int t = 0; t < 2; ++t) {
    EXPECT_EQ(results[t], expected()) << "OpenMP thread " << t;
    EXPECT_EQ(modes[t], GetParam() ? 1 : 0) << "OpenMP thread " << t;
  }
}

TEST_P(FloatingPointMode, StartedThreadFollowsTheModeNotItsParent) {
#if defined(__x86_64__) || defined(__i386__)
  // The parent thread is put in the opposite mode (MXCSR FTZ|DAZ) behind the process's back:
  // a thread it starts inherits that, and start_thread must set the process's mode instead.
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(GetParam() ? (csr & ~0x8040u) : (csr | 0x8040u));
  ASSERT_EQ(thread_flushes_denormals(), !GetParam());
#endif
  float result = -1.0f;
  bool mode = !GetParam();
  {
    std::thread worker = start_thread([&] {
      result = subnormal_times_one();
      mode = thread_flushes_denormals();
    });
    worker.join();
  }
#if defined(__x86_64__) || defined(__i386__)
  _mm_setcsr(csr);
#endif
  EXPECT_EQ(result, expected());
  EXPECT_EQ(mode, GetParam());
}

INSTANTIATE_TEST_SUITE_P(FlushOnAndOff, FloatingPointMode, ::testing::Bool(),
                         [](const auto& info) { return info.param ? std::string("flush") : std::string("keep"); });

}  // namespace
}  // namespace sdp
