// The one place that knows the instruction sets: `struct reg`, one SIMD register of floats and the
// operations the packs need, for the target being compiled (NUCLEUS_TARGET_ISA, set by
// simd/targets.hpp, which includes this file once per target inside that target's namespace).
// Everything above this file is written once, against reg.
//
// Rules every target follows, so that all of them give the same bits:
// - fma is one rounding (hardware FMA, or emulated exactly on SSE2; std::fma on scalar);
// - max(a, b) is a > b ? a : b per lane (x86's own rule: a NaN in a yields b);
// - cvtt truncates toward zero; kernels only pass it finite values below 2^31.
// - d is a register of dwidth double lanes (IEEE add, sub and one-rounding fma, as std::fma);
// - w is a register of 64-bit integer lanes; mac_u32(acc, a, b) adds the products of a's and b's
//   32-bit lanes, taken as unsigned, into them (a lane pair's two products into one lane;
//   pack.hpp's lane_sum adds the lanes). The sums are exact while they stay below 2^64: the caller
//   bounds them.
// - any_gt_i16(p, t): whether any of the 64 bf16 at p (a pack's lanes), read as signed 16-bit
//   integers, exceeds t. For t >= 0 that orders them as floats, so a test against a bf16 bound costs
//   one integer compare per 16-bit lane instead of a widening and a float compare (select_top_k).
// No include guard: included once per target. Included on its own, it brings in the dispatcher.

#if !defined(NUCLEUS_TARGET_ISA)
#include "nucleus/simd/targets.hpp"
#else

// Per target, for the preprocessor: NUCLEUS_REG_UNROLL (packs of a few wide registers: unroll them)
// and NUCLEUS_REG_SCALAR (one lane per register).
#undef NUCLEUS_REG_UNROLL
#undef NUCLEUS_REG_SCALAR

#if NUCLEUS_TARGET_ISA == 3  // AVX-512 F/BW/VL/DQ
#define NUCLEUS_REG_UNROLL 1
#define NUCLEUS_REG_SCALAR 0

