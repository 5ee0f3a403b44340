// Runtime dispatch: every kernel (simd/pack.hpp, kernels/*.hpp) is compiled once per target inside
// that target's namespace, with the target's instructions enabled by pragma, so a consumer needs no
// -m flag; detail::kernels<T>() returns the table of the target chosen at first use (simd/isa.hpp).
// The wrappers at the end (detail::max_value, detail::exp_sum, ...) are what the rest of nucleus
// calls.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <type_traits>

#include "nucleus/core/logit_types.hpp"
#include "nucleus/simd/isa.hpp"
#include "nucleus/simd/scalar.hpp"

#if NUCLEUS_X86
#include <immintrin.h>
#endif
#if NUCLEUS_ARM64
#include <arm_neon.h>
#endif
#if NUCLEUS_SVE256_TARGET
#pragma GCC push_options
#pragma GCC target("+sve")
#include <arm_sve.h>
#pragma GCC pop_options
#endif

#if defined(__GNUC__) || defined(__clang__)
#define NUCLEUS_LAMBDA_INLINE __attribute__((always_inline))
#else
#define NUCLEUS_LAMBDA_INLINE
#endif

namespace nucleus::detail {

inline constexpr std::size_t block_elems = 1024;  // weight sums are kept per block to locate a draw
inline constexpr std::size_t hist_bins = 2048;    // top-p's mass histogram
// Compaction outputs need this many entries of room past the last one kept.
inline constexpr std::size_t compact_slack = 16;
// top-n-sigma's interleaved double sums: logit i adds into sum i % partial_sums.
inline constexpr std::size_t partial_sums = 8;

// Capacity of the candidate buffer top-k needs for a given k (the workspace's keys must hold it).
constexpr std::size_t select_capacity(std::size_t k) noexcept {
  return 2 * k + 1024;
}

// From this many keys on, select_top_k sorts its result by radix instead of std::sort.
inline constexpr std::size_t radix_sort_min = 2048;

// keys[0, n) in descending order (the keys are distinct: each holds its id), by an LSD radix sort on
// bytes: one pass counts every byte position, then a stable counting pass per byte, skipping the
// bytes every key shares (the high bytes of the ids, often the exponent's), with tmp[0, n) as scratch.
// Scalar, so compiled once, not per target. For the large k mirostat's estimate can ask for (most of a row),
// where std::sort's n log n compares cost several times more.
inline void radix_sort_desc(std::uint64_t* keys, std::size_t n, std::uint64_t* tmp) noexcept {
  std::size_t count[8][256] = {};
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t d = 0; d < 8; ++d) ++count[d][(keys[i] >> (8 * d)) & 0xFFu];
  std::uint64_t *src = keys, *dst = tmp;
  for (std::size_t d = 0; d < 8; ++d) {
    std::size_t* c = count[d];
    if (c[(src[0] >> (8 * d)) & 0xFFu] == n) continue;  // every key has this byte
    std::size_t at = 0;
    for (std::size_t b = 256; b-- > 0;) {  // the largest byte first: descending
      const std::size_t m = c[b];
      c[b] = at;
      at += m;
    }
    for (std::size_t i = 0; i < n; ++i) dst[c[(src[i] >> (8 * d)) & 0xFFu]++] = src[i];
    std::swap(src, dst);
  }
  if (src != keys) std::copy(src, src + n, keys);
}

struct argmax_result {
  float value;
  std::int64_t index;  // -1: no logit above -inf
};

// moment_sums (kernels/reduce.hpp): exact sums over a row.
struct moment_totals {
  wsum total = 0;     // sum of the weights w_i
  wsum weighted = 0;  // sum of w_i * trunc(-y_i * 2^40) (y_i <= 0; 0 where w_i is 0)
};

// One table per element type: the kernels of one target.
// typical's ring (kernels/reduce.hpp: cached_ring): scaled logits y in [in_lo, in_hi] are inside,
// those in [out_lo, out_hi] but not inside are the ring (a bound pair with lo > hi holds nothing).
struct ring_bounds {
  float out_lo, in_lo, in_hi, out_hi;
};

