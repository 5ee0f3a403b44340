// A fixed-width pack of 64 float lanes, the unit every nucleus kernel works in, written once over
// `reg` (simd/registers.hpp). AVX-512 holds a pack in 4 registers, AVX2 in 8, SSE2 in 16 and the
// scalar target in 64 floats. Nothing a kernel computes depends on the register width: reductions
// are exact (integer weights) or order-free (max), so every target gives the same bits.
//
// Compiled once per target by simd/targets.hpp; included on its own, it brings in the dispatcher.
#if !defined(NUCLEUS_TARGET_ISA)
#include "nucleus/simd/targets.hpp"
#else

inline constexpr std::size_t lanes = 64;
inline constexpr std::size_t width = reg::width;
inline constexpr std::size_t regs = lanes / width;

struct fpack {
  reg::f r[regs];
};
struct ipack {
  reg::i r[regs];
};
struct mpack {
  reg::m r[regs];
};

// Unrolled where a pack is a few registers (the speed of AVX2 and AVX-512); a plain loop over 16 SSE2
// registers or 64 scalars, which the compiler may unroll or not: unrolling them cost minutes of
// compile time in every translation unit and bought little.
#if NUCLEUS_REG_UNROLL
#define NUCLEUS_PACK_EACH(i) _Pragma("GCC unroll 16") for (std::size_t i = 0; i < regs; ++i)
#else
#define NUCLEUS_PACK_EACH(i) for (std::size_t i = 0; i < regs; ++i)
#endif

template <class T>
NUCLEUS_INLINE fpack load(const T* p) noexcept {
  fpack v;
  NUCLEUS_PACK_EACH(i) v.r[i] = reg::load(p + i * width);
  return v;
}
NUCLEUS_INLINE void store(float* p, const fpack& v) noexcept {
  NUCLEUS_PACK_EACH(i) reg::store(p + i * width, v.r[i]);
}
NUCLEUS_INLINE fpack splat(float x) noexcept {
  fpack v;
  NUCLEUS_PACK_EACH(i) v.r[i] = reg::splat(x);
  return v;
}

#define NUCLEUS_PACK_MAP2(name, op, out_t)                             \
  NUCLEUS_INLINE out_t name(const fpack& a, const fpack& b) noexcept { \
    out_t v;                                                           \
    NUCLEUS_PACK_EACH(i) v.r[i] = reg::op(a.r[i], b.r[i]);             \
    return v;                                                          \
  }
NUCLEUS_PACK_MAP2(add, add, fpack)
NUCLEUS_PACK_MAP2(sub, sub, fpack)
NUCLEUS_PACK_MAP2(mul, mul, fpack)
NUCLEUS_PACK_MAP2(max, max, fpack)  // a > b ? a : b per lane
NUCLEUS_PACK_MAP2(gt, gt, mpack)
NUCLEUS_PACK_MAP2(ge, ge, mpack)
NUCLEUS_PACK_MAP2(eq, eq, mpack)
#undef NUCLEUS_PACK_MAP2

// a*b+c with one rounding on every target.
NUCLEUS_INLINE fpack madd(const fpack& a, const fpack& b, const fpack& c) noexcept {
  fpack v;
  NUCLEUS_PACK_EACH(i) v.r[i] = reg::fma(a.r[i], b.r[i], c.r[i]);
  return v;
}
NUCLEUS_INLINE fpack select(const mpack& m, const fpack& a, const fpack& b) noexcept {
  fpack v;
  NUCLEUS_PACK_EACH(i) v.r[i] = reg::select(m.r[i], a.r[i], b.r[i]);
  return v;
}
// Bit l set <=> lane l of the mask is true.
NUCLEUS_INLINE std::uint64_t mask_bits(const mpack& m) noexcept {
  std::uint64_t bits = 0;
  NUCLEUS_PACK_EACH(i) bits |= static_cast<std::uint64_t>(reg::bits(m.r[i])) << (i * width);
  return bits;
}
NUCLEUS_INLINE bool any(const mpack& m) noexcept {
  reg::m acc = m.r[0];
  NUCLEUS_PACK_EACH(i) acc = reg::lor(acc, m.r[i]);
  return reg::bits(acc) != 0;
}
// Lane l takes a where bit l of `bits` is set, b elsewhere: a 64-token slice of a bitmask applied.
NUCLEUS_INLINE fpack select_bits(std::uint64_t bits, const fpack& a, const fpack& b) noexcept {
  fpack v;
  NUCLEUS_PACK_EACH(i)
  v.r[i] = reg::select_bits(static_cast<std::uint32_t>(bits >> (i * width)), a.r[i], b.r[i]);
  return v;
}

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

// exp with the operation sequence of exp_scalar (simd/scalar.hpp): the same bits lane for lane.
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
  fpack s;
  NUCLEUS_PACK_EACH(i) s.r[i] = reg::exp2_int(k.r[i]);
  e = mul(e, s);
  return select(gt(y, lo_v), e, splat(0.0f));
}

// The exact weights of a pack of exp values e in [0, 1] (see weight() in simd/scalar.hpp), added
// into two integer accumulators: hi += floor(e * 2^24), lo += the next 24 bits, so that
// floor(e * 2^48) = hi * 2^24 + lo. Each lane of hi and lo stays below 2^31 for 64 packs.
struct weight_acc {
  ipack hi, lo;
};
NUCLEUS_INLINE void clear(weight_acc& a) noexcept {
  NUCLEUS_PACK_EACH(i) a.hi.r[i] = a.lo.r[i] = reg::zero_i();
}
// One register's weights floor(e * 2^48) as h = floor(e * 2^24) and l = the next 24 bits.
NUCLEUS_INLINE void weight_pieces(reg::f e, reg::i& h, reg::i& l) noexcept {
  const reg::f unit = reg::splat(0x1p24f);
  const reg::f f = reg::mul(e, unit);  // exact: a power of two
  h = reg::cvtt(f);
  l = reg::cvtt(reg::mul(reg::sub(f, reg::cvt(h)), unit));  // exact: f - trunc(f), then scaled
}
NUCLEUS_INLINE void accumulate(weight_acc& a, const fpack& e) noexcept {
  NUCLEUS_PACK_EACH(i) {
    reg::i h, l;
    weight_pieces(e.r[i], h, l);
    a.hi.r[i] = reg::add_i(a.hi.r[i], h);
    a.lo.r[i] = reg::add_i(a.lo.r[i], l);
  }
}
// hi * 2^24 + lo over all lanes.
NUCLEUS_INLINE std::uint64_t total(const weight_acc& a) noexcept {
  alignas(64) std::int32_t h[lanes], l[lanes];
  NUCLEUS_PACK_EACH(i) {
    reg::store_i(h + i * width, a.hi.r[i]);
    reg::store_i(l + i * width, a.lo.r[i]);
  }
  std::uint64_t sh = 0, sl = 0;
  for (std::size_t k = 0; k < lanes; ++k) {
    sh += static_cast<std::uint32_t>(h[k]);
    sl += static_cast<std::uint32_t>(l[k]);
  }
  return (sh << 24) + sl;
}

// The sum of a register of 64-bit lanes (reg::w), lane by lane.
NUCLEUS_INLINE std::uint64_t lane_sum(const reg::w& v) noexcept {
  std::uint64_t s = 0;
  for (std::uint64_t lane : std::bit_cast<std::array<std::uint64_t, sizeof(reg::w) / 8> >(v)) s += lane;
  return s;
}

#undef NUCLEUS_PACK_EACH

#endif  // NUCLEUS_TARGET_ISA
