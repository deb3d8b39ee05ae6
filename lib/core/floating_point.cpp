#include "core/floating_point.hpp"

#include <omp.h>

#include <atomic>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace sdp {

namespace {

std::atomic<bool> g_flush{true};

#if defined(__x86_64__) || defined(__i386__)
constexpr unsigned kFtz = 0x8000;  // MXCSR bit 15: flush results to zero
constexpr unsigned kDaz = 0x0040;  // MXCSR bit 6: treat denormal inputs as zero
void set_thread_mode(bool flush) {
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(flush ? (csr | kFtz | kDaz) : (csr & ~(kFtz | kDaz)));
}
bool thread_mode() { return (_mm_getcsr() & (kFtz | kDaz)) == (kFtz | kDaz); }
#elif defined(__aarch64__)
constexpr uint64_t kFz = uint64_t{1} << 24;  // FPCR.FZ: flush inputs and results to zero
uint64_t read_fpcr() {
  uint64_t fpcr;
  __asm__ __volatile__("mrs %0, fpcr" : "=r"(fpcr));
  return fpcr;
}
void set_thread_mode(bool flush) {
  const uint64_t fpcr = flush ? (read_fpcr() | kFz) : (read_fpcr() & ~kFz);
  __asm__ __volatile__("msr fpcr, %0" : : "r"(fpcr));
}
bool thread_mode() { return (read_fpcr() & kFz) != 0; }
#else
void set_thread_mode(bool) {}
bool thread_mode() { return false; }
#endif

}  // namespace

void set_flush_denormals(bool flush) {
  g_flush.store(flush);
  set_thread_mode(flush);
  // Every thread of the pool, as many as a parallel region may use now; later pool threads
  // are made by these or the caller and inherit the mode.
#pragma omp parallel num_threads(omp_get_max_threads())
  set_thread_mode(flush);
}

bool flush_denormals() {
  return g_flush.load();
}

void apply_floating_point_mode() {
  set_thread_mode(g_flush.load());
}

bool thread_flushes_denormals() {
  return thread_mode();
}

}  // namespace sdp
