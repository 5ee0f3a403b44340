// Threshold compaction: keep the candidates whose scaled logit reaches a threshold.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "nucleus/kernels/reduce.hpp"

namespace nucleus::detail {

// Keeps x[i] with (x[i] - shift) * scale >= threshold (NaN never), writing their values and ids in
// order. ids == nullptr means id = index. In place (vals_out == x, ids_out == ids) is allowed for
// float rows.
template <logit_type T>
std::size_t compact_ge(const T* x, const std::int32_t* ids, std::size_t n, float shift,
                              float scale, float threshold, float* vals_out, std::int32_t* ids_out) noexcept {
  const fpack sh = splat(shift), sc = splat(scale), th = splat(threshold);
  std::size_t out = 0;
  for_each_pack(x, n, -inf(), [&](const fpack& v, std::size_t base) {
    // Work per pack is one compare; per survivor, one write (padding lanes never pass: -inf).
    for (std::uint64_t bits = mask_bits(ge(scaled(v, sh, sc), th)); bits; bits &= bits - 1) {
      const std::size_t i = base + static_cast<std::size_t>(std::countr_zero(bits));
      if (i >= n) break;
      vals_out[out] = to_float(x[i]);
      ids_out[out] = ids ? ids[i] : static_cast<std::int32_t>(i);
      ++out;
    }
  });
  return out;
}

// Order-preserving integer image of a float: a < b  <=>  ordered(a) < ordered(b) (for non-NaN).
inline std::uint32_t ordered(float v) noexcept {
  const auto b = std::bit_cast<std::uint32_t>(v);
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
