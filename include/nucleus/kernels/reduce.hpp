// Row reductions over packs: max, argmax, rank counts, exp and exact weight sums, locating a draw,
// top-p's mass histogram and top-n-sigma's double sums.
//
// The value a kernel sees for logit x is y = (x - shift) * scale: the row maximum is subtracted and
// the temperature folded in on the fly, so no pass rewrites the logits.
//
// Compiled once per target by simd/targets.hpp; included on its own, it brings in the dispatcher.
#if !defined(NUCLEUS_TARGET_ISA)
#include "nucleus/simd/targets.hpp"
#else

// Calls f(pack, first_index) for every pack of x; the last partial pack is padded with `fill`.
template <logit_type T, class F>
NUCLEUS_INLINE void for_each_pack(const T* x, std::size_t n, float fill, F&& f) {
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) f(load(x + i), i);
  if (i < n) f(load_partial(x + i, n - i, fill), i);
}

// No bound for for_each_pack_above: every pack is read.
inline constexpr std::int32_t no_bound16 = std::numeric_limits<std::int32_t>::min();

// for_each_pack (padding -inf) for scans that skip most packs. On bf16 rows, while bound() gives a
// 16-bit integer b (not no_bound16), a pack whose values all read as signed 16-bit integers at or
// below b is skipped without being widened (reg::any_gt_i16): the caller's b is a bf16 value >= 0 at
// or below which no logit matters, and from 0 up integer order is float order. Other rows: every
// pack. (A plain integer, not an optional: a 16-bit field kept in memory stalled every pack.)
template <logit_type T, class B, class F>
NUCLEUS_INLINE void for_each_pack_above(const T* x, std::size_t n, B&& bound, F&& f) {
  if constexpr (std::same_as<T, bf16>) {
    std::size_t i = 0;
    for (; i + lanes <= n; i += lanes) {
      const std::int32_t b = bound();
      if (b == no_bound16 || reg::any_gt_i16(x + i, static_cast<std::int16_t>(b))) f(load(x + i), i);
    }
    if (i < n) f(load_partial(x + i, n - i, -inf()), i);
  } else {
    for_each_pack(x, n, -inf(), f);
  }
}

NUCLEUS_INLINE float lane_max(const fpack& p) noexcept {
  const lane_array a = to_lanes(p);
  float m = -inf();
  for (float v : a.v) m = v > m ? v : m;  // NaN never wins
  return m;
}

// Largest logit, NaN ignored; -inf when there is none.
template <logit_type T>
float max_value(const T* x, std::size_t n) noexcept {
  fpack acc = splat(-inf());
  for_each_pack(x, n, -inf(), [&](const fpack& v, std::size_t) NUCLEUS_LAMBDA_INLINE { acc = max(v, acc); });
  return lane_max(acc);
}

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
  const float m = lane_max(best);
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

// A logit outside [lo, hi] counts as -inf (weight 0): row_state's pending window (core/row_state.hpp).
// Without a window every logit counts as itself.
template <bool Window>
NUCLEUS_INLINE fpack in_window(const fpack& v, const fpack& lo, const fpack& hi, const fpack& ninf) noexcept {
  if constexpr (Window) return select(ge(v, lo), select(ge(hi, v), v, ninf), ninf);
  return v;
}

