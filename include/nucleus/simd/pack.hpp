// A fixed-width pack of 64 float lanes: the unit every nucleus kernel works in.
//
// Reductions accumulate per lane and fold lanes in one fixed order, so a result never depends on the
// register width: AVX-512 holds the pack in 4 registers, AVX2 in 8, SSE in 16, and the scalar fallback
// (NUCLEUS_NO_SIMD) in a plain array, and all of them produce the same bits.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "nucleus/core/logit_types.hpp"

#if !defined(NUCLEUS_NO_SIMD)
#include <xsimd/xsimd.hpp>
#endif

#if defined(__GNUC__) || defined(__clang__)
#define NUCLEUS_INLINE [[gnu::always_inline]] inline
#define NUCLEUS_LAMBDA_INLINE __attribute__((always_inline))
#else
#define NUCLEUS_INLINE inline
#define NUCLEUS_LAMBDA_INLINE
#endif

namespace nucleus::detail {

inline constexpr std::size_t lanes = 64;

#if defined(__FMA__) || defined(__AVX512F__) || defined(__ARM_FEATURE_FMA)
inline constexpr bool has_fma = true;
#else
inline constexpr bool has_fma = false;
#endif

// a*b+c exactly as the pack computes it: fused where the hardware fuses, two roundings elsewhere.
NUCLEUS_INLINE float madd(float a, float b, float c) noexcept {
  if constexpr (has_fma) return std::fma(a, b, c);
  return a * b + c;
}

NUCLEUS_INLINE float inf() noexcept {
  return std::numeric_limits<float>::infinity();
}

#if !defined(NUCLEUS_NO_SIMD)

inline constexpr bool simd_enabled = true;
using native = xsimd::batch<float>;
using native_i = xsimd::batch<std::int32_t>;
using native_b = xsimd::batch_bool<float>;
inline constexpr std::size_t width = native::size;
inline constexpr std::size_t regs = lanes / width;
static_assert(lanes % width == 0, "nucleus: the pack must hold a whole number of registers");

struct fpack {
  native r[regs];
};
struct ipack {
  native_i r[regs];
};
struct mpack {
  native_b r[regs];
};

// xsimd 8.1 has no batch_bool::mask(): read the register's lanes as bits here, in one place.
NUCLEUS_INLINE std::uint32_t register_bits(const native_b& b) noexcept {
#if defined(__AVX512F__)
  return static_cast<std::uint32_t>(static_cast<__mmask16>(b));
#elif defined(__AVX__)
  return static_cast<std::uint32_t>(_mm256_movemask_ps(b));
#elif defined(__SSE2__)
  return static_cast<std::uint32_t>(_mm_movemask_ps(b));
#else
  alignas(64) bool t[width];
  b.store_aligned(t);
  std::uint32_t bits = 0;
  for (std::size_t l = 0; l < width; ++l) bits |= std::uint32_t{t[l]} << l;
  return bits;
#endif
}

#define NUCLEUS_PACK_EACH(i) \
  _Pragma("GCC unroll 16") for (std::size_t i = 0; i < ::nucleus::detail::regs; ++i)

NUCLEUS_INLINE fpack load(const float* p) noexcept {
  fpack v;
  NUCLEUS_PACK_EACH(i) v.r[i] = native::load_unaligned(p + i * width);
  return v;
}
NUCLEUS_INLINE void store(float* p, const fpack& v) noexcept {
  NUCLEUS_PACK_EACH(i) v.r[i].store_unaligned(p + i * width);
}
NUCLEUS_INLINE fpack splat(float x) noexcept {
  fpack v;
  NUCLEUS_PACK_EACH(i) v.r[i] = native(x);
  return v;
}
NUCLEUS_INLINE ipack splat_i(std::int32_t x) noexcept {
  ipack v;
  NUCLEUS_PACK_EACH(i) v.r[i] = native_i(x);
  return v;
}
// lane l holds base + l
NUCLEUS_INLINE ipack iota_i(std::int32_t base) noexcept {
  alignas(64) std::int32_t t[lanes];
  for (std::size_t l = 0; l < lanes; ++l) t[l] = base + static_cast<std::int32_t>(l);
  ipack v;
  NUCLEUS_PACK_EACH(i) v.r[i] = native_i::load_aligned(t + i * width);
  return v;
}
NUCLEUS_INLINE void store_i(std::int32_t* p, const ipack& v) noexcept {
  NUCLEUS_PACK_EACH(i) v.r[i].store_unaligned(p + i * width);
}

#define NUCLEUS_PACK_BINARY(name, expr)                        \
  inline fpack name(const fpack& a, const fpack& b) noexcept { \
    fpack v;                                                   \
    NUCLEUS_PACK_EACH(i) v.r[i] = expr;                        \
    return v;                                                  \
  }
NUCLEUS_PACK_BINARY(add, a.r[i] + b.r[i])
NUCLEUS_PACK_BINARY(sub, a.r[i] - b.r[i])
NUCLEUS_PACK_BINARY(mul, a.r[i] * b.r[i])
#undef NUCLEUS_PACK_BINARY

// xsimd 8.1 has no AVX-512 fma (it falls back to a*b+c, two roundings): fuse by hand, like madd(float).
NUCLEUS_INLINE native register_fma(const native& a, const native& b, const native& c) noexcept {
#if defined(__AVX512F__)
  return _mm512_fmadd_ps(a, b, c);
#elif defined(__AVX__) && defined(__FMA__)
  return _mm256_fmadd_ps(a, b, c);
#elif defined(__x86_64__) || defined(__i386__)
  static_assert(!has_fma, "nucleus: FMA without AVX is not a target nucleus knows");
  return a * b + c;
#else
  return xsimd::fma(a, b, c);  // NEON: a fused instruction, matching std::fma
#endif
}

NUCLEUS_INLINE fpack madd(const fpack& a, const fpack& b, const fpack& c) noexcept {
  fpack v;
  NUCLEUS_PACK_EACH(i) v.r[i] = register_fma(a.r[i], b.r[i], c.r[i]);
  return v;
}

#define NUCLEUS_PACK_COMPARE(name, op)                         \
  inline mpack name(const fpack& a, const fpack& b) noexcept { \
    mpack m;                                                   \
    NUCLEUS_PACK_EACH(i) m.r[i] = a.r[i] op b.r[i];            \
    return m;                                                  \
  }
NUCLEUS_PACK_COMPARE(gt, >)
NUCLEUS_PACK_COMPARE(ge, >=)
NUCLEUS_PACK_COMPARE(eq, ==)
#undef NUCLEUS_PACK_COMPARE

NUCLEUS_INLINE fpack select(const mpack& m, const fpack& a, const fpack& b) noexcept {
  fpack v;
  NUCLEUS_PACK_EACH(i) v.r[i] = xsimd::select(m.r[i], a.r[i], b.r[i]);
  return v;
}
// a > b ? a : b per lane (so a NaN in a yields b): the max instruction's own rule.
NUCLEUS_INLINE fpack max(const fpack& a, const fpack& b) noexcept {
  fpack v;
  NUCLEUS_PACK_EACH(i) v.r[i] = xsimd::max(a.r[i], b.r[i]);
  return v;
}
// Bit l set <=> lane l of the mask is true.
NUCLEUS_INLINE std::uint64_t mask_bits(const mpack& m) noexcept {
  std::uint64_t bits = 0;
  NUCLEUS_PACK_EACH(i) bits |= static_cast<std::uint64_t>(register_bits(m.r[i])) << (i * width);
  return bits;
}
NUCLEUS_INLINE bool any(const mpack& m) noexcept {
  native_b acc = m.r[0];
  _Pragma("GCC unroll 16") for (std::size_t i = 1; i < regs; ++i) acc = acc || m.r[i];
  return xsimd::any(acc);
}
NUCLEUS_INLINE void store_mask(bool* p, const mpack& m) noexcept {
  NUCLEUS_PACK_EACH(i) m.r[i].store_unaligned(p + i * width);
}

// 2^n for integer-valued n in [-126, 127], given k = n + 1.5 * 2^23 (whose low mantissa bits are n).
NUCLEUS_INLINE fpack exp2_int(const fpack& k) noexcept {
  fpack v;
  NUCLEUS_PACK_EACH(i) {
    native_i bits = xsimd::bitwise_cast<native_i>(k.r[i]) - native_i(0x4B400000 - 127);
    v.r[i] = xsimd::bitwise_cast<native>(bits << native_i(23));
  }
  return v;
}

#undef NUCLEUS_PACK_EACH

#else  // NUCLEUS_NO_SIMD: the scalar fallback, lane for lane the same arithmetic

inline constexpr bool simd_enabled = false;
inline constexpr std::size_t width = 1;

struct fpack {
  float r[lanes];
};
struct ipack {
  std::int32_t r[lanes];
};
struct mpack {
  bool r[lanes];
};

#define NUCLEUS_LANE_EACH(l) \
  _Pragma("GCC unroll 64") for (std::size_t l = 0; l < ::nucleus::detail::lanes; ++l)

NUCLEUS_INLINE fpack load(const float* p) noexcept {
  fpack v;
  std::memcpy(v.r, p, sizeof v.r);
  return v;
}
NUCLEUS_INLINE void store(float* p, const fpack& v) noexcept {
  std::memcpy(p, v.r, sizeof v.r);
}
NUCLEUS_INLINE fpack splat(float x) noexcept {
  fpack v;
  NUCLEUS_LANE_EACH(l) v.r[l] = x;
  return v;
}
NUCLEUS_INLINE ipack splat_i(std::int32_t x) noexcept {
  ipack v;
  NUCLEUS_LANE_EACH(l) v.r[l] = x;
  return v;
}
NUCLEUS_INLINE ipack iota_i(std::int32_t base) noexcept {
  ipack v;
  NUCLEUS_LANE_EACH(l) v.r[l] = base + static_cast<std::int32_t>(l);
  return v;
}
NUCLEUS_INLINE void store_i(std::int32_t* p, const ipack& v) noexcept {
  std::memcpy(p, v.r, sizeof v.r);
}

#define NUCLEUS_LANE_BINARY(name, expr)                        \
  inline fpack name(const fpack& a, const fpack& b) noexcept { \
    fpack v;                                                   \
    NUCLEUS_LANE_EACH(l) v.r[l] = expr;                        \
    return v;                                                  \
  }
NUCLEUS_LANE_BINARY(add, a.r[l] + b.r[l])
NUCLEUS_LANE_BINARY(sub, a.r[l] - b.r[l])
NUCLEUS_LANE_BINARY(mul, a.r[l] * b.r[l])
#undef NUCLEUS_LANE_BINARY

NUCLEUS_INLINE fpack madd(const fpack& a, const fpack& b, const fpack& c) noexcept {
  fpack v;
  NUCLEUS_LANE_EACH(l) v.r[l] = madd(a.r[l], b.r[l], c.r[l]);
  return v;
}

#define NUCLEUS_LANE_COMPARE(name, op)                         \
  inline mpack name(const fpack& a, const fpack& b) noexcept { \
    mpack m;                                                   \
    NUCLEUS_LANE_EACH(l) m.r[l] = a.r[l] op b.r[l];            \
    return m;                                                  \
  }
NUCLEUS_LANE_COMPARE(gt, >)
NUCLEUS_LANE_COMPARE(ge, >=)
NUCLEUS_LANE_COMPARE(eq, ==)
#undef NUCLEUS_LANE_COMPARE

NUCLEUS_INLINE fpack select(const mpack& m, const fpack& a, const fpack& b) noexcept {
  fpack v;
  NUCLEUS_LANE_EACH(l) v.r[l] = m.r[l] ? a.r[l] : b.r[l];
  return v;
}
NUCLEUS_INLINE fpack max(const fpack& a, const fpack& b) noexcept {
  fpack v;
  NUCLEUS_LANE_EACH(l) v.r[l] = a.r[l] > b.r[l] ? a.r[l] : b.r[l];
  return v;
}
NUCLEUS_INLINE std::uint64_t mask_bits(const mpack& m) noexcept {
  std::uint64_t bits = 0;
  NUCLEUS_LANE_EACH(l) bits |= std::uint64_t{m.r[l]} << l;
  return bits;
}
NUCLEUS_INLINE bool any(const mpack& m) noexcept {
  bool acc = false;
  NUCLEUS_LANE_EACH(l) acc |= m.r[l];
  return acc;
}
NUCLEUS_INLINE void store_mask(bool* p, const mpack& m) noexcept {
  std::memcpy(p, m.r, sizeof m.r);
}

NUCLEUS_INLINE fpack exp2_int(const fpack& k) noexcept {
  fpack v;
  NUCLEUS_LANE_EACH(l) {
    auto bits = static_cast<std::uint32_t>(std::bit_cast<std::int32_t>(k.r[l]) - (0x4B400000 - 127));
    v.r[l] = std::bit_cast<float>(bits << 23);
  }
  return v;
}

#undef NUCLEUS_LANE_EACH

#endif

// Lanes to memory and back, for folds and for the scalar tail of a kernel.
struct lane_array {
  alignas(64) float v[lanes];
};
NUCLEUS_INLINE lane_array to_lanes(const fpack& p) noexcept {
  lane_array a;
  store(a.v, p);
  return a;
}

// A partial pack: the first n (< lanes) values of p, the rest filled with `fill`.
template <logit_type T>
NUCLEUS_INLINE fpack load_partial(const T* p, std::size_t n, float fill) noexcept {
  lane_array a;
  for (std::size_t l = 0; l < lanes; ++l) a.v[l] = l < n ? to_float(p[l]) : fill;
  return load(a.v);
}

// 16-bit rows widen to float in registers; both conversions are exact, so a kernel over a bf16 or f16
// row gives the very bits it gives over the same row converted to float first.
NUCLEUS_INLINE fpack load(const bf16* p) noexcept {
#if !defined(NUCLEUS_NO_SIMD) && (defined(__AVX512F__) || defined(__AVX2__))
  fpack v;
  for (std::size_t i = 0; i < regs; ++i) {
#if defined(__AVX512F__)
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i * width));
    v.r[i] = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
#else
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i * width));
    v.r[i] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