template <logit_type T>
struct kernel_table {
  float (*max_value)(const T*, std::size_t) noexcept;
  argmax_result (*argmax)(const T*, std::size_t) noexcept;
  std::size_t (*count_greater)(const T*, std::size_t, float) noexcept;
  wsum (*exp_sum)(const T*, std::size_t, float, float, std::uint64_t*) noexcept;
  void (*exp_store)(const T*, std::size_t, float, float, float*) noexcept;
  std::int64_t (*pick)(const T*, std::size_t, float, float, const std::uint64_t*, wsum, float*) noexcept;
  std::size_t (*compact_ge)(const T*, const std::int32_t*, std::size_t, float, float, float, float*,
                            std::int32_t*) noexcept;
  std::size_t (*select_top_k)(const T*, const std::int32_t*, std::size_t, std::size_t, std::uint64_t*,
                              bool*) noexcept;
  std::size_t (*collect_ties)(const T*, const std::int32_t*, std::size_t, float, std::uint64_t,
                              std::uint64_t*, std::size_t, std::size_t) noexcept;
  std::size_t (*collect_bin)(const T*, const std::int32_t*, std::size_t, float, float, float, float, float,
                             std::uint64_t*) noexcept;
  void (*masked_widen)(const T*, std::size_t, const std::uint32_t*, float*) noexcept;
  void (*log_softmax_store)(const T*, std::size_t, float, float, float*) noexcept;
  moment_totals (*moment_sums)(const T*, std::size_t, float, float, float*) noexcept;
  std::size_t (*mass_histogram)(const T*, std::size_t, float, float, float, std::uint32_t, wsum*) noexcept;
  std::size_t (*candidate_sums)(const T*, std::size_t, double*) noexcept;
  void (*candidate_squares)(const T*, std::size_t, double, double*) noexcept;
  wsum (*exp_sum_in)(const T*, std::size_t, float, float, float, float, std::uint64_t*) noexcept;
  std::int64_t (*pick_in)(const T*, std::size_t, float, float, float, float, const std::uint64_t*, wsum,
                          float*) noexcept;
  wsum (*exp_sum_store)(const T*, std::size_t, float, float, float*) noexcept;
  wsum (*cached_sum_in)(const T*, const float*, std::size_t, float, float, std::uint64_t*) noexcept;
  std::int64_t (*cached_pick_in)(const T*, const float*, std::size_t, float, float, const std::uint64_t*,
                                 wsum) noexcept;
  std::size_t (*cached_band)(const T*, const float*, std::size_t, float, float, float, float, float,
                             std::uint64_t*, std::size_t, wsum*, std::uint64_t*) noexcept;
  std::size_t (*cached_ring)(const T*, const float*, std::size_t, float, float, const ring_bounds&,
                             std::uint64_t*, std::size_t, wsum*, std::uint64_t*) noexcept;
  std::size_t (*compact_ge_running)(const T*, std::size_t, float, float, float*, std::int32_t*,
                                    float*) noexcept;
};

}  // namespace nucleus::detail

// NUCLEUS_TARGET_BODY(ns): the table of a target's kernels, compiled inside nucleus::detail::ns. It
// is a function template, not a variable, so that NUCLEUS_EXTERN_KERNELS can keep its instantiation
// (and with it every kernel of that target) out of a translation unit.
#define NUCLEUS_TARGET_BODY(ns)                                                              \
  namespace nucleus::detail::ns {                                                            \
  template <logit_type T>                                                                    \
  const kernel_table<T>& table() noexcept {                                                  \
    static constexpr kernel_table<T> t{                                                      \
        &max_value<T>,      &argmax<T>,         &count_greater<T>,  &exp_sum<T>,             \
        &exp_store<T>,      &pick<T>,           &compact_ge<T>,     &select_top_k<T>,        \
        &collect_ties<T>,   &collect_bin<T>,    &masked_widen<T>,   &log_softmax_store<T>,   \
        &moment_sums<T>,    &mass_histogram<T>, &candidate_sums<T>, &candidate_squares<T>,   \
        &exp_sum_in<T>,     &pick_in<T>,        &exp_sum_store<T>,  &cached_sum_in<T>,       \
        &cached_pick_in<T>, &cached_band<T>,    &cached_ring<T>,    &compact_ge_running<T>}; \
    return t;                                                                                \
  }                                                                                          \
  NUCLEUS_KERNELS_EXTERN_DECLARATIONS                                                        \
  }

