// Threshold compaction: keep the candidates whose scaled logit reaches a threshold.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nucleus/kernels/reduce.hpp"

namespace nucleus::detail {

// Keeps x[i] with (x[i] - shift) * scale >= threshold (NaN never), writing their values and ids in
// order. ids == nullptr means id = index. In place (vals_out == x, ids_out == ids) is allowed.
inline std::size_t compact_ge(const float* x, const std::int32_t* ids, std::size_t n, float shift,
                              float scale, float threshold, float* vals_out, std::int32_t* ids_out) noexcept {
  const fpack sh = splat(shift), sc = splat(scale), th = splat(threshold);
  std::size_t out = 0;
  for_each_pack(x, n, -inf(), [&](const fpack& v, std::size_t base) {
    const mpack m = ge(scaled(v, sh, sc), th);
    if (!any(m)) return;
    alignas(64) bool keep[lanes];
    store_mask(keep, m);
    const lane_array a = to_lanes(v);
    const std::size_t len = n - base < lanes ? n - base : lanes;
    for (std::size_t l = 0; l < len; ++l) {
      if (!keep[l]) continue;
      vals_out[out] = a.v[l];
      ids_out[out] = ids ? ids[base + l] : static_cast<std::int32_t>(base + l);
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