struct reg {
  using f = __m512;
  using i = __m512i;
  using m = __mmask16;
  static constexpr std::size_t width = 16;
  static constexpr bool has_compress = true;
  // Full-mask zeroing forms: the plain ones pass _mm512_undefined_*() that GCC 12 warns about.
  static constexpr __mmask16 all = 0xFFFF;
  NUCLEUS_INLINE static f load(const float* p) { return _mm512_loadu_ps(p); }
  NUCLEUS_INLINE static f load(const bf16* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(all, _mm512_maskz_cvtepu16_epi32(all, h), 16));
  }
  NUCLEUS_INLINE static f load(const f16* p) {
    return _mm512_maskz_cvtph_ps(all, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  NUCLEUS_INLINE static bool any_gt_i16(const bf16* p, std::int16_t t) {
    const __m512i tv = _mm512_set1_epi16(t);
    const auto* q = reinterpret_cast<const __m512i*>(p);
    return (_mm512_cmpgt_epi16_mask(_mm512_loadu_si512(q), tv) |
            _mm512_cmpgt_epi16_mask(_mm512_loadu_si512(q + 1), tv)) != 0;
  }
  NUCLEUS_INLINE static void store(float* p, f v) { _mm512_storeu_ps(p, v); }
  NUCLEUS_INLINE static f splat(float x) { return _mm512_set1_ps(x); }
  NUCLEUS_INLINE static f add(f a, f b) { return _mm512_add_ps(a, b); }
  NUCLEUS_INLINE static f sub(f a, f b) { return _mm512_sub_ps(a, b); }
  NUCLEUS_INLINE static f mul(f a, f b) { return _mm512_mul_ps(a, b); }
  NUCLEUS_INLINE static f fma(f a, f b, f c) { return _mm512_fmadd_ps(a, b, c); }
  NUCLEUS_INLINE static f max(f a, f b) { return _mm512_maskz_max_ps(all, a, b); }
  NUCLEUS_INLINE static m gt(f a, f b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
  NUCLEUS_INLINE static m ge(f a, f b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
  NUCLEUS_INLINE static m eq(f a, f b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
  NUCLEUS_INLINE static m lor(m a, m b) { return static_cast<m>(a | b); }
  NUCLEUS_INLINE static f select(m k, f a, f b) { return _mm512_mask_blend_ps(k, b, a); }
  NUCLEUS_INLINE static std::uint32_t bits(m k) { return static_cast<std::uint32_t>(k); }
  NUCLEUS_INLINE static f select_bits(std::uint32_t b, f a, f c) {
    return _mm512_mask_blend_ps(static_cast<__mmask16>(b), c, a);
  }
  NUCLEUS_INLINE static i zero_i() { return _mm512_setzero_si512(); }
  NUCLEUS_INLINE static i add_i(i a, i b) { return _mm512_add_epi32(a, b); }
  NUCLEUS_INLINE static i cvtt(f a) { return _mm512_maskz_cvttps_epi32(all, a); }
  NUCLEUS_INLINE static f cvt(i a) { return _mm512_maskz_cvtepi32_ps(all, a); }
  NUCLEUS_INLINE static void store_i(std::int32_t* p, i v) { _mm512_storeu_si512(p, v); }
  // Double lanes, for sums that must add in double (d: dwidth doubles; load_d widens dwidth floats).
  using d = __m512d;
  using md = __mmask8;
  static constexpr std::size_t dwidth = 8;
  NUCLEUS_INLINE static d load_d(const float* p) { return _mm512_maskz_cvtps_pd(0xFF, _mm256_loadu_ps(p)); }
  NUCLEUS_INLINE static d splat_d(double x) { return _mm512_set1_pd(x); }
  NUCLEUS_INLINE static d add_d(d a, d b) { return _mm512_add_pd(a, b); }
  NUCLEUS_INLINE static d sub_d(d a, d b) { return _mm512_sub_pd(a, b); }
  NUCLEUS_INLINE static d fma_d(d a, d b, d c) { return _mm512_fmadd_pd(a, b, c); }
  NUCLEUS_INLINE static md gt_d(d a, d b) { return _mm512_cmp_pd_mask(a, b, _CMP_GT_OQ); }
  NUCLEUS_INLINE static d select_d(md k, d a, d b) { return _mm512_mask_blend_pd(k, b, a); }
  NUCLEUS_INLINE static void store_d(double* p, d v) { _mm512_storeu_pd(p, v); }
  // 64-bit lanes for exact integer sums (see the rules above: mac_u32).
  using w = __m512i;
  NUCLEUS_INLINE static w zero_w() { return _mm512_setzero_si512(); }
  NUCLEUS_INLINE static w mac_u32(w acc, i a, i b) {
    constexpr __mmask8 all8 = 0xFF;
    const __m512i odd = _mm512_maskz_mul_epu32(all8, _mm512_maskz_srli_epi64(all8, a, 32),
                                               _mm512_maskz_srli_epi64(all8, b, 32));
    return _mm512_add_epi64(acc, _mm512_add_epi64(_mm512_maskz_mul_epu32(all8, a, b), odd));
  }
  // 2^n for k = n + 1.5 * 2^23 (the low mantissa bits of k hold n), n in [-126, 127].
  NUCLEUS_INLINE static f exp2_int(f k) {
    const __m512i b = _mm512_sub_epi32(_mm512_castps_si512(k), _mm512_set1_epi32(0x4B400000 - 127));
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(all, b, 23));
  }
  // Writes the lanes of v whose bit is set in `bits`, and their ids (ids[first + lane], or first +
  // lane without ids), at vals_out / ids_out as one full register each; returns how many.
  NUCLEUS_INLINE static std::size_t compress(std::uint32_t bits, f v, const std::int32_t* ids,
                                             std::size_t first, float* vals_out, std::int32_t* ids_out) {
    const auto k = static_cast<__mmask16>(bits);
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    _mm512_storeu_ps(vals_out, _mm512_maskz_compress_ps(k, v));
    const __m512i id = ids ? _mm512_maskz_loadu_epi32(k, ids + first)
                           : _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(first)), iota);
    _mm512_storeu_si512(ids_out, _mm512_maskz_compress_epi32(k, id));
    return static_cast<std::size_t>(std::popcount(static_cast<unsigned>(k)));
  }
};

#elif NUCLEUS_TARGET_ISA == 2  // AVX2 + FMA + F16C
#define NUCLEUS_REG_UNROLL 1
#define NUCLEUS_REG_SCALAR 0

struct reg {
  using f = __m256;
  using i = __m256i;
  using m = __m256;
  static constexpr std::size_t width = 8;
  static constexpr bool has_compress = true;
  NUCLEUS_INLINE static f load(const float* p) { return _mm256_loadu_ps(p); }
  NUCLEUS_INLINE static f load(const bf16* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  NUCLEUS_INLINE static f load(const f16* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  NUCLEUS_INLINE static bool any_gt_i16(const bf16* p, std::int16_t t) {
    const __m256i tv = _mm256_set1_epi16(t);
    const auto* q = reinterpret_cast<const __m256i*>(p);
    const __m256i a = _mm256_or_si256(_mm256_cmpgt_epi16(_mm256_loadu_si256(q), tv),
                                      _mm256_cmpgt_epi16(_mm256_loadu_si256(q + 1), tv));
    const __m256i b = _mm256_or_si256(_mm256_cmpgt_epi16(_mm256_loadu_si256(q + 2), tv),
                                      _mm256_cmpgt_epi16(_mm256_loadu_si256(q + 3), tv));
    const __m256i c = _mm256_or_si256(a, b);
    return !_mm256_testz_si256(c, c);
  }
  NUCLEUS_INLINE static void store(float* p, f v) { _mm256_storeu_ps(p, v); }
  NUCLEUS_INLINE static f splat(float x) { return _mm256_set1_ps(x); }
  NUCLEUS_INLINE static f add(f a, f b) { return _mm256_add_ps(a, b); }
  NUCLEUS_INLINE static f sub(f a, f b) { return _mm256_sub_ps(a, b); }
  NUCLEUS_INLINE static f mul(f a, f b) { return _mm256_mul_ps(a, b); }
  NUCLEUS_INLINE static f fma(f a, f b, f c) { return _mm256_fmadd_ps(a, b, c); }
  NUCLEUS_INLINE static f max(f a, f b) { return _mm256_max_ps(a, b); }
  NUCLEUS_INLINE static m gt(f a, f b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
  NUCLEUS_INLINE static m ge(f a, f b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
  NUCLEUS_INLINE static m eq(f a, f b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
  NUCLEUS_INLINE static m lor(m a, m b) { return _mm256_or_ps(a, b); }
  NUCLEUS_INLINE static f select(m k, f a, f b) { return _mm256_blendv_ps(b, a, k); }
  NUCLEUS_INLINE static std::uint32_t bits(m k) { return static_cast<std::uint32_t>(_mm256_movemask_ps(k)); }
  NUCLEUS_INLINE static f select_bits(std::uint32_t b, f a, f c) {
    const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256i byte = _mm256_set1_epi32(static_cast<int>(b & 0xFFu));
    const __m256i on = _mm256_cmpeq_epi32(_mm256_and_si256(byte, lane_bit), lane_bit);
    return _mm256_blendv_ps(c, a, _mm256_castsi256_ps(on));
  }
  NUCLEUS_INLINE static i zero_i() { return _mm256_setzero_si256(); }
  NUCLEUS_INLINE static i add_i(i a, i b) { return _mm256_add_epi32(a, b); }
  NUCLEUS_INLINE static i cvtt(f a) { return _mm256_cvttps_epi32(a); }
  NUCLEUS_INLINE static f cvt(i a) { return _mm256_cvtepi32_ps(a); }
  NUCLEUS_INLINE static void store_i(std::int32_t* p, i v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
  }
  using d = __m256d;
  using md = __m256d;
  static constexpr std::size_t dwidth = 4;
  NUCLEUS_INLINE static d load_d(const float* p) { return _mm256_cvtps_pd(_mm_loadu_ps(p)); }
  NUCLEUS_INLINE static d splat_d(double x) { return _mm256_set1_pd(x); }
  NUCLEUS_INLINE static d add_d(d a, d b) { return _mm256_add_pd(a, b); }
  NUCLEUS_INLINE static d sub_d(d a, d b) { return _mm256_sub_pd(a, b); }
  NUCLEUS_INLINE static d fma_d(d a, d b, d c) { return _mm256_fmadd_pd(a, b, c); }
  NUCLEUS_INLINE static md gt_d(d a, d b) { return _mm256_cmp_pd(a, b, _CMP_GT_OQ); }
  NUCLEUS_INLINE static d select_d(md k, d a, d b) { return _mm256_blendv_pd(b, a, k); }
  NUCLEUS_INLINE static void store_d(double* p, d v) { _mm256_storeu_pd(p, v); }
  using w = __m256i;
  NUCLEUS_INLINE static w zero_w() { return _mm256_setzero_si256(); }
  NUCLEUS_INLINE static w mac_u32(w acc, i a, i b) {
    const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), _mm256_srli_epi64(b, 32));
    return _mm256_add_epi64(acc, _mm256_add_epi64(_mm256_mul_epu32(a, b), odd));
  }
  NUCLEUS_INLINE static f exp2_int(f k) {
    const __m256i b = _mm256_sub_epi32(_mm256_castps_si256(k), _mm256_set1_epi32(0x4B400000 - 127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(b, 23));
  }
  // As AVX-512's compress, by a permutation: for each 8-bit mask, the set lanes' numbers packed in
  // 4-bit fields, lowest first.
  struct compress_table {
    std::uint32_t order[256];
    constexpr compress_table() : order{} {
      for (std::uint32_t k = 0; k < 256; ++k) {
        std::uint32_t packed = 0, at = 0;
        for (std::uint32_t lane = 0; lane < 8; ++lane)
          if (k >> lane & 1u) packed |= lane << (4 * at++);
        order[k] = packed;
      }
    }
  };
  NUCLEUS_INLINE static std::size_t compress(std::uint32_t bits, f v, const std::int32_t* ids,
                                             std::size_t first, float* vals_out, std::int32_t* ids_out) {
    static constexpr compress_table table{};
    const std::uint32_t k = bits & 0xFFu;
    const __m256i fields = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    const __m256i perm = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(table.order[k])), fields), _mm256_set1_epi32(7));
    _mm256_storeu_ps(vals_out, _mm256_permutevar8x32_ps(v, perm));
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i id;
    if (ids) {  // only the set lanes are read: the last pack's may lie past the end
      const __m256i lane_bit = _mm256_sllv_epi32(_mm256_set1_epi32(1), iota);
      const __m256i on =
          _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(static_cast<int>(k)), lane_bit), lane_bit);
      id = _mm256_maskload_epi32(ids + first, on);
    } else {
      id = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(first)), iota);
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(ids_out), _mm256_permutevar8x32_epi32(id, perm));
    return static_cast<std::size_t>(std::popcount(k));
  }
};

