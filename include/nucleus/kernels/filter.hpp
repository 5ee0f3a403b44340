// Threshold compaction and the scans that collect a few candidates by value: keep the candidates
// whose scaled logit reaches a threshold, gather the ties of top-k's k-th, gather top-p's edge bin,
// and widen a row under a token bitmask.
//
// Compiled once per target by simd/targets.hpp; included on its own, it brings in the dispatcher.
#if !defined(NUCLEUS_TARGET_ISA)
#include "nucleus/simd/targets.hpp"
#else

// Writes pack v's lanes set in bits (at index base of x) to vals_out / ids_out from out on; returns
// the new end. Work per pack is the bits' test; per survivor, one write (or a compress per register).
template <logit_type T>
NUCLEUS_INLINE std::size_t write_kept(const T* x, const std::int32_t* ids, const fpack& v, std::uint64_t bits,
                                      std::size_t base, float* vals_out, std::int32_t* ids_out,
                                      std::size_t out) noexcept {
  if constexpr (reg::has_compress) {
    // Compress in registers, then one full store per register: its tail is overwritten by the
    // next store (or lies in the slack) and never reaches past this pack, so in place stays safe.
    using R = std::conditional_t<sizeof(T) != 0, reg, void>;  // dependent: only this target has it
    for (std::size_t r = 0; r < regs; ++r) {
      const auto k = static_cast<std::uint32_t>(bits >> (r * width)) & ((std::uint32_t{1} << width) - 1);
      if (k) out += R::compress(k, v.r[r], ids, base + r * width, vals_out + out, ids_out + out);
    }
  } else if (bits == ~std::uint64_t{0} >> (64 - lanes)) {
    // A pack kept whole (a cut that drops few): one store, the ids in a run. In place, the writes
    // start at or before this pack and never pass its end, and the ids are read ahead of them.
    store(vals_out + out, v);
    for (std::size_t l = 0; l < lanes; ++l)
      ids_out[out + l] = ids ? ids[base + l] : static_cast<std::int32_t>(base + l);
    out += lanes;
  } else {
    for (; bits; bits &= bits - 1) {
      const std::size_t i = base + static_cast<std::size_t>(std::countr_zero(bits));
      vals_out[out] = to_float(x[i]);
      ids_out[out] = ids ? ids[i] : static_cast<std::int32_t>(i);
      ++out;
    }
  }
  return out;
}

// Keeps x[i] with (x[i] - shift) * scale >= threshold (NaN never), writing their values and ids in
// order. ids == nullptr means id = index. In place (vals_out == x, ids_out == ids) is allowed for
// float rows. vals_out and ids_out need compact_slack entries of room past the last one kept.
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
    out = write_kept(x, ids, v, bits, base, vals_out, ids_out, out);
  });
  return out;
}

// compact_ge against the row's maximum, found in the same pass (a cut relative to the maximum, such
// as min-p, on a row read once). Keeps x[i] with (x[i] - m) * scale >= threshold, m the largest
// logit up to the end of i's pack (NaN never counts), ids = indices, and sets *max_out to the row's
// maximum (-inf when it has none). With scale > 0, (x - m) * scale only falls as m grows, so what
// passes against the row's maximum is kept here too: compact_ge of the kept against *max_out then
// gives exactly compact_ge of the row against it, in the same order.
template <logit_type T>
std::size_t compact_ge_running(const T* x, std::size_t n, float scale, float threshold, float* vals_out,
                               std::int32_t* ids_out, float* max_out) noexcept {
  const fpack sc = splat(scale), th = splat(threshold);
  float m = -inf();
  fpack sh = splat(m);
  std::size_t out = 0;
  // bf16 rows: a bf16 value `cut` >= 0, below m, that fails the test against m. (x - m) * scale only
  // grows with x and falls as m grows, so no logit at or below it is kept or a new maximum, now or
  // after m rises: it stays until a larger one is found.
  std::int32_t cut = no_bound16;
  auto raise_cut = [&] {
    const float c = m + threshold / scale;  // about the smallest logit kept
    if (!(c >= 0.0f && c < inf() && m < inf())) return;
    for (std::uint32_t b = std::bit_cast<std::uint32_t>(c) >> 16, steps = 0; steps < 4 && b > 0;
         --b, ++steps) {
      const float v = detail::bf16_bits_to_float(static_cast<std::uint16_t>(b));
      if (v < m && !(nucleus::detail::scaled(v, m, scale) >= threshold)) {
        cut = std::max(cut, static_cast<std::int32_t>(b));
        return;
      }
    }
  };
  for_each_pack_above(
      x, n, [&] { return cut; },
      [&](const fpack& v, std::size_t base) NUCLEUS_LAMBDA_INLINE {
        if (any(gt(v, sh))) {  // a new running maximum: rare once the row's top has been passed
          m = std::max(m, lane_max(v));
          sh = splat(m);
          if constexpr (std::same_as<T, bf16>) raise_cut();
        }
        const mpack keep = ge(scaled(v, sh, sc), th);
        if (!any(keep)) return;
        std::uint64_t bits = mask_bits(keep);
        if (n - base < lanes) bits &= (std::uint64_t{1} << (n - base)) - 1;  // never the padding
        out = write_kept(x, static_cast<const std::int32_t*>(nullptr), v, bits, base, vals_out, ids_out, out);
      });
  *max_out = m;
  return out;
}

