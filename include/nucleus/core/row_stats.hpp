// Statistics of a row's candidates at the current temperature, for the stages that read the
// distribution's shape (typical, eta, dynamic temperature, mirostat, xtc): the exact mass, the mean
// scaled logit, the entropy; and the one cut they share, "keep what weighs at least w".
//
// Every sum is an integer (simd/scalar.hpp's exact weights; scaled logits in fixed point), so each
// result depends only on the candidates, never on their order, the SIMD width or the build.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "nucleus/core/row_state.hpp"
#include "nucleus/simd/targets.hpp"

namespace nucleus::detail {

inline constexpr int mean_fraction_bits = 40;  // scaled logits in 2^-40 units (0x1p40 below)

struct row_moments {
  wsum total = 0;       // sum of the weights floor(exp(y) * 2^48), y = (x - max) / T
  double mean_y = 0.0;  // sum(w * y) / sum(w): the mean scaled logit under the distribution

  double z() const noexcept { return to_double(total); }  // sum of exp(y), as a real
  // -sum(p log p) in nats: log Z - E[y] (p = exp(y) / Z).
  double entropy() const noexcept { return std::log(z()) - mean_y; }
};

// One pass over the candidates (the per-target kernel, kernels/reduce.hpp: moment_sums): their exp
// values into ws.probs, left there for the caller, and the integer sums. The weights are the draw's
// own (the same exp of the same float y).
inline row_moments moments(row_state& s) noexcept {
  const float m = s.max_logit();
  const float inv = s.inv_temperature();
  const std::size_t n = s.size();
  float* e = s.ws().probs.ensure(n);
  const moment_totals k = s.visit([&](const auto* x) { return moment_sums(x, n, m, inv, e); });
  row_moments r;
  r.total = k.total;
  // k.weighted sums w * trunc(-y 2^40): the mean of y is its negation over the total.
  if (k.total != 0)
    r.mean_y =
        std::ldexp(-static_cast<double>(k.weighted) / static_cast<double>(k.total), -mean_fraction_bits);
  return r;
}

// The least scaled logit y whose exp can be at least e_min (-inf for e_min <= 0): exp_scalar, which
// the SIMD exp equals bit for bit, is within 2 ulp of exp on (-86, 0] and 0 below, a margin far
// narrower than the 2^-10 taken here, so no y below it qualifies.
inline float exp_at_least_bound(double e_min) noexcept {
  return e_min > 0.0 ? std::nextafter(static_cast<float>(std::log(e_min) - 0x1p-10), -inf()) : -inf();
}
// Its mirror: every y at or above this has an exp of at least e_min > 0 (the same 2^-10 margin; e_min
// >= 2^-48 keeps it inside exp's range).
inline float exp_surely_at_least_bound(double e_min) noexcept {
  return std::nextafter(static_cast<float>(std::log(e_min) + 0x1p-10), inf());
}

// Calls f(v, i) for each candidate i (logit v) whose exp(y) is at least e_min, in order; never for
// -inf or NaN. A SIMD pass (compact_ge, the same float y) keeps the candidates at or above
// exp_at_least_bound, a block at a time on the stack, and only those (few, in a peaked row) are
// tested with the exact exp: the same calls as testing every candidate.
template <class F>
void for_each_exp_at_least(row_state& s, double e_min, F&& f) {
  const float m = s.max_logit();
  const float inv = s.inv_temperature();
  const float y_lo = exp_at_least_bound(e_min);
  const std::size_t n = s.size();
  float vals[block_elems + compact_slack];
  std::int32_t at[block_elems + compact_slack];
  s.visit([&](const auto* x) {
    for (std::size_t b0 = 0; b0 < n; b0 += block_elems) {
      const std::size_t len = n - b0 < block_elems ? n - b0 : block_elems;
      const std::size_t kept = compact_ge(x + b0, nullptr, len, m, inv, y_lo, vals, at);
      for (std::size_t j = 0; j < kept; ++j) {
        const float v = vals[j];
        const float y = scaled(v, m, inv);
        if (!(y >= y_lo) || !(v > -inf())) continue;
        if (static_cast<double>(exp_scalar(y)) >= e_min) f(v, b0 + static_cast<std::size_t>(at[j]));
      }
    }
  });
}

// Keeps the candidates whose weight is at least w_min (a real number in weight units), and always
// the maximum. A weight only grows with the logit, so this is one logit threshold.
inline void keep_weight_at_least(row_state& s, double w_min) noexcept {
  const float m = s.max_logit();
  if (!s.live()) return;
  // weight(e) = floor(e * 2^48) >= w_min  <=>  e * 2^48 >= ceil(w_min): a compare of e itself (e * 2^48
  // is exact in double).
  const double e_min = std::ceil(w_min) * detail::weight_ulp;
  const float inv = s.inv_temperature();
  const float y_lo = exp_at_least_bound(e_min);
  if (!(e_min > 0.0)) {  // every candidate qualifies (mirostat 2's mu past 2^-mu's range, say)
    s.keep_scaled_at_least(0.0f, 1.0f, -std::numeric_limits<float>::max());
    return;
  }
  if (!(inv <= std::numeric_limits<float>::max()) || m == inf()) {
    // 1/T = inf (every y below the maximum is -inf, weight 0), or a row of +inf maxima (the only
    // candidates): only the maximum has a weight, and it always stays.
    s.keep_scaled_at_least(0.0f, 1.0f, m);
    return;
  }
  // Every y at or above y_hi qualifies (exp_surely_at_least_bound). So only the candidates in
  // [y_lo, y_hi), a narrow band found by one SIMD pass, need the exact exp: the least logit among
  // them that qualifies is the cut; when none does, every logit at or above y_hi qualifies and
  // nothing below it, and the maximum (y = 0) always stays. The same threshold as testing every
  // candidate, without an exp per candidate of a row that keeps most of them.
  const float y_hi = exp_surely_at_least_bound(e_min);
  if (y_lo < 0.0f) s.keep_scaled_at_least(m, inv, y_lo);  // first a superset, few in a peaked row
  const std::size_t n = s.size();
  std::uint64_t* keys = s.ws().keys.ensure(n);
  const std::size_t members = s.visit(
      [&](const auto* x) { return collect_bin(x, s.ids_or_null(), n, m, inv, 1.0f, y_lo, y_hi, keys); });
  std::uint32_t cut = ~std::uint32_t{0};
  for (std::size_t j = 0; j < members; ++j) {
    const float v = key_value(keys[j]);
    if (static_cast<double>(exp_scalar(scaled(v, m, inv))) >= e_min) cut = std::min(cut, ordered(v));
  }
  if (cut != ~std::uint32_t{0})
    s.keep_scaled_at_least(0.0f, 1.0f, from_ordered(cut));
  else
    s.keep_scaled_at_least(m, inv, std::min(y_hi, 0.0f));
}

}  // namespace nucleus::detail
