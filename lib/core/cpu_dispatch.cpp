#include "core/cpu_dispatch.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <cstdlib>
#include <cstring>

namespace sdp {

namespace {

constexpr const char* kOverrideVariable = "SDP_CPU_ISA";

// Whether the variable names an ISA; its value when it does.
bool parse_isa(const char* text, CpuIsa* isa) {
  for (CpuIsa candidate : kCpuIsas)
    if (std::strcmp(text, cpu_isa_name(candidate)) == 0) {
      *isa = candidate;
      return true;
    }
  return false;
}

// What SDP_CPU_ISA asks, one rule for both the choice and the error the program reports: the
// ISA to run (the detected one unless the variable asks for less) and why a value is refused.
struct Choice {
  CpuIsa isa;
  bool overridden;
  std::string error;
};

Choice choose() {
  const CpuIsa detected = detected_cpu_isa();
  const char* value = std::getenv(kOverrideVariable);
  if (value == nullptr || *value == '\0') return {detected, false, ""};
  CpuIsa asked;
  if (!parse_isa(value, &asked))
    return {detected, false,
            std::string(kOverrideVariable) + "='" + value + "' names no ISA: baseline, avx2 or avx512"};
  if (asked > detected)
    return {detected, false,
            std::string(kOverrideVariable) + "=" + value + ": this CPU supports " + cpu_isa_name(detected) +
                " at most"};
  return {asked, true, ""};
}

const Choice& choice() {
  static const Choice chosen = choose();
  return chosen;
}

}  // namespace

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::avx512:
      return "avx512";
    case CpuIsa::avx2:
      return "avx2";
    case CpuIsa::baseline:
      break;
  }
  return "baseline";
}

CpuIsa detected_cpu_isa() {
#if defined(__x86_64__) && defined(__GNUC__)
  // libgcc's check includes the operating system's: XCR0 must enable the vector state.
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    return CpuIsa::avx512;
  // clang 14's __builtin_cpu_supports knows no "f16c": CPUID leaf 1 says it (ECX bit 29), and
  // the YMM state it needs is the one the "avx2" check has found the OS enabling.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c)
    return CpuIsa::avx2;
#endif
  return CpuIsa::baseline;
}

std::vector<CpuIsa> supported_cpu_isas() {
  std::vector<CpuIsa> isas;
  for (CpuIsa isa : kCpuIsas)
    if (isa <= detected_cpu_isa()) isas.push_back(isa);
  return isas;
}

CpuIsa cpu_kernel_isa() {
  return choice().isa;
}

std::string cpu_isa_override_error() {
  return choose().error;  // read afresh: the environment may have changed since the choice
}

std::string cpu_kernel_isa_summary() {
  const Choice& c = choice();
  return std::string(cpu_isa_name(c.isa)) + (c.overridden ? " (SDP_CPU_ISA; detected " : " (detected ") +
         cpu_isa_name(detected_cpu_isa()) + ")";
}

}  // namespace sdp
