// The exp floor: one pass of SLEEF's vectorized expf (u10, 1-ULP) plus a sum over the row, at the
// widest ISA the CPU has. Every sampler that needs probabilities evaluates exp over the row at least
// once, so this is the least such a sampler can cost, whatever its own code does.
//
// Compiled only where CMake found SLEEF (NUCLEUS_BENCH_HAVE_SLEEF); the kernels live in
// sleef_sum_exp_<isa>.cpp. On x86-64 each is built with its own ISA's flags and chosen here at run
// time; on aarch64 AdvSIMD is baseline, so its one kernel is chosen at compile time.
#pragma once

#include <cstddef>

#include "common.hpp"

namespace nucleus::bench {

#if defined(__aarch64__)
float sleef_sum_exp_advsimd(const float* x, std::size_t n, float shift) noexcept;

// The SLEEF expf every aarch64 CPU runs, named after the SLEEF function it calls. Its SVE expf
// (Sleef_expfx_u10sve) is left out as nucleus has no SVE target: the floor matches NEON's width.
inline exp_floor_kernel widest_sleef_exp_floor() noexcept {
  return {"Sleef_expf4_u10advsimd", sleef_sum_exp_advsimd};
}
#else
float sleef_sum_exp_sse2(const float* x, std::size_t n, float shift) noexcept;
float sleef_sum_exp_avx2(const float* x, std::size_t n, float shift) noexcept;
float sleef_sum_exp_avx512(const float* x, std::size_t n, float shift) noexcept;

// The widest SLEEF expf this CPU runs, named after the SLEEF function it calls.
inline exp_floor_kernel widest_sleef_exp_floor() noexcept {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return {"Sleef_expf16_u10avx512f", sleef_sum_exp_avx512};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return {"Sleef_expf8_u10avx2", sleef_sum_exp_avx2};
  return {"Sleef_expf4_u10sse2", sleef_sum_exp_sse2};
}
#endif

}  // namespace nucleus::bench
