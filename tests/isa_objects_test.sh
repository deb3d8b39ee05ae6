#!/usr/bin/env bash
# The AVX2 and AVX-512 compilations of the *_isa.cpp files (core/cpu_dispatch.hpp) must define no
# symbol that another object could use instead of its own: an inline function or template a
# header brings, emitted out of line in an AVX2 object as a weak symbol, may be the copy the
# linker keeps for the whole program, and would then crash a baseline CPU (illegal
# instruction). Every symbol such an object defines must be its own ISA's namespace's.
#   isa_objects_test.sh OBJECT[:OBJECT...]   the library modules' object files (CTest passes them)
set -u
mapfile -t objects < <(tr ':' '\n' <<<"$1" | grep -E '_isa_cpp_avx(2|512)\.cpp\.o$' | sort)
[ ${#objects[@]} -gt 0 ] || { echo "FAIL: no ISA variant object among the modules' (the build makes *_isa_cpp_avx2.cpp.o)"; exit 1; }
bad=0
for o in "${objects[@]}"; do
  isa=avx2
  [[ $o == *_avx512.cpp.o ]] && isa=avx512
  # Defined symbols: their type and demangled name; local ones (lower-case types but weak
  # ones, u: unique global) are the object's own.
  while read -r type name; do
    case "$type" in
      [tdrbn]) continue ;;
    esac
    [[ $name == *"::isa_$isa::"* ]] && continue
    echo "FAIL: $(basename "$o") defines $type $name, outside namespace isa_$isa"
    bad=1
  done < <(nm -C --defined-only "$o" | awk '{ type = $2; $1 = ""; $2 = ""; sub(/^  /, ""); print type, $0 }')
done
[ $bad = 0 ] || exit 1
echo "PASS: ${#objects[@]} ISA variant objects define only their own namespace's symbols"