template <bool Window, bool Store = false, logit_type T>
NUCLEUS_INLINE wsum exp_sum_over(const T* x, std::size_t n, float shift, float scale, float lo, float hi,
                                 std::uint64_t* blocks, float* out = nullptr) noexcept {
  static_assert(block_elems / lanes <= 64, "the weight accumulators hold 64 packs");
  const fpack sh = splat(shift), sc = splat(scale), lv = splat(lo), hv = splat(hi), ninf = splat(-inf());
  wsum sum = 0;
  weight_acc acc;
  for (std::size_t b0 = 0, bi = 0; b0 < n; b0 += block_elems, ++bi) {
    const std::size_t len = n - b0 < block_elems ? n - b0 : block_elems;
    clear(acc);
    // Padding lanes hold -inf, whose exp is 0: it adds nothing.
    for_each_pack(x + b0, len, -inf(), [&](const fpack& v, std::size_t i) NUCLEUS_LAMBDA_INLINE {
      const fpack e = exp(scaled(in_window<Window>(v, lv, hv, ninf), sh, sc));
      accumulate(acc, e);
      if constexpr (Store) {
        if (len - i >= lanes) {
          store(out + b0 + i, e);
        } else {
          const lane_array a = to_lanes(e);
          for (std::size_t l = 0; l < len - i; ++l) out[b0 + i + l] = a.v[l];
        }
      }
    });
    const std::uint64_t s = total(acc);
    if (blocks) blocks[bi] = s;
    sum += s;
  }
  return sum;
}

// The exact sum of the weights of exp((x - shift) * scale) (simd/scalar.hpp: weight()). With
// `blocks`, also each run of block_elems logits' own sum, which lets a draw find its block.
template <logit_type T>
wsum exp_sum(const T* x, std::size_t n, float shift, float scale, std::uint64_t* blocks) noexcept {
  return exp_sum_over<false>(x, n, shift, scale, 0.0f, 0.0f, blocks);
}
// ... and out[i] = exp((x[i] - shift) * scale), the values whose weights it adds.
template <logit_type T>
wsum exp_sum_store(const T* x, std::size_t n, float shift, float scale, float* out) noexcept {
  return exp_sum_over<false, true>(x, n, shift, scale, 0.0f, 0.0f, nullptr, out);
}
// ... of the logits in [lo, hi] only.
template <logit_type T>
wsum exp_sum_in(const T* x, std::size_t n, float shift, float scale, float lo, float hi,
                std::uint64_t* blocks) noexcept {
  return exp_sum_over<true>(x, n, shift, scale, lo, hi, blocks);
}

// out[i] = exp((x[i] - shift) * scale)
template <logit_type T>
void exp_store(const T* x, std::size_t n, float shift, float scale, float* out) noexcept {
  const fpack sh = splat(shift), sc = splat(scale);
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) store(out + i, exp(scaled(load(x + i), sh, sc)));
  for (; i < n; ++i) out[i] = exp_scalar(::nucleus::detail::scaled(to_float(x[i]), shift, scale));
}