#elif NUCLEUS_TARGET_ISA == 1  // SSE2: the x86-64 baseline
#define NUCLEUS_REG_UNROLL 0
#define NUCLEUS_REG_SCALAR 0

struct reg {
  using f = __m128;
  using i = __m128i;
  using m = __m128;
  static constexpr std::size_t width = 4;
  static constexpr bool has_compress = false;
  NUCLEUS_INLINE static f load(const float* p) { return _mm_loadu_ps(p); }
  NUCLEUS_INLINE static f load(const bf16* p) {
    const __m128i h = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return _mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), h));
  }
  NUCLEUS_INLINE static f load(const f16* p) {  // no F16C: the exact scalar conversion
    return _mm_setr_ps(to_float(p[0]), to_float(p[1]), to_float(p[2]), to_float(p[3]));
  }
  NUCLEUS_INLINE static bool any_gt_i16(const bf16* p, std::int16_t t) {
    const __m128i tv = _mm_set1_epi16(t);
    const auto* q = reinterpret_cast<const __m128i*>(p);
    __m128i acc = _mm_cmpgt_epi16(_mm_loadu_si128(q), tv);
    for (int j = 1; j < 8; ++j) acc = _mm_or_si128(acc, _mm_cmpgt_epi16(_mm_loadu_si128(q + j), tv));
    return _mm_movemask_epi8(acc) != 0;
  }
  NUCLEUS_INLINE static void store(float* p, f v) { _mm_storeu_ps(p, v); }
  NUCLEUS_INLINE static f splat(float x) { return _mm_set1_ps(x); }
  NUCLEUS_INLINE static f add(f a, f b) { return _mm_add_ps(a, b); }
  NUCLEUS_INLINE static f sub(f a, f b) { return _mm_sub_ps(a, b); }
  NUCLEUS_INLINE static f mul(f a, f b) { return _mm_mul_ps(a, b); }
  // One rounding without FMA hardware: the product is exact in double, the sum is rounded to odd
  // (round to nearest, then the last bit forced odd toward the exact sum if inexact), and the odd
  // double rounds to the correctly rounded float (double has >= 2 * 24 + 2 bits: Boldo-Melquiond).
  NUCLEUS_INLINE static __m128d fma_half(__m128d a, __m128d b, __m128d c) {
    const __m128d p = _mm_mul_pd(a, b);
    const __m128d s = _mm_add_pd(p, c);
    const __m128d bp = _mm_sub_pd(s, p);
    const __m128d err = _mm_add_pd(_mm_sub_pd(p, _mm_sub_pd(s, bp)), _mm_sub_pd(c, bp));
    const __m128i sb = _mm_castpd_si128(s);
    // inexact and even: step one ulp toward the exact sum (up in magnitude when err and s agree)
    const __m128i inexact = _mm_castpd_si128(_mm_cmpneq_pd(err, _mm_setzero_pd()));
    const __m128i low = _mm_and_si128(sb, _mm_set_epi32(0, 1, 0, 1));
    __m128i even = _mm_cmpeq_epi32(low, _mm_setzero_si128());
    even = _mm_shuffle_epi32(even, _MM_SHUFFLE(2, 2, 0, 0));
    const __m128i differ = _mm_shuffle_epi32(_mm_srai_epi32(_mm_xor_si128(_mm_castpd_si128(err), sb), 31),
                                             _MM_SHUFFLE(3, 3, 1, 1));
    // signs agree: +1 (away from zero); they differ: -1, as 64-bit integers on the bit pattern
    const __m128i step = _mm_or_si128(differ, _mm_andnot_si128(differ, _mm_set_epi32(0, 1, 0, 1)));
    const __m128i adjust = _mm_and_si128(_mm_and_si128(inexact, even), step);
    return _mm_castsi128_pd(_mm_add_epi64(sb, adjust));
  }
  NUCLEUS_INLINE static f fma(f a, f b, f c) {
    const __m128 ah = _mm_movehl_ps(a, a), bh = _mm_movehl_ps(b, b), ch = _mm_movehl_ps(c, c);
    const __m128d lo = fma_half(_mm_cvtps_pd(a), _mm_cvtps_pd(b), _mm_cvtps_pd(c));
    const __m128d hi = fma_half(_mm_cvtps_pd(ah), _mm_cvtps_pd(bh), _mm_cvtps_pd(ch));
    return _mm_movelh_ps(_mm_cvtpd_ps(lo), _mm_cvtpd_ps(hi));
  }
  NUCLEUS_INLINE static f max(f a, f b) { return _mm_max_ps(a, b); }
  NUCLEUS_INLINE static m gt(f a, f b) { return _mm_cmpgt_ps(a, b); }
  NUCLEUS_INLINE static m ge(f a, f b) { return _mm_cmpge_ps(a, b); }
  NUCLEUS_INLINE static m eq(f a, f b) { return _mm_cmpeq_ps(a, b); }
  NUCLEUS_INLINE static m lor(m a, m b) { return _mm_or_ps(a, b); }
  NUCLEUS_INLINE static f select(m k, f a, f b) { return _mm_or_ps(_mm_and_ps(k, a), _mm_andnot_ps(k, b)); }
  NUCLEUS_INLINE static std::uint32_t bits(m k) { return static_cast<std::uint32_t>(_mm_movemask_ps(k)); }
  NUCLEUS_INLINE static f select_bits(std::uint32_t b, f a, f c) {
    const __m128i lane_bit = _mm_setr_epi32(1, 2, 4, 8);
    const __m128i on =
        _mm_cmpeq_epi32(_mm_and_si128(_mm_set1_epi32(static_cast<int>(b & 0xFu)), lane_bit), lane_bit);
    return select(_mm_castsi128_ps(on), a, c);
  }
  NUCLEUS_INLINE static i zero_i() { return _mm_setzero_si128(); }
  NUCLEUS_INLINE static i add_i(i a, i b) { return _mm_add_epi32(a, b); }
  NUCLEUS_INLINE static i cvtt(f a) { return _mm_cvttps_epi32(a); }
  NUCLEUS_INLINE static f cvt(i a) { return _mm_cvtepi32_ps(a); }
  NUCLEUS_INLINE static void store_i(std::int32_t* p, i v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v);
  }
  using d = __m128d;
  using md = __m128d;
  static constexpr std::size_t dwidth = 2;
  NUCLEUS_INLINE static d load_d(const float* p) {
    return _mm_cvtps_pd(_mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  NUCLEUS_INLINE static d splat_d(double x) { return _mm_set1_pd(x); }
  NUCLEUS_INLINE static d add_d(d a, d b) { return _mm_add_pd(a, b); }
  NUCLEUS_INLINE static d sub_d(d a, d b) { return _mm_sub_pd(a, b); }
  NUCLEUS_INLINE static d fma_d(d a, d b, d c) {  // no FMA hardware: std::fma, exact, lane by lane
    alignas(16) double x[2], y[2], z[2];
    _mm_store_pd(x, a);
    _mm_store_pd(y, b);
    _mm_store_pd(z, c);
    return _mm_setr_pd(std::fma(x[0], y[0], z[0]), std::fma(x[1], y[1], z[1]));
  }
  NUCLEUS_INLINE static md gt_d(d a, d b) { return _mm_cmpgt_pd(a, b); }
  NUCLEUS_INLINE static d select_d(md k, d a, d b) {
    return _mm_or_pd(_mm_and_pd(k, a), _mm_andnot_pd(k, b));
  }
  NUCLEUS_INLINE static void store_d(double* p, d v) { _mm_storeu_pd(p, v); }
  using w = __m128i;
  NUCLEUS_INLINE static w zero_w() { return _mm_setzero_si128(); }
  NUCLEUS_INLINE static w mac_u32(w acc, i a, i b) {
    const __m128i odd = _mm_mul_epu32(_mm_srli_epi64(a, 32), _mm_srli_epi64(b, 32));
    return _mm_add_epi64(acc, _mm_add_epi64(_mm_mul_epu32(a, b), odd));
  }
  NUCLEUS_INLINE static f exp2_int(f k) {
    const __m128i b = _mm_sub_epi32(_mm_castps_si128(k), _mm_set1_epi32(0x4B400000 - 127));
    return _mm_castsi128_ps(_mm_slli_epi32(b, 23));
  }
};

#elif NUCLEUS_TARGET_ISA == 4  // NEON (AdvSIMD): the aarch64 baseline
#define NUCLEUS_REG_UNROLL 1
#define NUCLEUS_REG_SCALAR 0

struct reg {
  using f = float32x4_t;
  using i = int32x4_t;
  using m = uint32x4_t;
  static constexpr std::size_t width = 4;
  static constexpr bool has_compress = false;
  NUCLEUS_INLINE static f load(const float* p) { return vld1q_f32(p); }
  NUCLEUS_INLINE static f load(const bf16* p) {
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(reinterpret_cast<const std::uint16_t*>(p)), 16));
  }
  NUCLEUS_INLINE static f load(const f16* p) {  // exact, as every half converts to float
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const std::uint16_t*>(p))));
  }
  NUCLEUS_INLINE static bool any_gt_i16(const bf16* p, std::int16_t t) {
    const int16x8_t tv = vdupq_n_s16(t);
    const auto* q = reinterpret_cast<const std::int16_t*>(p);
    uint16x8_t acc = vcgtq_s16(vld1q_s16(q), tv);
    for (int j = 1; j < 8; ++j) acc = vorrq_u16(acc, vcgtq_s16(vld1q_s16(q + 8 * j), tv));
    return vmaxvq_u16(acc) != 0;
  }
  NUCLEUS_INLINE static void store(float* p, f v) { vst1q_f32(p, v); }
  NUCLEUS_INLINE static f splat(float x) { return vdupq_n_f32(x); }
  NUCLEUS_INLINE static f add(f a, f b) { return vaddq_f32(a, b); }
  NUCLEUS_INLINE static f sub(f a, f b) { return vsubq_f32(a, b); }
  NUCLEUS_INLINE static f mul(f a, f b) { return vmulq_f32(a, b); }
  NUCLEUS_INLINE static f fma(f a, f b, f c) { return vfmaq_f32(c, a, b); }  // one rounding
  // x86's rule, not vmaxq's (which returns NaN if either lane is): a NaN in a yields b.
  NUCLEUS_INLINE static f max(f a, f b) { return vbslq_f32(vcgtq_f32(a, b), a, b); }
  NUCLEUS_INLINE static m gt(f a, f b) { return vcgtq_f32(a, b); }
  NUCLEUS_INLINE static m ge(f a, f b) { return vcgeq_f32(a, b); }
  NUCLEUS_INLINE static m eq(f a, f b) { return vceqq_f32(a, b); }
  NUCLEUS_INLINE static m lor(m a, m b) { return vorrq_u32(a, b); }
  NUCLEUS_INLINE static f select(m k, f a, f b) { return vbslq_f32(k, a, b); }
  NUCLEUS_INLINE static std::uint32_t bits(m k) {
    const int32x4_t shift = {0, 1, 2, 3};
    return vaddvq_u32(vshlq_u32(vshrq_n_u32(k, 31), shift));
  }
  NUCLEUS_INLINE static f select_bits(std::uint32_t b, f a, f c) {
    const uint32x4_t lane_bit = {1, 2, 4, 8};
    return vbslq_f32(vtstq_u32(vdupq_n_u32(b), lane_bit), a, c);
  }
  NUCLEUS_INLINE static i zero_i() { return vdupq_n_s32(0); }
  NUCLEUS_INLINE static i add_i(i a, i b) { return vaddq_s32(a, b); }
  NUCLEUS_INLINE static i cvtt(f a) { return vcvtq_s32_f32(a); }  // toward zero
  NUCLEUS_INLINE static f cvt(i a) { return vcvtq_f32_s32(a); }
  NUCLEUS_INLINE static void store_i(std::int32_t* p, i v) { vst1q_s32(p, v); }
  using d = float64x2_t;
  using md = uint64x2_t;
  static constexpr std::size_t dwidth = 2;
  NUCLEUS_INLINE static d load_d(const float* p) { return vcvt_f64_f32(vld1_f32(p)); }
  NUCLEUS_INLINE static d splat_d(double x) { return vdupq_n_f64(x); }
  NUCLEUS_INLINE static d add_d(d a, d b) { return vaddq_f64(a, b); }
  NUCLEUS_INLINE static d sub_d(d a, d b) { return vsubq_f64(a, b); }
  NUCLEUS_INLINE static d fma_d(d a, d b, d c) { return vfmaq_f64(c, a, b); }  // one rounding
  NUCLEUS_INLINE static md gt_d(d a, d b) { return vcgtq_f64(a, b); }
  NUCLEUS_INLINE static d select_d(md k, d a, d b) { return vbslq_f64(k, a, b); }
  NUCLEUS_INLINE static void store_d(double* p, d v) { vst1q_f64(p, v); }
  // Lanes 0 and 2 add into the first 64-bit lane, 1 and 3 into the second (x86 pairs 0-1 and 2-3;
  // lane_sum adds every lane, so only the order of exact integer additions differs).
  using w = uint64x2_t;
  NUCLEUS_INLINE static w zero_w() { return vdupq_n_u64(0); }
  NUCLEUS_INLINE static w mac_u32(w acc, i a, i b) {
    const uint32x4_t ua = vreinterpretq_u32_s32(a), ub = vreinterpretq_u32_s32(b);
    return vmlal_high_u32(vmlal_u32(acc, vget_low_u32(ua), vget_low_u32(ub)), ua, ub);
  }
  NUCLEUS_INLINE static f exp2_int(f k) {
    const int32x4_t b = vsubq_s32(vreinterpretq_s32_f32(k), vdupq_n_s32(0x4B400000 - 127));
    return vreinterpretq_f32_s32(vshlq_n_s32(b, 23));
  }
};

