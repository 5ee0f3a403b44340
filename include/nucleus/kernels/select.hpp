// Top-k selection without sorting the row: a running threshold discards most logits with one
// compare per pack; only the k survivors are sorted.
//
// Compiled once per target by simd/targets.hpp; included on its own, it brings in the dispatcher.
#if !defined(NUCLEUS_TARGET_ISA)
#include "nucleus/simd/targets.hpp"
#else

// How much of a row select_top_k's priming reads at least (all of it when shorter).
inline constexpr std::size_t prime_span = 16384;
// The k best of x by (value desc, id asc), written as rank keys to keys[0..k) in rank order.
// keys must hold select_capacity(k) entries. NaN and -inf are never selected; returns the count
// (< k when fewer candidates exist). ids == nullptr means id = index.
// With ties_out (top_k's keep rule), the result also holds every candidate tied with the k-th that
// the selection met, after the k best in rank order: the buffer keeps them through each shrink, and
// the scan then admits logits equal to the k-th's value. *ties_out is then false, and the result is
// the whole keep set, unless so many ties met the buffer (over half its free room after a shrink)
// that it dropped some; then *ties_out is true, the result is exactly the k best, and collect_ties
// finds the rest. (bf16 rows hold many ties: without this they took a second pass over the row.)
template <logit_type T>
std::size_t select_top_k(const T* x, const std::int32_t* ids, std::size_t n, std::size_t k,
                         std::uint64_t* keys, bool* ties_out) noexcept {
  if (ties_out) *ties_out = false;
  if (k == 0) return 0;
  const std::size_t cap = select_capacity(k);
  std::size_t count = 0;
  float threshold = -inf();
  // Priming, a lower bound on the k-th best: cut the first quarter of the row (at least prime_span
  // logits) into g blocks and take each lane's maximum over each block. The 64 g lanes are disjoint
  // sets of logits, so the k-th largest of their maxima is reached by k distinct logits, and the
  // row's k-th best is at least that, t. Anything at or below the float just under t can never make
  // the top k. On the benchmark's rows (k 40) this leaves 90 inserts at V = 32,000 and 154 at
  // 248,320, against 1,111 and 1,625 with the maxima of the first k packs, and no shrink. The
  // quarter is read again below, from cache. (Values equal to t still get in: ties go by id below.)
  if (const std::size_t g = std::min((4 * k + lanes - 1) / lanes, cap / lanes),
      span = std::min(n, std::max(n / 4, prime_span)), block = span / g / lanes * lanes;
      block > 0) {
    std::size_t sets = 0;
    for (std::size_t b = 0; b < g; ++b) {
      fpack acc = splat(-inf());
      for (std::size_t i = b * block; i < (b + 1) * block; i += lanes)
        acc = max(load(x + i), acc);  // NaN never wins
      const lane_array maxima = to_lanes(acc);
      for (const float m : maxima.v)
        if (m > -inf()) keys[sets++] = ordered(m);
    }
    if (sets >= k) {
      std::nth_element(keys, keys + (k - 1), keys + sets, std::greater<>{});
      threshold = std::nextafter(from_ordered(static_cast<std::uint32_t>(keys[k - 1])), -inf());
    }
  }
  // Keeps the k best, and under the keep rule (until it gives up, *ties_out) their ties in
  // [k, count): within the scan while they take at most half the room a shrink frees (the threshold
  // then admits ties), at the end all of them. Otherwise exactly k, and later logits equal to the
  // threshold are refused: ties may be lost.
  auto shrink = [&](bool last) {
    std::nth_element(keys, keys + (k - 1), keys + count, std::greater<>{});
    const float kv = key_value(keys[k - 1]);
    if (ties_out && !*ties_out) {
      const std::uint64_t* tied =
          std::partition(keys + k, keys + count, [&](std::uint64_t key) { return key_value(key) == kv; });
      const auto kept = static_cast<std::size_t>(tied - keys);
      if (last || kept - k <= (cap - k) / 2) {
        count = kept;
        threshold = std::nextafter(kv, -inf());
        return;
      }
    }
    count = k;
    threshold = kv;
    if (ties_out) *ties_out = true;  // the keep rule gave up: a tie was dropped, more may be refused
  };
  // Strictly greater: a later logit equal to the k-th best has a larger id and loses the tie. That
  // needs ids ascending in scan order, which holds for every candidate set the library builds
  // except a top-k result, which is already in rank order.
  auto scan = [&](const fpack& v, std::size_t base) NUCLEUS_LAMBDA_INLINE {
    const mpack above = gt(v, splat(threshold));
    if (!any(above)) return;  // the common case once the threshold has settled: no lane to read out
    for (std::uint64_t bits = mask_bits(above); bits; bits &= bits - 1) {
      const std::size_t i = base + static_cast<std::size_t>(std::countr_zero(bits));
      if (i >= n) break;
      const float xi = to_float(x[i]);
      if (!(xi > threshold)) continue;  // the threshold rose within this pack
      keys[count++] = rank_key(xi, ids ? ids[i] : static_cast<std::int32_t>(i));
      if (count == cap) shrink(false);
    }
  };
  // bf16 rows: the threshold cut to bf16 (toward zero: at or below it while it is >= 0).
  for_each_pack_above(
      x, n,
      [&]() -> std::int32_t {
        return threshold >= 0.0f ? static_cast<std::int32_t>(std::bit_cast<std::uint32_t>(threshold) >> 16)
                                 : no_bound16;
      },
      scan);
  if (count > k) shrink(true);
  if (count >= radix_sort_min && 2 * count <= cap)
    radix_sort_desc(keys, count, keys + count);  // keys[count, 2 count) is scratch within the capacity
  else
    std::sort(keys, keys + count, std::greater<>{});
  return count;
}

#endif  // NUCLEUS_TARGET_ISA
