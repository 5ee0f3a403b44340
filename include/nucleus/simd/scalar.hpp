// Scalar arithmetic every target shares: the one exp, the exact token weights and their sums, and the
// rank keys. Kernels (compiled per target) and stages (compiled with the consumer's flags) both use
// these, so every operation here is written to give the same bits under any compiler flags: fused
// multiply-adds are spelled out with std::fma (exact on every target), and no product feeds an add.
// Under nvcc the same definitions compile for the device too (NUCLEUS_HD, core/host_device.hpp) for
// the GPU sampler (nucleus/cuda/); where a device path differs in spelling it is the same IEEE
// operation (__fmaf_rn is std::fma; __fmul_rn and __fsub_rn are the plain rounded product and
// difference, which nvcc would otherwise be free to contract).
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "nucleus/core/draw_key.hpp"
#include "nucleus/core/host_device.hpp"

#if defined(__GNUC__) || defined(__clang__)
#define NUCLEUS_INLINE [[gnu::always_inline]] inline
#else
#define NUCLEUS_INLINE inline
#endif

namespace nucleus::detail {

NUCLEUS_HD NUCLEUS_INLINE float inf() noexcept {
#if defined(__CUDA_ARCH__)
  return __builtin_huge_valf();
#else
  return std::numeric_limits<float>::infinity();
#endif
}

// a*b+c with one rounding, whatever the target (std::fma is exact by definition).
NUCLEUS_HD NUCLEUS_INLINE float madd(float a, float b, float c) noexcept {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

namespace exp_consts {
inline constexpr float lo = -86.0f;  // above this every result is a normal float
inline constexpr float log2e = 1.44269504088896341f;
inline constexpr float round_magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
inline constexpr float ln2_hi = 0.693359375f;      // few mantissa bits: n * ln2_hi is exact
inline constexpr float ln2_lo = -2.12194440e-4f;
// Minimax polynomial for (exp(r) - 1 - r) / r^2 on |r| <= ln2 / 2 (the classic Cephes expf set).
inline constexpr float c0 = 1.9875691500e-4f, c1 = 1.3981999507e-3f, c2 = 8.3334519073e-3f,
                       c3 = 4.1665795894e-2f, c4 = 1.6666665459e-1f, c5 = 5.0000001201e-1f;
}  // namespace exp_consts

// exp(y)'s operation sequence, written once: exp_scalar below.
NUCLEUS_HD NUCLEUS_INLINE float exp_ops(float y) noexcept {
  using namespace exp_consts;
  if (!(y > lo)) return 0.0f;
  const float k = madd(y, log2e, round_magic);
  const float n = k - round_magic;
  float r = madd(n, -ln2_hi, y);
  r = madd(n, -ln2_lo, r);
  float p = madd(c0, r, c1);
  p = madd(p, r, c2);
  p = madd(p, r, c3);
  p = madd(p, r, c4);
  p = madd(p, r, c5);
  const float e = madd(p, r * r, r) + 1.0f;
  const auto bits = static_cast<std::uint32_t>(static_cast<std::int32_t>(bits_of(k)) - (0x4B400000 - 127));
  return e * float_from_bits(bits << 23);
}

// An x86 build whose flags leave out FMA (the wheel, -march=x86-64-v2) would make each std::fma a call
// into libm. There exp_scalar runs a copy of the same operations compiled for FMA when the CPU has
// it: std::fma is exact either way, so the bits are the same, without nine calls per exp.
#if !defined(__CUDA_ARCH__) && !defined(__FMA__) && (defined(__x86_64__) || defined(__i386__)) && \
    (defined(__GNUC__) || defined(__clang__))
#define NUCLEUS_EXP_FMA_COPY 1
[[gnu::target("fma")]] inline float exp_ops_fma(float y) noexcept {
  return exp_ops(y);
}
inline bool cpu_has_fma() noexcept {
  static const bool has = __builtin_cpu_supports("fma");
  return has;
}
#else
#define NUCLEUS_EXP_FMA_COPY 0
#endif

// exp(y), the same operation sequence as the packs' exp (simd/pack.hpp): within 2 ulp on (-86, 0];
// y <= -86 and NaN give 0. Domain: y <= 88.
NUCLEUS_HD NUCLEUS_INLINE float exp_scalar(float y) noexcept {
#if NUCLEUS_EXP_FMA_COPY && !defined(__CUDA_ARCH__)
  if (cpu_has_fma()) return exp_ops_fma(y);
#endif
  return exp_ops(y);
}

// a * b rounded to float on its own, so that no compiler (-ffp-contract=fast) fuses it into a
// following add: for a*b+c with two roundings, write add(mul_rounded(a, b), c).
NUCLEUS_HD NUCLEUS_INLINE float mul_rounded(float a, float b) noexcept {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);  // nvcc never contracts this intrinsic
#else
  float p = a * b;
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
  __asm__("" : "+x"(p));
#elif (defined(__GNUC__) || defined(__clang__)) && defined(__aarch64__)
  __asm__("" : "+w"(p));
#else
  volatile float v = p;
  p = v;
#endif
  return p;
#endif
}

NUCLEUS_HD NUCLEUS_INLINE float scaled(float x, float shift, float scale) noexcept {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(__fsub_rn(x, shift), scale);
#else
  return (x - shift) * scale;
#endif
}

// --- exact weights ------------------------------------------------------------------------------
// A token's weight is its exp value e in [0, 1] as a 48-bit fixed-point integer, floor(e * 2^48).
// Weights add as integers, so every sum (a row's normalizer, a block's mass, top-p's running mass)
// is exact: it depends on nothing but the inputs, not on order, SIMD width or where a row is split.
using wsum = unsigned __int128;
inline constexpr int weight_bits = 48;
inline constexpr double weight_of_one = 0x1p48;  // the weight of e = 1: the row's maximum
inline constexpr double weight_ulp = 0x1p-48;    // one unit of weight, as a fraction of e

NUCLEUS_HD NUCLEUS_INLINE std::uint64_t weight(float e) noexcept {
  return static_cast<std::uint64_t>(static_cast<double>(e) * weight_of_one);  // both steps exact
}
// The sum as a real number (one rounding).
NUCLEUS_HD inline double to_double(wsum w) noexcept {
  return static_cast<double>(w) * weight_ulp;
}

// One logit's part of the moments' sums (kernels/reduce.hpp: moment_sums): its weight into total,
// and weight * trunc(-y 2^40) into weighted (y <= 0; y counts as 0 where the weight is 0, so -inf
// and NaN add nothing). -y 2^40 is exact in double (a power of two); the cast truncates.
NUCLEUS_HD NUCLEUS_INLINE void add_moment(float e, float y, wsum& total, wsum& weighted) noexcept {
  const std::uint64_t w = weight(e);
  const float yw = w != 0 ? y : 0.0f;
  total += w;
  weighted += static_cast<wsum>(w) * static_cast<std::uint64_t>(-static_cast<double>(yw) * 0x1p40);
}

// floor(u * total) for the key's 53-bit uniform u: the draw's point in [0, total) (total < 2^75).
NUCLEUS_HD inline wsum draw_point(draw_key key, wsum total) noexcept {
  return (static_cast<wsum>(key_bits(key) >> 11) * total) >> 53;
}

// The least integer T with  m < T  <=>  m < p * total  for every integer m: top-p's cut on masses.
NUCLEUS_HD inline wsum mass_bound(float p, wsum total) noexcept {
  int e = 0;
#if defined(__CUDA_ARCH__)
  const float f = frexpf(p, &e);  // CUDA's frexpf and ldexpf are exact, as the std ones
  const auto mant = static_cast<wsum>(static_cast<std::uint32_t>(ldexpf(f, 24)));
#else
  const float f = std::frexp(p, &e);  // p = f * 2^e, f in [0.5, 1): exact
  const auto mant = static_cast<wsum>(static_cast<std::uint32_t>(std::ldexp(f, 24)));
#endif
  const int shift = 24 - e;  // p * total = mant * total / 2^shift; mant * total < 2^99
  const wsum prod = mant * total;
  if (shift <= 0) return prod << -shift;
  if (shift >= 127) return prod > 0 ? 1 : 0;
  return (prod >> shift) + ((prod & ((wsum{1} << shift) - 1)) != 0 ? 1 : 0);
}

// The histogram cut (top-p here and across shards, typical over distance bins): the first of
// `bins` bins at which the running mass reaches `bound`, and the mass of the bins before it;
// edge == bins when none does.
struct bin_edge {
  std::uint32_t edge = 0;
  wsum before = 0;
};
NUCLEUS_HD inline bin_edge find_edge_bin(const wsum* mass, std::uint32_t bins, wsum bound) noexcept {
  bin_edge e;
  while (e.edge < bins && e.before + mass[e.edge] < bound) e.before += mass[e.edge++];
  return e;
}

// --- rank keys ----------------------------------------------------------------------------------
// Order-preserving integer image of a float: a < b  <=>  ordered(a) < ordered(b) (for non-NaN).
// -0 and +0 compare equal, so they share one image (ties between them go by id, like any tie).
NUCLEUS_HD inline std::uint32_t ordered(float v) noexcept {
  const auto b = bits_of(v == 0.0f ? 0.0f : v);
  return b & 0x80000000u ? ~b : b | 0x80000000u;
}
NUCLEUS_HD inline float from_ordered(std::uint32_t o) noexcept {
  return float_from_bits(o & 0x80000000u ? o & 0x7FFFFFFFu : ~o);
}

// One integer that orders candidates by (logit descending, id ascending): a larger key ranks first.
NUCLEUS_HD inline std::uint64_t rank_key(float v, std::int32_t id) noexcept {
  return (std::uint64_t{ordered(v)} << 32) | (0xFFFFFFFFu - static_cast<std::uint32_t>(id));
}
NUCLEUS_HD inline float key_value(std::uint64_t k) noexcept {
  return from_ordered(static_cast<std::uint32_t>(k >> 32));
}
NUCLEUS_HD inline std::int32_t key_id(std::uint64_t k) noexcept {
  return static_cast<std::int32_t>(0xFFFFFFFFu - static_cast<std::uint32_t>(k));
}

}  // namespace nucleus::detail
