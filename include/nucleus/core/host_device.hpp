// NUCLEUS_HD marks the arithmetic that carries a draw's bits (simd/scalar.hpp, core/draw_key.hpp, the
// dtype widening in core/logit_types.hpp) as callable from CUDA device code when nvcc compiles it, so
// the CPU kernels and the GPU sampler (nucleus/cuda/) share one definition. Plain C++ compilers see
// nothing: the macro is empty and every host path is the code it always was.
#pragma once

#include <bit>
#include <cstdint>

#if defined(__CUDACC__)
#define NUCLEUS_HD __host__ __device__
#else
#define NUCLEUS_HD
#endif

namespace nucleus::detail {

// std::bit_cast is a host function to nvcc; the builtin it wraps is the same operation on both sides.
NUCLEUS_HD constexpr float float_from_bits(std::uint32_t u) noexcept {
#if defined(__CUDA_ARCH__)
  return __builtin_bit_cast(float, u);
#else
  return std::bit_cast<float>(u);
#endif
}
NUCLEUS_HD constexpr std::uint32_t bits_of(float f) noexcept {
#if defined(__CUDA_ARCH__)
  return __builtin_bit_cast(std::uint32_t, f);
#else
  return std::bit_cast<std::uint32_t>(f);
#endif
}

}  // namespace nucleus::detail