// Appends to keys[m, cap) the rank keys of the candidates whose logit equals v and whose key ranks
// after `after` (top-k's ties with its k-th); returns the new end.
template <logit_type T>
std::size_t collect_ties(const T* x, const std::int32_t* ids, std::size_t n, float v, std::uint64_t after,
                         std::uint64_t* keys, std::size_t m, std::size_t cap) noexcept {
  const fpack t = splat(v);
  for_each_pack(x, n, -inf(), [&](const fpack& p, std::size_t base) NUCLEUS_LAMBDA_INLINE {
    for (std::uint64_t bits = mask_bits(eq(p, t)); bits; bits &= bits - 1) {
      const std::size_t i = base + static_cast<std::size_t>(std::countr_zero(bits));
      if (i >= n) break;
      const std::uint64_t key = rank_key(v, ids ? ids[i] : static_cast<std::int32_t>(i));
      if (key < after && m < cap) keys[m++] = key;
    }
  });
  return m;
}

// Writes to keys the rank keys of the candidates with lo <= (x - shift) * scale * unit < hi (top-p's
// edge bin; unit is its bins per scaled-logit unit, negated); returns how many.
template <logit_type T>
std::size_t collect_bin(const T* x, const std::int32_t* ids, std::size_t n, float shift, float scale,
                        float unit, float lo, float hi, std::uint64_t* keys) noexcept {
  std::size_t members = 0;
  const fpack sh = splat(shift), sc = splat(scale), nu = splat(unit), lo_v = splat(lo), hi_v = splat(hi);
  for_each_pack(x, n, shift, [&](const fpack& v, std::size_t base) NUCLEUS_LAMBDA_INLINE {
    const fpack b = mul(scaled(v, sh, sc), nu);
    for (std::uint64_t bits = mask_bits(ge(b, lo_v)) & mask_bits(gt(hi_v, b)); bits; bits &= bits - 1) {
      const std::size_t k = base + static_cast<std::size_t>(std::countr_zero(bits));
      if (k >= n) break;
      keys[members++] = rank_key(to_float(x[k]), ids ? ids[k] : static_cast<std::int32_t>(k));
    }
  });
  return members;
}

// out[i] = x[i] as float where bit i of mask (32-bit words, LSB first) is set, -inf elsewhere; a null
// mask keeps every token.
template <logit_type T>
void masked_widen(const T* x, std::size_t n, const std::uint32_t* mask, float* out) noexcept {
  std::size_t i = 0;
  if (!mask) {
    for (; i + lanes <= n; i += lanes) store(out + i, load(x + i));
  } else {
    const fpack banned = splat(-inf());
    for (; i + lanes <= n; i += lanes) {
      const std::uint64_t bits = std::uint64_t{mask[i / 32]} | std::uint64_t{mask[i / 32 + 1]} << 32;
      store(out + i, select_bits(bits, load(x + i), banned));
    }
  }
  for (; i < n; ++i) out[i] = !mask || (mask[i / 32] >> (i % 32)) & 1u ? to_float(x[i]) : -inf();
}

#endif  // NUCLEUS_TARGET_ISA
