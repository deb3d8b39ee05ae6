// Which vector instructions our own CPU kernels use, chosen once at run time.
//
// Why: the binary must run on any x86-64 (SageMaker images and Slurm clusters mix CPU
// generations), so it is compiled for the baseline; oneDNN picks its ISA at run time and so
// must the loops we write (the max pool, the optimizers' updates, the gradient checks and
// reductions, the CTR gathers). Each such loop lives in a file named *_isa.cpp, which the
// build compiles once per ISA below into its own namespace (isa_baseline, isa_avx2,
// isa_avx512; cmake: sdp_module), and the file's kernel table for the chosen ISA is taken
// through SDP_ISA_KERNEL_TABLE. This is PyTorch's CPU_CAPABILITY dispatch, with
// SDP_CPU_ISA in the role of ATEN_CPU_CAPABILITY.
//
// Results: every variant is compiled with -ffp-contract=off and without reassociation, so an
// element-wise kernel gives the same bits on every ISA (a job whose hosts have different CPUs
// keeps its replicas identical). A kernel that sums in vector lanes says so at its table.
#pragma once

#include <string>
#include <vector>

namespace sdp {

enum class CpuIsa {
  baseline,  // x86-64 as every such CPU has it (SSE2), or the plain build elsewhere
  avx2,      // AVX2, FMA and F16C: Haswell (2013) and later, every AMD Zen
  avx512,    // AVX-512 F, BW, DQ and VL: Skylake-SP (2017) and later Xeons, AMD Zen 4
};

inline constexpr CpuIsa kCpuIsas[] = {CpuIsa::baseline, CpuIsa::avx2, CpuIsa::avx512};

const char* cpu_isa_name(CpuIsa isa);  // "baseline", "avx2", "avx512"

// The widest of the ISAs above this CPU (and its operating system) supports.
CpuIsa detected_cpu_isa();
// Every ISA this CPU runs, the baseline first (the tests compare each with the baseline).
std::vector<CpuIsa> supported_cpu_isas();

// The ISA our kernels run: detected_cpu_isa(), or less when the environment variable
// SDP_CPU_ISA (baseline | avx2 | avx512) asks for less. Decided on the first call and fixed
// for the life of the process. A value that names no ISA, or one this CPU lacks, leaves the
// detected one: cpu_isa_override_error() says why, for the program to report at start.
CpuIsa cpu_kernel_isa();

// The error SDP_CPU_ISA makes, or "" when it is unset or valid.
std::string cpu_isa_override_error();

// "avx2 (detected avx2)", or "baseline (SDP_CPU_ISA; detected avx2)": for --version and the
// plan's math line.
std::string cpu_kernel_isa_summary();

// The table of `isa`: the variants of one *_isa.cpp file.
template <typename Table>
const Table& pick_isa(CpuIsa isa, const Table& baseline, const Table& avx2, const Table& avx512) {
  switch (isa) {
    case CpuIsa::avx512:
      return avx512;
    case CpuIsa::avx2:
      return avx2;
    case CpuIsa::baseline:
      break;
  }
  return baseline;
}

}  // namespace sdp

// Declares the table NAME of type TYPE that each ISA's compilation of an *_isa.cpp file
// defines in its namespace (SDP_ISA_NAMESPACE there), and NAME(isa) to get one: NAME() is the
// chosen ISA's, NAME(CpuIsa::baseline) the reference the tests compare the others with.
// Use it inside the module's namespace.
#define SDP_ISA_KERNEL_TABLE(TYPE, NAME)                                              \
  namespace isa_baseline {                                                            \
  extern const TYPE NAME;                                                             \
  }                                                                                   \
  namespace isa_avx2 {                                                                \
  extern const TYPE NAME;                                                             \
  }                                                                                   \
  namespace isa_avx512 {                                                              \
  extern const TYPE NAME;                                                             \
  }                                                                                   \
  inline const TYPE& NAME(::sdp::CpuIsa isa = ::sdp::cpu_kernel_isa()) {              \
    return ::sdp::pick_isa(isa, isa_baseline::NAME, isa_avx2::NAME, isa_avx512::NAME); \
  }

// In an *_isa.cpp file: the namespace of the ISA this compilation is for (the build defines
// it; an editor or a tool that compiles the file alone sees the baseline).
#ifndef SDP_ISA_NAMESPACE
#define SDP_ISA_NAMESPACE isa_baseline
#endif