// core/row_stats.hpp's moments: out[i] = e_i = exp(y_i), the sum of the weights w_i, and the sum
// of w_i * p_i with p_i = trunc(-y_i 2^40) >= 0 (y_i <= 0 here; taken as 0 where w_i = 0, whatever y_i
// is). In 24-bit pieces w = H 2^24 + L and p = P 2^24 + R (P = trunc(-y 2^16) < 2^23, as e > 0 means
// y > -86), so w p = H P 2^48 + (H R + L P) 2^24 + L R: every product below 2^48, in 64-bit lanes,
// which a block of block_elems logits fills to below 2^60 on any target. The last partial pack goes
// logit by logit (add_moment, the same integers).
template <logit_type T>
moment_totals moment_sums(const T* x, std::size_t n, float shift, float scale, float* out) noexcept {
  moment_totals r;
#if NUCLEUS_REG_SCALAR
  // One lane per register: the exp pass on its own (a loop the compiler may vectorize), then one
  // 64 x 64 -> 128-bit product per logit, fewer instructions than four 32 x 32 -> 64-bit ones.
  exp_store(x, n, shift, scale, out);
  for (std::size_t i = 0; i < n; ++i)
    add_moment(out[i], ::nucleus::detail::scaled(to_float(x[i]), shift, scale), r.total, r.weighted);
#else
  const std::size_t whole = n - n % lanes;
  const fpack sh = splat(shift), sc = splat(scale);
  const reg::f unit = reg::splat(0x1p24f), frac = reg::splat(0x1p16f), zero = reg::splat(0.0f);
  weight_acc acc;
  for (std::size_t b0 = 0; b0 < whole; b0 += block_elems) {
    const std::size_t end = whole - b0 < block_elems ? whole : b0 + block_elems;
    clear(acc);
    reg::w a48 = reg::zero_w(), a24 = reg::zero_w(), a0 = reg::zero_w();
    for (std::size_t i = b0; i < end; i += lanes) {
      const fpack y = scaled(load(x + i), sh, sc);
      const fpack e = exp(y);
      store(out + i, e);
      for (std::size_t k = 0; k < regs; ++k) {
        const reg::f f = reg::mul(e.r[k], unit);  // the weight's pieces, as accumulate() takes them
        const reg::i h = reg::cvtt(f);
        const reg::i l = reg::cvtt(reg::mul(reg::sub(f, reg::cvt(h)), unit));
        acc.hi.r[k] = reg::add_i(acc.hi.r[k], h);
        acc.lo.r[k] = reg::add_i(acc.lo.r[k], l);
        const reg::f g = reg::mul(reg::sub(zero, reg::select(reg::gt(e.r[k], zero), y.r[k], zero)), frac);
        const reg::i ph = reg::cvtt(g);
        const reg::i pl = reg::cvtt(reg::mul(reg::sub(g, reg::cvt(ph)), unit));
        a48 = reg::mac_u32(a48, h, ph);
        a24 = reg::mac_u32(reg::mac_u32(a24, h, pl), l, ph);
        a0 = reg::mac_u32(a0, l, pl);
      }
    }
    r.total += total(acc);
    r.weighted +=
        (static_cast<wsum>(lane_sum(a48)) << 48) + (static_cast<wsum>(lane_sum(a24)) << 24) + lane_sum(a0);
  }
  for (std::size_t i = whole; i < n; ++i) {
    const float y = ::nucleus::detail::scaled(to_float(x[i]), shift, scale);
    out[i] = exp_scalar(y);
    add_moment(out[i], y, r.total, r.weighted);
  }
#endif
  return r;
}

// top-p's mass histogram: adds the exact weight of exp(y), y = (x[i] - shift) * scale <= 0, into
// mass[bin], bin = trunc(y * unit) (unit: bins per scaled-logit unit, negated), except that every
// bin from `lump` (<= hist_bins - 1) on shares mass[lump] (NaN too, with weight 0). Returns how many
// logits fell below `lump`, each into its own bin. The lumped weights add in registers, as exp_sum's
// do; the others go one by one into 64-bit bins, which hold runs of 2^15 weights (each <= 2^48)
// before they join the 128-bit masses. A caller that knows the bins past some point cannot hold its
// cut (top-p's reachable bound) lumps them, and pays the scalar add only for the logits before it.
template <logit_type T>
std::size_t mass_histogram(const T* x, std::size_t n, float shift, float scale, float unit,
                           std::uint32_t lump, wsum* mass) noexcept {
  static_assert(block_elems / lanes <= 64, "the weight accumulators hold 64 packs");
  constexpr std::size_t run = std::size_t{1} << 15;
  static_assert(run % block_elems == 0);
  std::uint64_t part[hist_bins];
  const fpack sh = splat(shift), sc = splat(scale), nu = splat(unit), zero_p = splat(0.0f);
  const reg::f lump_f = reg::splat(static_cast<float>(lump)), zero = reg::splat(0.0f);
  wsum lumped = 0;
  std::size_t own = 0;
  weight_acc acc;
  for (std::size_t r0 = 0; r0 < n; r0 += run) {
    const std::size_t r_end = n - r0 < run ? n : r0 + run;
    std::fill(part, part + lump, std::uint64_t{0});
    for (std::size_t b0 = r0; b0 < r_end; b0 += block_elems) {
      const std::size_t len = r_end - b0 < block_elems ? r_end - b0 : block_elems;
      clear(acc);
      // Padding lanes hold -inf: weight 0, lumped.
      for_each_pack(x + b0, len, -inf(), [&](const fpack& v, std::size_t) NUCLEUS_LAMBDA_INLINE {
        const fpack y = scaled(v, sh, sc);
        const fpack e = exp(y);
        const fpack b = mul(y, nu);
        mpack mine;  // b < lump (NaN: no)
        for (std::size_t k = 0; k < regs; ++k) mine.r[k] = reg::gt(lump_f, b.r[k]);
        accumulate(acc, select(mine, zero_p, e));
        std::uint64_t bits = mask_bits(mine);
        own += static_cast<std::size_t>(std::popcount(bits));
        if (!bits) return;
        // Each lane's bin, and its weight in two 24-bit pieces computed in registers (a scalar
        // weight() per lane cost more than the adds below).
        alignas(64) std::int32_t bin[lanes], w_hi[lanes], w_lo[lanes];
        for (std::size_t k = 0; k < regs; ++k) {
          reg::store_i(bin + k * width, reg::cvtt(reg::max(b.r[k], zero)));
          reg::i h, l;
          weight_pieces(e.r[k], h, l);
          reg::store_i(w_hi + k * width, h);
          reg::store_i(w_lo + k * width, l);
        }
        for (; bits; bits &= bits - 1) {
          const auto l = static_cast<std::size_t>(std::countr_zero(bits));
          part[bin[l]] += (std::uint64_t{static_cast<std::uint32_t>(w_hi[l])} << 24) +
                          static_cast<std::uint32_t>(w_lo[l]);
        }
      });
      lumped += total(acc);
    }
    for (std::size_t b = 0; b < lump; ++b) mass[b] += part[b];
  }
  mass[lump] += lumped;
  return own;
}