#elif NUCLEUS_TARGET_ISA == 5  // SVE at a vector length of 256 bits (opt-in: NUCLEUS_SVE256)
#define NUCLEUS_REG_UNROLL 1
#define NUCLEUS_REG_SCALAR 0

// Fixed-length SVE types (-msve-vector-bits=256): unlike the sizeless svfloat32_t they can be the
// packs' struct members and array elements. Dispatch runs this target only where the kernel reports
// a 256-bit vector length (simd/isa.hpp); elsewhere these registers would hold a different count.
typedef svfloat32_t sve_f __attribute__((arm_sve_vector_bits(256)));
typedef svint32_t sve_i __attribute__((arm_sve_vector_bits(256)));
typedef svuint32_t sve_u __attribute__((arm_sve_vector_bits(256)));
typedef svbool_t sve_b __attribute__((arm_sve_vector_bits(256)));
typedef svfloat64_t sve_d __attribute__((arm_sve_vector_bits(256)));
typedef svuint64_t sve_w __attribute__((arm_sve_vector_bits(256)));

struct reg {
  using f = sve_f;
  using i = sve_i;
  using m = sve_b;
  static constexpr std::size_t width = 8;
  static constexpr bool has_compress = true;
  NUCLEUS_INLINE static svbool_t all() { return svptrue_b32(); }
  NUCLEUS_INLINE static f load(const float* p) { return svld1_f32(all(), p); }
  NUCLEUS_INLINE static f load(const bf16* p) {  // 16-bit lanes widened, then moved to the high half
    const svuint32_t h = svld1uh_u32(all(), reinterpret_cast<const std::uint16_t*>(p));
    return svreinterpret_f32_u32(svlsl_n_u32_x(all(), h, 16));
  }
  NUCLEUS_INLINE static f load(const f16* p) {  // exact: FCVT reads the low half of each 32-bit lane
    const svuint32_t h = svld1uh_u32(all(), reinterpret_cast<const std::uint16_t*>(p));
    return svcvt_f32_f16_x(all(), svreinterpret_f16_u32(h));
  }
  NUCLEUS_INLINE static bool any_gt_i16(const bf16* p, std::int16_t t) {
    const svbool_t all16 = svptrue_b16();
    const svint16_t tv = svdup_n_s16(t);
    const auto* q = reinterpret_cast<const std::int16_t*>(p);
    svbool_t acc = svcmpgt_s16(all16, svld1_s16(all16, q), tv);
    for (int j = 1; j < 4; ++j)
      acc = svorr_b_z(all16, acc, svcmpgt_s16(all16, svld1_s16(all16, q + 16 * j), tv));
    return svptest_any(all16, acc);
  }
  NUCLEUS_INLINE static void store(float* p, f v) { svst1_f32(all(), p, v); }
  NUCLEUS_INLINE static f splat(float x) { return svdup_n_f32(x); }
  NUCLEUS_INLINE static f add(f a, f b) { return svadd_f32_x(all(), a, b); }
  NUCLEUS_INLINE static f sub(f a, f b) { return svsub_f32_x(all(), a, b); }
  NUCLEUS_INLINE static f mul(f a, f b) { return svmul_f32_x(all(), a, b); }
  NUCLEUS_INLINE static f fma(f a, f b, f c) { return svmla_f32_x(all(), c, a, b); }  // one rounding
  // x86's rule, not FMAX's (which returns NaN if either lane is): a NaN in a yields b.
  NUCLEUS_INLINE static f max(f a, f b) { return svsel_f32(svcmpgt_f32(all(), a, b), a, b); }
  NUCLEUS_INLINE static m gt(f a, f b) { return svcmpgt_f32(all(), a, b); }
  NUCLEUS_INLINE static m ge(f a, f b) { return svcmpge_f32(all(), a, b); }
  NUCLEUS_INLINE static m eq(f a, f b) { return svcmpeq_f32(all(), a, b); }
  NUCLEUS_INLINE static m lor(m a, m b) { return svorr_b_z(all(), a, b); }
  NUCLEUS_INLINE static f select(m k, f a, f b) { return svsel_f32(k, a, b); }
  NUCLEUS_INLINE static svuint32_t lane_bit() {
    return svlsl_u32_x(all(), svdup_n_u32(1), svindex_u32(0, 1));
  }
  // SVE has no movemask: each set lane contributes its bit, joined by an OR across the register.
  NUCLEUS_INLINE static std::uint32_t bits(m k) {
    return svorv_u32(all(), svsel_u32(k, lane_bit(), svdup_n_u32(0)));
  }
  NUCLEUS_INLINE static m from_bits(std::uint32_t b) {
    return svcmpne_n_u32(all(), svand_u32_x(all(), svdup_n_u32(b & 0xFFu), lane_bit()), 0);
  }
  NUCLEUS_INLINE static f select_bits(std::uint32_t b, f a, f c) { return svsel_f32(from_bits(b), a, c); }
  NUCLEUS_INLINE static i zero_i() { return svdup_n_s32(0); }
  NUCLEUS_INLINE static i add_i(i a, i b) { return svadd_s32_x(all(), a, b); }
  NUCLEUS_INLINE static i cvtt(f a) { return svcvt_s32_f32_x(all(), a); }  // toward zero
  NUCLEUS_INLINE static f cvt(i a) { return svcvt_f32_s32_x(all(), a); }   // to nearest, as cvtdq2ps
  NUCLEUS_INLINE static void store_i(std::int32_t* p, i v) { svst1_s32(all(), p, v); }
  using d = sve_d;
  using md = sve_b;
  static constexpr std::size_t dwidth = 4;
  NUCLEUS_INLINE static d load_d(const float* p) {  // FCVT reads the low half of each 64-bit lane
    const svuint64_t h = svld1uw_u64(svptrue_b64(), reinterpret_cast<const std::uint32_t*>(p));
    return svcvt_f64_f32_x(svptrue_b64(), svreinterpret_f32_u64(h));
  }
  NUCLEUS_INLINE static d splat_d(double x) { return svdup_n_f64(x); }
  NUCLEUS_INLINE static d add_d(d a, d b) { return svadd_f64_x(svptrue_b64(), a, b); }
  NUCLEUS_INLINE static d sub_d(d a, d b) { return svsub_f64_x(svptrue_b64(), a, b); }
  NUCLEUS_INLINE static d fma_d(d a, d b, d c) {
    return svmla_f64_x(svptrue_b64(), c, a, b);
  }  // one rounding
  NUCLEUS_INLINE static md gt_d(d a, d b) { return svcmpgt_f64(svptrue_b64(), a, b); }
  NUCLEUS_INLINE static d select_d(md k, d a, d b) { return svsel_f64(k, a, b); }
  NUCLEUS_INLINE static void store_d(double* p, d v) { svst1_f64(svptrue_b64(), p, v); }
  // A lane pair's two products into its 64-bit lane, as x86 pairs them; 64-bit MUL, since the
  // widening 32 x 32-bit multiplies (UMULLB/T) are SVE2.
  using w = sve_w;
  NUCLEUS_INLINE static w zero_w() { return svdup_n_u64(0); }
  NUCLEUS_INLINE static w mac_u32(w acc, i a, i b) {
    const svbool_t p = svptrue_b64();
    const svuint64_t ua = svreinterpret_u64_s32(a), ub = svreinterpret_u64_s32(b);
    const svuint64_t even =
        svmul_u64_x(p, svand_n_u64_x(p, ua, 0xFFFFFFFFu), svand_n_u64_x(p, ub, 0xFFFFFFFFu));
    const svuint64_t odd = svmul_u64_x(p, svlsr_n_u64_x(p, ua, 32), svlsr_n_u64_x(p, ub, 32));
    return svadd_u64_x(p, acc, svadd_u64_x(p, even, odd));
  }
  NUCLEUS_INLINE static f exp2_int(f k) {
    const svint32_t b = svsub_n_s32_x(all(), svreinterpret_s32_f32(k), 0x4B400000 - 127);
    return svreinterpret_f32_s32(svlsl_n_s32_x(all(), b, 23));
  }
  // As AVX-512's compress: COMPACT packs the set lanes low, one full store each for values and ids.
  NUCLEUS_INLINE static std::size_t compress(std::uint32_t bits, f v, const std::int32_t* ids,
                                             std::size_t first, float* vals_out, std::int32_t* ids_out) {
    const svbool_t k = from_bits(bits);
    svst1_f32(all(), vals_out, svcompact_f32(k, v));
    // only the set lanes are read: the last pack's may lie past the end
    const svint32_t id = ids ? svld1_s32(k, ids + first) : svindex_s32(static_cast<std::int32_t>(first), 1);
    svst1_s32(all(), ids_out, svcompact_s32(k, id));
    return static_cast<std::size_t>(std::popcount(bits & 0xFFu));
  }
};