#endif
  }
  return v;
#else
  return load_partial(p, lanes, 0.0f);
#endif
}

NUCLEUS_INLINE fpack load(const f16* p) noexcept {
#if !defined(NUCLEUS_NO_SIMD) && (defined(__AVX512F__) || (defined(__AVX__) && defined(__F16C__)))
  fpack v;
  for (std::size_t i = 0; i < regs; ++i) {
#if defined(__AVX512F__)
    v.r[i] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i * width)));
#else
    v.r[i] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i * width)));
#endif
  }
  return v;
#else
  return load_partial(p, lanes, 0.0f);
#endif
}

// Lane l takes a where bit l of `bits` is set, b elsewhere: a 64-token slice of a bitmask applied.
NUCLEUS_INLINE fpack select_bits(std::uint64_t bits, const fpack& a, const fpack& b) noexcept {
#if !defined(NUCLEUS_NO_SIMD) && defined(__AVX512F__)
  fpack v;
  for (std::size_t i = 0; i < regs; ++i)
    v.r[i] = _mm512_mask_blend_ps(static_cast<__mmask16>(bits >> (16 * i)), b.r[i], a.r[i]);
  return v;
#elif !defined(NUCLEUS_NO_SIMD) && defined(__AVX2__)
  const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  fpack v;
  for (std::size_t i = 0; i < regs; ++i) {
    const __m256i byte = _mm256_set1_epi32(static_cast<int>((bits >> (8 * i)) & 0xFFu));
    const __m256i on = _mm256_cmpeq_epi32(_mm256_and_si256(byte, lane_bit), lane_bit);
    v.r[i] = _mm256_blendv_ps(b.r[i], a.r[i], _mm256_castsi256_ps(on));
  }
  return v;
#else
  lane_array la = to_lanes(a);
  const lane_array lb = to_lanes(b);
  for (std::size_t l = 0; l < lanes; ++l) la.v[l] = (bits >> l) & 1u ? la.v[l] : lb.v[l];
  return load(la.v);
#endif
}

// Fixed-order fold: halves added pairwise (lane l + lane l + h) until one lane is left. A register
// build and the scalar build perform the very same additions.
NUCLEUS_INLINE float fold_sum(const fpack& p) noexcept {
  lane_array a = to_lanes(p);
  for (std::size_t h = lanes / 2; h > 0; h /= 2)
    for (std::size_t l = 0; l < h; ++l) a.v[l] = a.v[l] + a.v[l + h];
  return a.v[0];
}

}  // namespace nucleus::detail