// top-n-sigma's sums in double over the candidates (logits above -inf; NaN is none): lane j of
// sums[0, partial_sums) adds, in index order from +0, every x[i] with i % partial_sums == j (another
// logit adds +0, which changes nothing), the same additions as a plain loop over partial_sums
// accumulators on any register width. Returns the candidates' count.
template <logit_type T>
std::size_t candidate_sums(const T* x, std::size_t n, double* sums) noexcept {
  static_assert(lanes % partial_sums == 0 && partial_sums % reg::dwidth == 0);
#if NUCLEUS_REG_SCALAR
  // One lane per register: the plain loop, the same additions without the packs' round trip.
  std::size_t count = 0;
  const std::size_t whole = n - n % partial_sums;
  auto add = [&](float v, std::size_t j) {
    const bool c = v > -inf();
    sums[j] += static_cast<double>(c ? v : 0.0f);
    count += c;
  };
  for (std::size_t j = 0; j < partial_sums; ++j) sums[j] = 0.0;
  for (std::size_t i = 0; i < whole; i += partial_sums)
    for (std::size_t j = 0; j < partial_sums; ++j) add(to_float(x[i + j]), j);
  for (std::size_t j = 0; whole + j < n; ++j) add(to_float(x[whole + j]), j);
  return count;
#else
  constexpr std::size_t per = partial_sums / reg::dwidth;  // registers per group of partial_sums logits
  reg::d acc[per];
  for (std::size_t r = 0; r < per; ++r) acc[r] = reg::splat_d(0.0);
  const fpack ninf = splat(-inf()), zero = splat(0.0f);
  std::size_t count = 0;
  // Padding lanes hold -inf: no candidate.
  for_each_pack(x, n, -inf(), [&](const fpack& v, std::size_t) NUCLEUS_LAMBDA_INLINE {
    const mpack c = gt(v, ninf);
    count += static_cast<std::size_t>(std::popcount(mask_bits(c)));
    const lane_array a = to_lanes(select(c, v, zero));
    for (std::size_t g = 0; g < lanes; g += partial_sums)
      for (std::size_t r = 0; r < per; ++r)
        acc[r] = reg::add_d(acc[r], reg::load_d(a.v + g + r * reg::dwidth));
  });
  for (std::size_t r = 0; r < per; ++r) reg::store_d(sums + r * reg::dwidth, acc[r]);
  return count;
#endif
}

