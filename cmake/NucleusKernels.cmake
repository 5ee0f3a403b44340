# nucleus_kernels_library(NAME ROOT): a static library of every kernel of every target this processor
# compiles (simd/kernels_instance.hpp), one translation unit per target so that they compile in
# parallel: the SSE2 target alone is about half the kernels' code, and the whole, one unit under
# ASan or libFuzzer's instrumentation, took 260 to 420 s on one core. Programs that link it define
# NUCLEUS_EXTERN_KERNELS (PUBLIC here) and so do not compile the kernels themselves.
function(nucleus_kernels_library name root)
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64|i[3-6]86)$")
    set(parts 3 2 1 0)  # AVX-512, AVX2, SSE2, scalar (simd/isa.hpp's numbers)
  elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$")
    set(parts 5 4 0)  # SVE 256 (empty unless the build defines NUCLEUS_SVE256), NEON, scalar
  else()
    set(parts 0)
  endif()
  set(sources)
  foreach(p ${parts})
    set(src ${CMAKE_CURRENT_BINARY_DIR}/${name}/kernels_part_${p}.cpp)
    file(CONFIGURE OUTPUT ${src} CONTENT
         "#define NUCLEUS_KERNELS_INSTANCE_ONLY ${p}\n#include <nucleus/simd/kernels_instance.hpp>\n")
    list(APPEND sources ${src})
  endforeach()
  add_library(${name} STATIC ${sources})
  target_include_directories(${name} PUBLIC ${root}/include)
  target_compile_definitions(${name} PUBLIC NUCLEUS_EXTERN_KERNELS)
endfunction()
