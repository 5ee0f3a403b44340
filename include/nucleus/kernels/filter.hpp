// Threshold compaction: keep the candidates whose scaled logit reaches a threshold.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "nucleus/kernels/reduce.hpp"

namespace nucleus::detail {

// Keeps x[i] with (x[i] - shift) * scale >= threshold (NaN never), writing their values and ids in
// order. ids == nullptr means id = index. In place (vals_out == x, ids_out == ids) is allowed for
// float rows. vals_out and ids_out need compact_slack entries of room past the last one kept.
inline constexpr std::size_t compact_slack = 16;

#if !defined(NUCLEUS_NO_SIMD) && defined(__AVX512F__)
// Writes the lanes of v set in bits (and their ids) at vals_out/ids_out + out; returns the new out.
// Compress in registers, then one full store per register: its tail is overwritten by the next store
// (or lies in the slack) and never reaches past this pack, so in place stays safe. Out of line, so
// the scan loop keeps its registers for itself.
[[gnu::noinline]] inline std::size_t compress_pack(const fpack& v, std::uint64_t bits, std::size_t base,
                                                   const std::int32_t* ids, float* vals_out,
                                                   std::int32_t* ids_out, std::size_t out) noexcept {
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (std::size_t r = 0; r < regs && bits; ++r, bits >>= 16) {
    const auto k = static_cast<__mmask16>(bits);
    if (!k) continue;
    const std::size_t first = base + r * width;
    _mm512_storeu_ps(vals_out + out, _mm512_maskz_compress_ps(k, v.r[r]));
    const __m512i id = ids ? _mm512_maskz_loadu_epi32(k, ids + first)
                           : _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(first)), iota);
    _mm512_storeu_si512(ids_out + out, _mm512_maskz_compress_epi32(k, id));
    out += static_cast<std::size_t>(std::popcount(static_cast<unsigned>(k)));
  }
  return out;
}
#endif

template <logit_type T>
std::size_t compact_ge(const T* x, const std::int32_t* ids, std::size_t n, float shift, float scale,
                       float threshold, float* vals_out, std::int32_t* ids_out) noexcept {
  const fpack sh = splat(shift), sc = splat(scale), th = splat(threshold);
  std::size_t out = 0;
  for_each_pack(x, n, -inf(), [&](const fpack& v, std::size_t base) NUCLEUS_LAMBDA_INLINE {
    const mpack keep = ge(scaled(v, sh, sc), th);
    if (!any(keep)) return;  // most packs of a narrowing filter keep nothing: skip the readout
    std::uint64_t bits = mask_bits(keep);
    if (n - base < lanes) bits &= (std::uint64_t{1} << (n - base)) - 1;  // never the padding
#if !defined(NUCLEUS_NO_SIMD) && defined(__AVX512F__)
    if (bits) out = compress_pack(v, bits, base, ids, vals_out, ids_out, out);
#else
    // Work per pack is one compare; per survivor, one write.
    for (; bits; bits &= bits - 1) {
      const std::size_t i = base + static_cast<std::size_t>(std::countr_zero(bits));
      vals_out[out] = to_float(x[i]);
      ids_out[out] = ids ? ids[i] : static_cast<std::int32_t>(i);
      ++out;
    }
#endif
  });
  return out;
}

// Order-preserving integer image of a float: a < b  <=>  ordered(a) < ordered(b) (for non-NaN).
// -0 and +0 compare equal, so they share one image (ties between them go by id, like any tie).
inline std::uint32_t ordered(float v) noexcept {
  const auto b = std::bit_cast<std::uint32_t>(v == 0.0f ? 0.0f : v);
  return b & 0x80000000u ? ~b : b | 0x80000000u;
}
inline float from_ordered(std::uint32_t o) noexcept {
  return std::bit_cast<float>(o & 0x80000000u ? o & 0x7FFFFFFFu : ~o);
}

// One integer that orders candidates by (logit descending, id ascending): a larger key ranks first.
inline std::uint64_t rank_key(float v, std::int32_t id) noexcept {
  return (std::uint64_t{ordered(v)} << 32) | (0xFFFFFFFFu - static_cast<std::uint32_t>(id));
}
inline float key_value(std::uint64_t k) noexcept {
  return from_ordered(static_cast<std::uint32_t>(k >> 32));
}
inline std::int32_t key_id(std::uint64_t k) noexcept {
  return static_cast<std::int32_t>(0xFFFFFFFFu - static_cast<std::uint32_t>(k));
}

}  // namespace nucleus::detail
