// exp over packs and scalars with one operation sequence, so both give the same bits.
//
// Accuracy: within 2 ulp of the exact exp for y in (-86, 0] (tests/kernels/exp.cpp measures it
// against std::exp in double). y <= -86 and NaN give 0 (a token that can carry no probability).
// Domain: y <= 88; kernels only pass y <= 0, a logit minus the row maximum, scaled.
#pragma once

#include "nucleus/simd/pack.hpp"

namespace nucleus::detail {

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

NUCLEUS_INLINE fpack exp(const fpack& y) noexcept {
  using namespace exp_consts;
  const fpack lo_v = splat(lo);
  const fpack yc = max(y, lo_v);
  const fpack k = madd(yc, splat(log2e), splat(round_magic));
  const fpack n = sub(k, splat(round_magic));
  fpack r = madd(n, splat(-ln2_hi), yc);
  r = madd(n, splat(-ln2_lo), r);
  fpack p = madd(splat(c0), r, splat(c1));
  p = madd(p, r, splat(c2));
  p = madd(p, r, splat(c3));
  p = madd(p, r, splat(c4));
  p = madd(p, r, splat(c5));
  fpack e = add(madd(p, mul(r, r), r), splat(1.0f));
  e = mul(e, exp2_int(k));
  return select(gt(y, lo_v), e, splat(0.0f));
}

NUCLEUS_INLINE float exp(float y) noexcept {
  using namespace exp_consts;
  if (!(y > lo)) return 0.0f;
  const float yc = y;
  const float k = madd(yc, log2e, round_magic);
  const float n = k - round_magic;
  float r = madd(n, -ln2_hi, yc);
  r = madd(n, -ln2_lo, r);
  float p = madd(c0, r, c1);
  p = madd(p, r, c2);
  p = madd(p, r, c3);
  p = madd(p, r, c4);
  p = madd(p, r, c5);
  float e = madd(p, r * r, r) + 1.0f;
  const auto bits = static_cast<std::uint32_t>(std::bit_cast<std::int32_t>(k) - (0x4B400000 - 127));
  return e * std::bit_cast<float>(bits << 23);
}

}  // namespace nucleus::detail
