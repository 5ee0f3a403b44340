// Row reductions over packs: max, argmax, exp-and-sum, and locating a draw in the exp sums.
//
// The value a kernel sees for logit x is y = (x - shift) * scale: the row maximum is subtracted and
// the temperature folded in on the fly, so no pass rewrites the logits.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "nucleus/simd/exp.hpp"
#include "nucleus/simd/pack.hpp"

namespace nucleus::detail {

inline constexpr std::size_t block_elems = 1024;  // exp sums are kept per block to locate a draw fast
inline constexpr std::size_t hist_bins = 2048;    // top-p's mass histogram

// Calls f(pack, first_index) for every pack of x; the last partial pack is padded with `fill`.
template <logit_type T, class F>
NUCLEUS_INLINE void for_each_pack(const T* x, std::size_t n, float fill, F&& f) {
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) f(load(x + i), i);
  if (i < n) f(load_partial(x + i, n - i, fill), i);
}

// Largest logit, NaN ignored; -inf when there is none.
template <logit_type T>
float max_value(const T* x, std::size_t n) noexcept {
  fpack acc = splat(-inf());
  for_each_pack(x, n, -inf(), [&](const fpack& v, std::size_t) NUCLEUS_LAMBDA_INLINE { acc = max(v, acc); });
  lane_array a = to_lanes(acc);
  float m = -inf();
  for (float v : a.v) m = v > m ? v : m;
  return m;
}

struct argmax_result {
  float value;
  std::int64_t index;  // -1: no logit above -inf
};

// First index of the largest logit; NaN and -inf are never chosen. One max per lane at memory
// speed; each lane remembers the first block where it reached its maximum, and only the earliest
// such block holding the row maximum is scanned again for the index.
template <logit_type T>
argmax_result argmax(const T* x, std::size_t n) noexcept {
  constexpr std::size_t block = 16 * lanes;
  fpack best = splat(-inf());
  fpack best_block = splat(-1.0f);  // block numbers stay below 2^24: exact in float
  for (std::size_t b0 = 0; b0 < n; b0 += block) {
    const std::size_t len = n - b0 < block ? n - b0 : block;
    fpack bm = splat(-inf());
    for_each_pack(x + b0, len, -inf(),
                  [&](const fpack& v, std::size_t) NUCLEUS_LAMBDA_INLINE { bm = max(v, bm); });
    const mpack up = gt(bm, best);
    if (!any(up)) continue;
    best = select(up, bm, best);
    best_block = select(up, splat(static_cast<float>(b0 / block)), best_block);
  }
  const lane_array a = to_lanes(best);
  const lane_array ab = to_lanes(best_block);
  float m = -inf();
  for (float v : a.v) m = v > m ? v : m;
  if (!(m > -inf())) return {-inf(), -1};
  float first = -1.0f;
  for (std::size_t l = 0; l < lanes; ++l)
    if (a.v[l] == m && (first < 0.0f || ab.v[l] < first)) first = ab.v[l];
  const std::size_t b0 = static_cast<std::size_t>(first) * block;
  const std::size_t end = n - b0 < block ? n : b0 + block;
  for (std::size_t i = b0; i < end; ++i)
    if (to_float(x[i]) == m) return {m, static_cast<std::int64_t>(i)};
  return {m, -1};  // unreachable: the block holds m
}

// How many logits are strictly greater than v (NaN never is): a token's rank is this plus one.
template <logit_type T>
std::size_t count_greater(const T* x, std::size_t n, float v) noexcept {
  const fpack t = splat(v);
  std::size_t c = 0;
  // Padding lanes hold -inf, which is greater than nothing.
  for_each_pack(x, n, -inf(), [&](const fpack& p, std::size_t) NUCLEUS_LAMBDA_INLINE {
    c += static_cast<std::size_t>(std::popcount(mask_bits(gt(p, t))));
  });
  return c;
}

NUCLEUS_INLINE fpack scaled(const fpack& x, const fpack& shift, const fpack& scale) noexcept {
  return mul(sub(x, shift), scale);
}
NUCLEUS_INLINE float scaled(float x, float shift, float scale) noexcept {
  return (x - shift) * scale;
}

// Sum of exp((x - shift) * scale). With `blocks`, also the sum of each run of block_elems logits
// (each block folded on its own, the total added in double), which lets a draw find its block.
template <logit_type T>
double exp_sum(const T* x, std::size_t n, float shift, float scale, float* blocks,
               std::size_t block_elems) noexcept {
  const fpack sh = splat(shift), sc = splat(scale);
  double total = 0.0;
  for (std::size_t b0 = 0, bi = 0; b0 < n; b0 += block_elems, ++bi) {
    const std::size_t len = n - b0 < block_elems ? n - b0 : block_elems;
    fpack acc = splat(0.0f);
    // Padding lanes hold -inf, whose exp is 0: it adds nothing.
    for_each_pack(x + b0, len, -inf(), [&](const fpack& v, std::size_t) NUCLEUS_LAMBDA_INLINE {
      acc = add(acc, exp(scaled(v, sh, sc)));
    });
    const float s = fold_sum(acc);
    if (blocks) blocks[bi] = s;
    total += s;
  }
  return total;
}

// out[i] = exp((x[i] - shift) * scale)
template <logit_type T>
void exp_store(const T* x, std::size_t n, float shift, float scale, float* out) noexcept {
  const fpack sh = splat(shift), sc = splat(scale);
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) store(out + i, exp(scaled(load(x + i), sh, sc)));
  for (; i < n; ++i) out[i] = exp(scaled(to_float(x[i]), shift, scale));
}

// Index of the element where the running sum of exp values first exceeds `target`, given the block
// sums exp_sum wrote. Rounding can leave the target unreached; then the last element with
// non-zero weight is taken. -1 if every weight is zero.
template <logit_type T>
std::int64_t pick(const T* x, std::size_t n, float shift, float scale, const float* blocks,
                  std::size_t block_elems, double target, float* scratch) noexcept {
  const std::size_t nb = (n + block_elems - 1) / block_elems;
  double before = 0.0;
  std::size_t b = 0, last_nonzero = nb;
  for (; b < nb; ++b) {
    if (blocks[b] > 0.0f) last_nonzero = b;
    if (before + blocks[b] > target && blocks[b] > 0.0f) break;
    before += blocks[b];
  }
  if (b == nb) {
    if (last_nonzero == nb) return -1;
    b = last_nonzero;
    target = before;  // unreachable: walk the block to its last non-zero weight
    before = 0.0;
    for (std::size_t j = 0; j < b; ++j) before += blocks[j];
  }
  const std::size_t b0 = b * block_elems;
  const std::size_t len = n - b0 < block_elems ? n - b0 : block_elems;
  exp_store(x + b0, len, shift, scale, scratch);
  double cum = before;
  std::int64_t last = -1;
  for (std::size_t j = 0; j < len; ++j) {
    if (scratch[j] <= 0.0f) continue;
    cum += scratch[j];
    last = static_cast<std::int64_t>(b0 + j);
    if (cum > target) return last;
  }
  return last;
}

}  // namespace nucleus::detail
