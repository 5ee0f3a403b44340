// Top-k selection without sorting the row: a running threshold discards most logits with one
// compare per pack; only the k survivors are sorted.
//
// Compiled once per target by simd/targets.hpp; included on its own, it brings in the dispatcher.
#if !defined(NUCLEUS_TARGET_ISA)
#include "nucleus/simd/targets.hpp"
#else

// The k best of x by (value desc, id asc), written as rank keys to keys[0..k) in rank order.
// keys must hold select_capacity(k) entries. NaN and -inf are never selected; returns the count
// (< k when fewer candidates exist). ids == nullptr means id = index.
template <logit_type T>
std::size_t select_top_k(const T* x, const std::int32_t* ids, std::size_t n, std::size_t k,
                         std::uint64_t* keys) noexcept {
  if (k == 0) return 0;
  const std::size_t cap = select_capacity(k);
  std::size_t count = 0;
  float threshold = -inf();
  // Priming: the maxima of the first k packs are k distinct candidates, so the k-th best of the row
  // is at least the smallest of them, t. Anything at or below the float just under t can never make
  // the top k; starting from there skips most of the inserts the threshold would otherwise need to
  // settle. (Values equal to t still get in: ties are decided by id below.)
  if (k * lanes <= n) {
    float t = inf();
    for (std::size_t c = 0; c < k && t > -inf(); ++c) {
      const float m = lane_max(load(x + c * lanes));
      t = m < t ? m : t;
    }
    if (t > -inf()) threshold = std::nextafter(t, -inf());
  }
  auto shrink = [&] {
    std::nth_element(keys, keys + (k - 1), keys + count, std::greater<>{});
    count = k;
    threshold = key_value(keys[k - 1]);
  };
  // Strictly greater: a later logit equal to the k-th best has a larger id and loses the tie. That
  // needs ids ascending in scan order, which holds for every candidate set the library builds
  // except a top-k result, which is already in rank order.
  for_each_pack(x, n, -inf(), [&](const fpack& v, std::size_t base) NUCLEUS_LAMBDA_INLINE {
    const mpack above = gt(v, splat(threshold));
    if (!any(above)) return;  // the common case once the threshold has settled: no lane to read out
    for (std::uint64_t bits = mask_bits(above); bits; bits &= bits - 1) {
      const std::size_t i = base + static_cast<std::size_t>(std::countr_zero(bits));
      if (i >= n) break;
      const float xi = to_float(x[i]);
      if (!(xi > threshold)) continue;  // the threshold rose within this pack
      keys[count++] = rank_key(xi, ids ? ids[i] : static_cast<std::int32_t>(i));
      if (count == cap) shrink();
    }
  });
  if (count > k) shrink();
  std::sort(keys, keys + count, std::greater<>{});
  return count;
}

#endif  // NUCLEUS_TARGET_ISA