// ... and the squares: lane j of sums adds fma(d, d, .) in index order from +0, d = x[i] - center in
// double, for the candidates with i % partial_sums == j.
template <logit_type T>
void candidate_squares(const T* x, std::size_t n, double center, double* sums) noexcept {
#if NUCLEUS_REG_SCALAR
  const std::size_t whole = n - n % partial_sums;
  auto square = [&](float v, std::size_t j) {
    const double d = v > -inf() ? static_cast<double>(v) - center : 0.0;
    sums[j] = std::fma(d, d, sums[j]);
  };
  for (std::size_t j = 0; j < partial_sums; ++j) sums[j] = 0.0;
  for (std::size_t i = 0; i < whole; i += partial_sums)
    for (std::size_t j = 0; j < partial_sums; ++j) square(to_float(x[i + j]), j);
  for (std::size_t j = 0; whole + j < n; ++j) square(to_float(x[whole + j]), j);
#else
  constexpr std::size_t per = partial_sums / reg::dwidth;
  reg::d acc[per];
  for (std::size_t r = 0; r < per; ++r) acc[r] = reg::splat_d(0.0);
  const reg::d c0 = reg::splat_d(center), ninf = reg::splat_d(-static_cast<double>(inf())),
               zero = reg::splat_d(0.0);
  for_each_pack(x, n, -inf(), [&](const fpack& v, std::size_t) NUCLEUS_LAMBDA_INLINE {
    const lane_array a = to_lanes(v);
    for (std::size_t g = 0; g < lanes; g += partial_sums)
      for (std::size_t r = 0; r < per; ++r) {
        const reg::d vd = reg::load_d(a.v + g + r * reg::dwidth);
        const reg::d dd = reg::select_d(reg::gt_d(vd, ninf), reg::sub_d(vd, c0), zero);  // else fma adds +0
        acc[r] = reg::fma_d(dd, dd, acc[r]);
      }
  });
  for (std::size_t r = 0; r < per; ++r) reg::store_d(sums + r * reg::dwidth, acc[r]);
#endif
}

// out[i] = (x[i] - max) - lse, NaN -> -inf: a log-softmax row, given its maximum and log-sum-exp.
// (x - max) is exact near the maximum, so the likely tokens keep full precision.
template <logit_type T>
void log_softmax_store(const T* x, std::size_t n, float max, float lse, float* out) noexcept {
  const fpack mv = splat(max), lv = splat(lse), ninf = splat(-inf());
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const fpack v = load(x + i);
    store(out + i, select(eq(v, v), sub(sub(v, mv), lv), ninf));
  }
  for (; i < n; ++i) {
    const float v = to_float(x[i]);
    out[i] = v == v ? (v - max) - lse : -inf();
  }
}

// --- over exp values already stored (exp_sum_store's out: e[i] = exp(y_i)) ------------------------

// The sum of the weights of e[i] for the logits x[i] in [lo, hi], and each block's own sum (as
// exp_sum_in, without an exp).
template <logit_type T>
wsum cached_sum_in(const T* x, const float* e, std::size_t n, float lo, float hi,
                   std::uint64_t* blocks) noexcept {
  static_assert(block_elems / lanes <= 64, "the weight accumulators hold 64 packs");
  const fpack lv = splat(lo), hv = splat(hi), zero = splat(0.0f);
  wsum sum = 0;
  weight_acc acc;
  for (std::size_t b0 = 0, bi = 0; b0 < n; b0 += block_elems, ++bi) {
    const std::size_t len = n - b0 < block_elems ? n - b0 : block_elems;
    clear(acc);
    std::size_t i = 0;
    for (; i + lanes <= len; i += lanes) {
      const fpack v = load(x + b0 + i);
      accumulate(acc, select(ge(v, lv), select(ge(hv, v), load(e + b0 + i), zero), zero));
    }
    std::uint64_t tail = 0;
    for (; i < len; ++i) {
      const float v = to_float(x[b0 + i]);
      tail += v >= lo && v <= hi ? weight(e[b0 + i]) : 0;
    }
    const std::uint64_t s = total(acc) + tail;
    blocks[bi] = s;
    sum += s;
  }
  return sum;
}

