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

// One pass over the candidates: their exp values into ws.probs (left there for the caller) and the
// integer sums, in the per-target kernel (kernels/reduce.hpp: moment_sums) for the whole packs and
// here for the rest. The weights are the draw's own (the same exp of the same float y).
inline row_moments moments(row_state& s) noexcept {
  const float m = s.max_logit();
  const float inv = s.inv_temperature();
  const std::size_t n = s.size();
  float* e = s.ws().probs.ensure(n);
  const moment_totals k = s.visit([&](const auto* x) { return moment_sums(x, n, m, inv, e); });
  wsum total = k.total;
  __int128 weighted = -static_cast<__int128>(k.weighted);  // sum of w * trunc(y * 2^40), y <= 0
  s.visit([&](const auto* x) {
    for (std::size_t i = k.count; i < n; ++i) {
      e[i] = exp_scalar(scaled(to_float(x[i]), m, inv));  // the kernels' exp, bit for bit
      // weight(e) as a signed integer (e <= 1, so it fits); a zero weight adds nothing, and its y
      // (perhaps -inf or NaN) is replaced by 0 first.
      const auto w = static_cast<std::int64_t>(static_cast<double>(e[i]) * 0x1p48);
      const float y = w != 0 ? scaled(to_float(x[i]), m, inv) : 0.0f;
      total += static_cast<std::uint64_t>(w);
      // y * 2^40 is exact (a power of two); the cast truncates toward zero: integers, no libm.
      weighted += static_cast<__int128>(w) * static_cast<std::int64_t>(static_cast<double>(y) * 0x1p40);
    }
  });
  row_moments r;
  r.total = total;
  if (total != 0)
    r.mean_y = std::ldexp(static_cast<double>(weighted) / static_cast<double>(total), -mean_fraction_bits);
  return r;
}

// A scaled logit below this has an exp below e_min (> 0): exp_scalar, which the SIMD exp equals bit
// for bit, is within 2 ulp of exp on (-86, 0] and 0 below, and log(e_min) - 2^-10 leaves a margin far
// wider than 2 ulp. So a cut "e >= e_min" need exp only the candidates at or above it. -inf for
// e_min <= 0 (every candidate qualifies).
inline float scaled_floor(double e_min) noexcept {
  if (!(e_min > 0.0)) return -inf();
  return std::nextafter(static_cast<float>(std::log(e_min) - 0x1p-10), -inf());
}

// Keeps the candidates whose weight is at least w_min (a real number in weight units), and always
// the maximum. A weight only grows with the logit, so this is one logit threshold.
// exps_ready: ws.probs already holds the candidates' exp(y) at this temperature (moments() leaves
// them there); otherwise only the candidates at or above scaled_floor() are exp'd.
inline void keep_weight_at_least(row_state& s, double w_min, bool exps_ready = false) noexcept {
  const float m = s.max_logit();
  if (!s.live()) return;
  const float inv = s.inv_temperature();
  // weight(e) = floor(e * 2^48) >= w_min  <=>  e * 2^48 >= ceil(w_min): a compare of e itself (e * 2^48
  // is exact in double). The least such logit, as an order-preserving integer: a branch-free min.
  const double e_min = std::ceil(w_min) * 0x1p-48;
  std::uint32_t cut = ordered(m);
  if (exps_ready) {
    const float* e = s.ws().probs.data();
    s.visit([&](const auto* x) {
      for (std::size_t i = 0; i < s.size(); ++i) {
        const float v = to_float(x[i]);
        // (-inf and NaN are never candidates, even for a threshold of 0)
        const bool in = static_cast<double>(e[i]) >= e_min && v > -inf();
        const std::uint32_t k = in ? ordered(v) : ~std::uint32_t{0};
        cut = k < cut ? k : cut;
      }
    });
  } else {
    const float y_lo = scaled_floor(e_min);
    s.visit([&](const auto* x) {
      for (std::size_t i = 0; i < s.size(); ++i) {
        const float v = to_float(x[i]);
        const float y = scaled(v, m, inv);
        if (!(y >= y_lo) || !(v > -inf())) continue;  // almost every candidate of a peaked row
        if (static_cast<double>(exp_scalar(y)) >= e_min) {
          const std::uint32_t k = ordered(v);
          cut = k < cut ? k : cut;
        }
      }
    });
  }
  s.keep_scaled_at_least(0.0f, 1.0f, from_ordered(cut));
}

}  // namespace nucleus::detail