// Compile time: every translation unit that samples compiles each target's kernels for each element
// type it uses. A program with many such units may compile them once: define NUCLEUS_EXTERN_KERNELS
// in every unit and include <nucleus/simd/kernels_instance.hpp> in exactly one (the same bits either
// way; only where the kernels' code is emitted changes). The project's own tests build this way.
#if defined(NUCLEUS_EXTERN_KERNELS)
#define NUCLEUS_KERNELS_EXTERN_DECLARATIONS                           \
  extern template const kernel_table<float>& table<float>() noexcept; \
  extern template const kernel_table<bf16>& table<bf16>() noexcept;   \
  extern template const kernel_table<f16>& table<f16>() noexcept;
#else
#define NUCLEUS_KERNELS_EXTERN_DECLARATIONS
#endif

#define NUCLEUS_TARGET_STR(x) #x
#if defined(__clang__)
#define NUCLEUS_TARGET_PUSH(spec) \
  _Pragma(NUCLEUS_TARGET_STR(clang attribute push(__attribute__((target(spec))), apply_to = function)))
#define NUCLEUS_TARGET_POP _Pragma("clang attribute pop")
#else
#define NUCLEUS_TARGET_PUSH(spec) _Pragma("GCC push_options") _Pragma(NUCLEUS_TARGET_STR(GCC target(spec)))
#define NUCLEUS_TARGET_POP _Pragma("GCC pop_options")
#endif

// --- AVX-512 ------------------------------------------------------------------------------------
#if NUCLEUS_X86 && (!defined(NUCLEUS_ISA_ONLY) || NUCLEUS_ISA_ONLY == 3)
#define NUCLEUS_HAVE_TARGET_3 1
#define NUCLEUS_TARGET_ISA 3
NUCLEUS_TARGET_PUSH("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt")
namespace nucleus::detail::isa_avx512 {
#include "nucleus/simd/target_body.hpp"
}  // namespace nucleus::detail::isa_avx512
NUCLEUS_TARGET_BODY(isa_avx512)
NUCLEUS_TARGET_POP
#undef NUCLEUS_TARGET_ISA
#endif

// --- AVX2 + FMA + F16C --------------------------------------------------------------------------
#if NUCLEUS_X86 && (!defined(NUCLEUS_ISA_ONLY) || NUCLEUS_ISA_ONLY == 2)
#define NUCLEUS_HAVE_TARGET_2 1
#define NUCLEUS_TARGET_ISA 2
NUCLEUS_TARGET_PUSH("avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt")
namespace nucleus::detail::isa_avx2 {
#include "nucleus/simd/target_body.hpp"
}  // namespace nucleus::detail::isa_avx2
NUCLEUS_TARGET_BODY(isa_avx2)
NUCLEUS_TARGET_POP
#undef NUCLEUS_TARGET_ISA
#endif

// --- SSE2: the x86-64 baseline, no pragma needed ------------------------------------------------
#if NUCLEUS_X86 && (!defined(NUCLEUS_ISA_ONLY) || NUCLEUS_ISA_ONLY == 1)
#define NUCLEUS_HAVE_TARGET_1 1
#define NUCLEUS_TARGET_ISA 1
namespace nucleus::detail::isa_sse2 {
#include "nucleus/simd/target_body.hpp"
}  // namespace nucleus::detail::isa_sse2
NUCLEUS_TARGET_BODY(isa_sse2)
#undef NUCLEUS_TARGET_ISA
#endif

// --- NEON (AdvSIMD): the aarch64 baseline, no pragma needed --------------------------------------
#if NUCLEUS_ARM64 && (!defined(NUCLEUS_ISA_ONLY) || NUCLEUS_ISA_ONLY == 4)
#define NUCLEUS_HAVE_TARGET_4 1
#define NUCLEUS_TARGET_ISA 4
namespace nucleus::detail::isa_neon {
#include "nucleus/simd/target_body.hpp"
}  // namespace nucleus::detail::isa_neon
NUCLEUS_TARGET_BODY(isa_neon)
#undef NUCLEUS_TARGET_ISA
#endif