// The first element of the block whose running sum (block sums from `blocks`) passes `point`, with
// the sum before it in `before`; n when none does (point >= the total).
NUCLEUS_INLINE std::size_t block_of(const std::uint64_t* blocks, std::size_t n, wsum point,
                                    wsum& before) noexcept {
  const std::size_t nb = (n + block_elems - 1) / block_elems;
  for (std::size_t b = 0; b < nb; ++b) {
    if (before + blocks[b] > point) return b * block_elems;
    before += blocks[b];
  }
  return n;
}

// As pick_in, reading the weights from e.
template <logit_type T>
std::int64_t cached_pick_in(const T* x, const float* e, std::size_t n, float lo, float hi,
                            const std::uint64_t* blocks, wsum point) noexcept {
  wsum before = 0;
  const std::size_t b0 = block_of(blocks, n, point, before);
  if (b0 >= n) return -1;
  const std::size_t end = n - b0 < block_elems ? n : b0 + block_elems;
  for (std::size_t i = b0; i < end; ++i) {
    const float v = to_float(x[i]);
    if (!(v >= lo && v <= hi)) continue;
    before += weight(e[i]);
    if (before > point) return static_cast<std::int64_t>(i);
  }
  return -1;  // unreachable: the block's weights add up to its sum
}

// top-p's band: with b = (x[i] - shift) * scale * unit (the histogram's float bin value), the sum of
// the weights of e[i] for b < lo (the tokens ranked before the band), and the rank keys (id = index)
// of those with lo <= b < hi, at most `cap` of them; returns how many there are (all counted). With
// `blocks`, also the weight before the band in each block of block_elems logits.
template <logit_type T>
std::size_t cached_band(const T* x, const float* e, std::size_t n, float shift, float scale, float unit,
                        float lo, float hi, std::uint64_t* keys, std::size_t cap, wsum* before,
                        std::uint64_t* blocks) noexcept {
  const fpack sh = splat(shift), sc = splat(scale), nu = splat(unit), lo_v = splat(lo), hi_v = splat(hi),
              zero = splat(0.0f);
  std::size_t members = 0;
  wsum sum = 0;
  weight_acc acc;
  for (std::size_t b0 = 0, bi = 0; b0 < n; b0 += block_elems, ++bi) {
    const std::size_t len = n - b0 < block_elems ? n - b0 : block_elems;
    clear(acc);
    std::size_t i = 0;
    for (; i + lanes <= len; i += lanes) {
      const fpack b = mul(scaled(load(x + b0 + i), sh, sc), nu);
      accumulate(acc, select(gt(lo_v, b), load(e + b0 + i), zero));
      for (std::uint64_t bits = mask_bits(ge(b, lo_v)) & mask_bits(gt(hi_v, b)); bits; bits &= bits - 1) {
        const std::size_t k = b0 + i + static_cast<std::size_t>(std::countr_zero(bits));
        if (members < cap) keys[members] = rank_key(to_float(x[k]), static_cast<std::int32_t>(k));
        ++members;
      }
    }
    std::uint64_t tail = 0;
    for (; i < len; ++i) {
      const float v = to_float(x[b0 + i]);
      const float b = ::nucleus::detail::scaled(v, shift, scale) * unit;
      tail += b < lo ? weight(e[b0 + i]) : 0;
      if (b >= lo && b < hi) {
        if (members < cap) keys[members] = rank_key(v, static_cast<std::int32_t>(b0 + i));
        ++members;
      }
    }
    const std::uint64_t block = total(acc) + tail;
    if (blocks) blocks[bi] = block;
    sum += block;
  }
  *before = sum;
  return members;
}

