// The floating-point mode of every thread that computes: denormal (subnormal) floats flushed
// to zero, or kept.
//
// Why: x86 and many ARM cores handle subnormal arithmetic in microcode, tens of times slower
// than normal numbers. Training makes them: Adam's and LAMB's second moments are squares of
// small gradients and decay below 1e-38, and LeNet-5 on MNIST then ran at 0.4x its own
// speed after its first epoch. Flushing them (FTZ: results, DAZ: inputs) changes only
// values under 1.2e-38, as TensorFlow's compute threads and PyTorch's
// set_flush_denormal(True) do. The job key numerics.flush_denormals picks it (default on).
//
// The mode is per thread (x86's MXCSR, AArch64's FPCR). It is set once where a thread
// starts, never per kernel: set_flush_denormals() applies it to the calling thread and to
// the OpenMP pool, and every thread the product starts is made by start_thread(), which
// applies it first. New threads on Linux also inherit it from the thread that makes them.
#pragma once

#include <functional>
#include <thread>
#include <utility>

namespace sdp {

// Sets the process's mode and applies it to the calling thread and to every thread of the
// OpenMP pool (oneDNN's and nn/'s compute threads). Call it before other threads start.
void set_flush_denormals(bool flush);
// The process's mode (true unless set_flush_denormals(false) was called).
bool flush_denormals();
// Applies the process's mode to the calling thread.
void apply_floating_point_mode();
// Whether the calling thread flushes denormals now (read back from the hardware); false on
// a processor this file does not know.
bool thread_flushes_denormals();

// A std::thread that runs `body(args...)` in the process's floating-point mode. The product
// makes every thread of its own with this (tests/check_module_boundaries.sh checks it).
template <typename Body, typename... Args>
std::thread start_thread(Body&& body, Args&&... args) {
  return std::thread(
      [](auto&& fn, auto&&... a) {
        apply_floating_point_mode();
        std::invoke(std::forward<decltype(fn)>(fn), std::forward<decltype(a)>(a)...);
      },
      std::forward<Body>(body), std::forward<Args>(args)...);
}

}  // namespace sdp