// --- SVE, 256-bit vectors (opt-in: NUCLEUS_SVE256 and -msve-vector-bits=256; simd/isa.hpp) ---------
#if NUCLEUS_SVE256_TARGET
#define NUCLEUS_HAVE_TARGET_5 1
#define NUCLEUS_TARGET_ISA 5
NUCLEUS_TARGET_PUSH("+sve")
namespace nucleus::detail::isa_sve256 {
#include "nucleus/simd/target_body.hpp"
}  // namespace nucleus::detail::isa_sve256
NUCLEUS_TARGET_BODY(isa_sve256)
NUCLEUS_TARGET_POP
#undef NUCLEUS_TARGET_ISA
#endif

// --- scalar: every platform -----------------------------------------------------------------------
#if !defined(NUCLEUS_ISA_ONLY) || NUCLEUS_ISA_ONLY == 0
#define NUCLEUS_HAVE_TARGET_0 1
#define NUCLEUS_TARGET_ISA 0
namespace nucleus::detail::isa_scalar {
#include "nucleus/simd/target_body.hpp"
}  // namespace nucleus::detail::isa_scalar
NUCLEUS_TARGET_BODY(isa_scalar)
#undef NUCLEUS_TARGET_ISA
#endif

namespace nucleus::detail {

template <logit_type T>
const kernel_table<T>& kernels() noexcept {
  switch (active_isa()) {
#if defined(NUCLEUS_HAVE_TARGET_3)
    case isa::avx512:
      return isa_avx512::table<T>();
#endif
#if defined(NUCLEUS_HAVE_TARGET_2)
    case isa::avx2:
      return isa_avx2::table<T>();
#endif
#if defined(NUCLEUS_HAVE_TARGET_1)
    case isa::sse2:
      return isa_sse2::table<T>();
#endif
#if defined(NUCLEUS_HAVE_TARGET_4)
    case isa::neon:
      return isa_neon::table<T>();
#endif
#if defined(NUCLEUS_HAVE_TARGET_5)
    case isa::sve256:
      return isa_sve256::table<T>();
#endif
    default:
#if defined(NUCLEUS_HAVE_TARGET_0)
      return isa_scalar::table<T>();
#elif NUCLEUS_ISA_ONLY == 1
      return isa_sse2::table<T>();
#elif NUCLEUS_ISA_ONLY == 2
      return isa_avx2::table<T>();
#elif NUCLEUS_ISA_ONLY == 4
      return isa_neon::table<T>();
#elif NUCLEUS_ISA_ONLY == 5
      return isa_sve256::table<T>();
#else
      return isa_avx512::table<T>();
#endif
  }
}

// The kernels, on the active target. See kernels/*.hpp for what each does.
template <logit_type T>
float max_value(const T* x, std::size_t n) noexcept {
  return kernels<T>().max_value(x, n);
}
template <logit_type T>
argmax_result argmax(const T* x, std::size_t n) noexcept {
  return kernels<T>().argmax(x, n);
}
template <logit_type T>
std::size_t count_greater(const T* x, std::size_t n, float v) noexcept {
  return kernels<T>().count_greater(x, n, v);
}
template <logit_type T>
wsum exp_sum(const T* x, std::size_t n, float shift, float scale, std::uint64_t* blocks) noexcept {
  return kernels<T>().exp_sum(x, n, shift, scale, blocks);
}
template <logit_type T>
wsum exp_sum_in(const T* x, std::size_t n, float shift, float scale, float lo, float hi,
                std::uint64_t* blocks) noexcept {
  return kernels<T>().exp_sum_in(x, n, shift, scale, lo, hi, blocks);
}
template <logit_type T>
wsum exp_sum_store(const T* x, std::size_t n, float shift, float scale, float* out) noexcept {
  return kernels<T>().exp_sum_store(x, n, shift, scale, out);
}
template <logit_type T>
wsum cached_sum_in(const T* x, const float* e, std::size_t n, float lo, float hi,
                   std::uint64_t* blocks) noexcept {
  return kernels<T>().cached_sum_in(x, e, n, lo, hi, blocks);
}
template <logit_type T>
std::int64_t cached_pick_in(const T* x, const float* e, std::size_t n, float lo, float hi,
                            const std::uint64_t* blocks, wsum point) noexcept {
  return kernels<T>().cached_pick_in(x, e, n, lo, hi, blocks, point);
}
template <logit_type T>
std::size_t cached_band(const T* x, const float* e, std::size_t n, float shift, float scale, float unit,
                        float lo, float hi, std::uint64_t* keys, std::size_t cap, wsum* before,
                        std::uint64_t* blocks = nullptr) noexcept {
  return kernels<T>().cached_band(x, e, n, shift, scale, unit, lo, hi, keys, cap, before, blocks);
}
template <logit_type T>
std::size_t cached_ring(const T* x, const float* e, std::size_t n, float shift, float scale,
                        const ring_bounds& r, std::uint64_t* members, std::size_t cap, wsum* inside,
                        std::uint64_t* blocks) noexcept {
  return kernels<T>().cached_ring(x, e, n, shift, scale, r, members, cap, inside, blocks);
}
template <logit_type T>
void exp_store(const T* x, std::size_t n, float shift, float scale, float* out) noexcept {
  kernels<T>().exp_store(x, n, shift, scale, out);
}
template <logit_type T>
moment_totals moment_sums(const T* x, std::size_t n, float shift, float scale, float* out) noexcept {
  return kernels<T>().moment_sums(x, n, shift, scale, out);
}
template <logit_type T>
std::size_t mass_histogram(const T* x, std::size_t n, float shift, float scale, float unit,
                           std::uint32_t lump, wsum* mass) noexcept {
  return kernels<T>().mass_histogram(x, n, shift, scale, unit, lump, mass);
}
template <logit_type T>
std::size_t candidate_sums(const T* x, std::size_t n, double* sums) noexcept {
  return kernels<T>().candidate_sums(x, n, sums);
}
template <logit_type T>
void candidate_squares(const T* x, std::size_t n, double center, double* sums) noexcept {
  kernels<T>().candidate_squares(x, n, center, sums);
}
template <logit_type T>
std::int64_t pick(const T* x, std::size_t n, float shift, float scale, const std::uint64_t* blocks,
                  wsum point, float* scratch) noexcept {
  return kernels<T>().pick(x, n, shift, scale, blocks, point, scratch);
}
template <logit_type T>
std::int64_t pick_in(const T* x, std::size_t n, float shift, float scale, float lo, float hi,
                     const std::uint64_t* blocks, wsum point, float* scratch) noexcept {
  return kernels<T>().pick_in(x, n, shift, scale, lo, hi, blocks, point, scratch);
}
template <logit_type T>
std::size_t compact_ge(const T* x, const std::int32_t* ids, std::size_t n, float shift, float scale,
                       float threshold, float* vals_out, std::int32_t* ids_out) noexcept {
  return kernels<T>().compact_ge(x, ids, n, shift, scale, threshold, vals_out, ids_out);
}
template <logit_type T>
std::size_t compact_ge_running(const T* x, std::size_t n, float scale, float threshold, float* vals_out,
                               std::int32_t* ids_out, float* max_out) noexcept {
  return kernels<T>().compact_ge_running(x, n, scale, threshold, vals_out, ids_out, max_out);
}
template <logit_type T>
std::size_t select_top_k(const T* x, const std::int32_t* ids, std::size_t n, std::size_t k,
                         std::uint64_t* keys, bool* ties_out = nullptr) noexcept {
  return kernels<T>().select_top_k(x, ids, n, k, keys, ties_out);
}
template <logit_type T>
std::size_t collect_ties(const T* x, const std::int32_t* ids, std::size_t n, float v, std::uint64_t after,
                         std::uint64_t* keys, std::size_t m, std::size_t cap) noexcept {
  return kernels<T>().collect_ties(x, ids, n, v, after, keys, m, cap);
}
template <logit_type T>
std::size_t collect_bin(const T* x, const std::int32_t* ids, std::size_t n, float shift, float scale,
                        float unit, float lo, float hi, std::uint64_t* keys) noexcept {
  return kernels<T>().collect_bin(x, ids, n, shift, scale, unit, lo, hi, keys);
}
template <logit_type T>
void masked_widen(const T* x, std::size_t n, const std::uint32_t* mask, float* out) noexcept {
  kernels<T>().masked_widen(x, n, mask, out);
}

template <logit_type T>
void log_softmax_store(const T* x, std::size_t n, float max, float lse, float* out) noexcept {
  kernels<T>().log_softmax_store(x, n, max, lse, out);
}

}  // namespace nucleus::detail