// typical's ring (stages/typical.hpp): with y = (x[i] - shift) * scale, the sum of the weights of e[i]
// over the logits inside [r.in_lo, r.in_hi] (and per block of block_elems logits, into blocks), and the
// indices of the ring's logits (in [r.out_lo, r.out_hi], not inside), in order, at most cap of them;
// returns how many the ring holds (all counted). NaN is in neither.
template <logit_type T>
std::size_t cached_ring(const T* x, const float* e, std::size_t n, float shift, float scale,
                        const ring_bounds& r, std::uint64_t* members, std::size_t cap, wsum* inside,
                        std::uint64_t* blocks) noexcept {
  const fpack sh = splat(shift), sc = splat(scale), ol = splat(r.out_lo), il = splat(r.in_lo),
              ih = splat(r.in_hi), oh = splat(r.out_hi), zero = splat(0.0f);
  std::size_t count = 0;
  wsum sum = 0;
  weight_acc acc;
  auto note = [&](std::size_t i) NUCLEUS_LAMBDA_INLINE {
    if (count < cap) members[count] = i;
    ++count;
  };
  for (std::size_t b0 = 0, bi = 0; b0 < n; b0 += block_elems, ++bi) {
    const std::size_t len = n - b0 < block_elems ? n - b0 : block_elems;
    clear(acc);
    std::size_t i = 0;
    for (; i + lanes <= len; i += lanes) {
      const fpack y = scaled(load(x + b0 + i), sh, sc);
      accumulate(acc, select(ge(y, il), select(ge(ih, y), load(e + b0 + i), zero), zero));
      const std::uint64_t outer = mask_bits(ge(y, ol)) & mask_bits(ge(oh, y));
      if (!outer) continue;  // most packs hold no member of the ring
      for (std::uint64_t bits = outer & ~(mask_bits(ge(y, il)) & mask_bits(ge(ih, y))); bits;
           bits &= bits - 1)
        note(b0 + i + static_cast<std::size_t>(std::countr_zero(bits)));
    }
    std::uint64_t tail = 0;
    for (; i < len; ++i) {
      const float y = ::nucleus::detail::scaled(to_float(x[b0 + i]), shift, scale);
      const bool in = y >= r.in_lo && y <= r.in_hi;
      tail += in ? weight(e[b0 + i]) : 0;
      if (!in && y >= r.out_lo && y <= r.out_hi) note(b0 + i);
    }
    const std::uint64_t block = total(acc) + tail;
    if (blocks) blocks[bi] = block;
    sum += block;
  }
  *inside = sum;
  return count;
}

template <bool Window, logit_type T>
NUCLEUS_INLINE std::int64_t pick_over(const T* x, std::size_t n, float shift, float scale, float lo, float hi,
                                      const std::uint64_t* blocks, wsum point, float* scratch) noexcept {
  wsum before = 0;
  const std::size_t b0 = block_of(blocks, n, point, before);
  if (b0 >= n) return -1;
  const std::size_t len = n - b0 < block_elems ? n - b0 : block_elems;
  exp_store(x + b0, len, shift, scale, scratch);
  for (std::size_t j = 0; j < len; ++j) {
    if constexpr (Window) {
      const float v = to_float(x[b0 + j]);
      if (!(v >= lo && v <= hi)) continue;  // weight 0, as exp_sum_in counted it
    }
    before += weight(scratch[j]);
    if (before > point) return static_cast<std::int64_t>(b0 + j);
  }
  return -1;  // unreachable: the block's weights add up to its sum
}

// The first index whose running weight sum exceeds `point` (< the total), given the block sums
// exp_sum wrote; -1 if there is none (point >= total).
template <logit_type T>
std::int64_t pick(const T* x, std::size_t n, float shift, float scale, const std::uint64_t* blocks,
                  wsum point, float* scratch) noexcept {
  return pick_over<false>(x, n, shift, scale, 0.0f, 0.0f, blocks, point, scratch);
}
// ... counting only the logits in [lo, hi], given exp_sum_in's block sums.
template <logit_type T>
std::int64_t pick_in(const T* x, std::size_t n, float shift, float scale, float lo, float hi,
                     const std::uint64_t* blocks, wsum point, float* scratch) noexcept {
  return pick_over<true>(x, n, shift, scale, lo, hi, blocks, point, scratch);
}

#endif  // NUCLEUS_TARGET_ISA