#else  // scalar: one lane per "register"
#define NUCLEUS_REG_UNROLL 0
#define NUCLEUS_REG_SCALAR 1

struct reg {
  using f = float;
  using i = std::int32_t;
  using m = bool;
  static constexpr std::size_t width = 1;
  static constexpr bool has_compress = false;
  template <class T>
  NUCLEUS_INLINE static f load(const T* p) {
    return to_float(*p);
  }
  NUCLEUS_INLINE static bool any_gt_i16(const bf16* p, std::int16_t t) {
    bool any = false;
    for (int j = 0; j < 64; ++j) any = any || static_cast<std::int16_t>(p[j].bits) > t;
    return any;
  }
  NUCLEUS_INLINE static void store(float* p, f v) { *p = v; }
  NUCLEUS_INLINE static f splat(float x) { return x; }
  NUCLEUS_INLINE static f add(f a, f b) { return a + b; }
  NUCLEUS_INLINE static f sub(f a, f b) { return a - b; }
  NUCLEUS_INLINE static f mul(f a, f b) { return a * b; }
  NUCLEUS_INLINE static f fma(f a, f b, f c) { return std::fma(a, b, c); }
  NUCLEUS_INLINE static f max(f a, f b) { return a > b ? a : b; }
  NUCLEUS_INLINE static m gt(f a, f b) { return a > b; }
  NUCLEUS_INLINE static m ge(f a, f b) { return a >= b; }
  NUCLEUS_INLINE static m eq(f a, f b) { return a == b; }
  NUCLEUS_INLINE static m lor(m a, m b) { return a || b; }
  NUCLEUS_INLINE static f select(m k, f a, f b) { return k ? a : b; }
  NUCLEUS_INLINE static std::uint32_t bits(m k) { return k ? 1u : 0u; }
  NUCLEUS_INLINE static f select_bits(std::uint32_t b, f a, f c) { return b & 1u ? a : c; }
  NUCLEUS_INLINE static i zero_i() { return 0; }
  NUCLEUS_INLINE static i add_i(i a, i b) { return a + b; }
  NUCLEUS_INLINE static i cvtt(f a) { return static_cast<std::int32_t>(a); }
  NUCLEUS_INLINE static f cvt(i a) { return static_cast<float>(a); }
  NUCLEUS_INLINE static void store_i(std::int32_t* p, i v) { *p = v; }
  using d = double;
  using md = bool;
  static constexpr std::size_t dwidth = 1;
  NUCLEUS_INLINE static d load_d(const float* p) { return static_cast<double>(*p); }
  NUCLEUS_INLINE static d splat_d(double x) { return x; }
  NUCLEUS_INLINE static d add_d(d a, d b) { return a + b; }
  NUCLEUS_INLINE static d sub_d(d a, d b) { return a - b; }
  NUCLEUS_INLINE static d fma_d(d a, d b, d c) { return std::fma(a, b, c); }
  NUCLEUS_INLINE static md gt_d(d a, d b) { return a > b; }
  NUCLEUS_INLINE static d select_d(md k, d a, d b) { return k ? a : b; }
  NUCLEUS_INLINE static void store_d(double* p, d v) { *p = v; }
  using w = std::uint64_t;
  NUCLEUS_INLINE static w zero_w() { return 0; }
  NUCLEUS_INLINE static w mac_u32(w acc, i a, i b) {
    return acc + std::uint64_t{static_cast<std::uint32_t>(a)} * static_cast<std::uint32_t>(b);
  }
  NUCLEUS_INLINE static f exp2_int(f k) {
    const auto b = static_cast<std::uint32_t>(std::bit_cast<std::int32_t>(k) - (0x4B400000 - 127));
    return std::bit_cast<float>(b << 23);
  }
};

#endif

#endif  // NUCLEUS_TARGET_ISA
