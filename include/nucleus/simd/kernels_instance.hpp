// The one translation unit of a program built with NUCLEUS_EXTERN_KERNELS that compiles the kernels
// (simd/targets.hpp): include this header there, and nowhere else. Without NUCLEUS_EXTERN_KERNELS
// it is harmless: every unit compiles the kernels it uses, as usual.
#pragma once

#include "nucleus/simd/targets.hpp"

#define NUCLEUS_KERNELS_INSTANTIATE(ns)                                                              \
  template const nucleus::detail::kernel_table<float>& nucleus::detail::ns::table<float>() noexcept; \
  template const nucleus::detail::kernel_table<nucleus::bf16>&                                       \
  nucleus::detail::ns::table<nucleus::bf16>() noexcept;                                              \
  template const nucleus::detail::kernel_table<nucleus::f16>&                                        \
  nucleus::detail::ns::table<nucleus::f16>() noexcept;

// NUCLEUS_KERNELS_INSTANCE_ONLY=<n> (simd/isa.hpp's number of a target): only that target's tables
// in this unit, so that a build can compile the targets as units of their own, in parallel
// (cmake/NucleusKernels.cmake); the units together hold every table.
#if defined(NUCLEUS_KERNELS_INSTANCE_ONLY)
#define NUCLEUS_KERNELS_PART NUCLEUS_KERNELS_INSTANCE_ONLY
#else
#define NUCLEUS_KERNELS_PART (-1)
#endif
#if defined(NUCLEUS_HAVE_TARGET_3) && (NUCLEUS_KERNELS_PART < 0 || NUCLEUS_KERNELS_PART == 3)
NUCLEUS_KERNELS_INSTANTIATE(isa_avx512)
#endif
#if defined(NUCLEUS_HAVE_TARGET_2) && (NUCLEUS_KERNELS_PART < 0 || NUCLEUS_KERNELS_PART == 2)
NUCLEUS_KERNELS_INSTANTIATE(isa_avx2)
#endif
#if defined(NUCLEUS_HAVE_TARGET_1) && (NUCLEUS_KERNELS_PART < 0 || NUCLEUS_KERNELS_PART == 1)
NUCLEUS_KERNELS_INSTANTIATE(isa_sse2)
#endif
#if defined(NUCLEUS_HAVE_TARGET_4) && (NUCLEUS_KERNELS_PART < 0 || NUCLEUS_KERNELS_PART == 4)
NUCLEUS_KERNELS_INSTANTIATE(isa_neon)
#endif
#if defined(NUCLEUS_HAVE_TARGET_5) && (NUCLEUS_KERNELS_PART < 0 || NUCLEUS_KERNELS_PART == 5)
NUCLEUS_KERNELS_INSTANTIATE(isa_sve256)
#endif
#if defined(NUCLEUS_HAVE_TARGET_0) && (NUCLEUS_KERNELS_PART < 0 || NUCLEUS_KERNELS_PART == 0)
NUCLEUS_KERNELS_INSTANTIATE(isa_scalar)
#endif
#undef NUCLEUS_KERNELS_PART
#undef NUCLEUS_KERNELS_INSTANTIATE
