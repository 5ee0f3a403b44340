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

// Calls f(v, i) for each candidate i (logit v) whose exp(y) is at least e_min; never for -inf or NaN.
// Only a y at or above log(e_min) - 2^-10 can qualify: exp_scalar, which the SIMD exp equals bit for
// bit, is within 2 ulp of exp on (-86, 0] and 0 below, a margin far narrower. So for almost every
// candidate of a peaked row the test is one float compare, and only the few above it are exp'd.
template <class F>
void for_each_exp_at_least(row_state& s, double e_min, F&& f) {
  const float m = s.max_logit();
  const float inv = s.inv_temperature();
  const float y_lo =
      e_min > 0.0 ? std::nextafter(static_cast<float>(std::log(e_min) - 0x1p-10), -inf()) : -inf();
  s.visit([&](const auto* x) {
    for (std::size_t i = 0; i < s.size(); ++i) {
      const float v = to_float(x[i]);
      const float y = scaled(v, m, inv);
      if (!(y >= y_lo) || !(v > -inf())) continue;
      if (static_cast<double>(exp_scalar(y)) >= e_min) f(v, i);
    }
  });
}

// Keeps the candidates whose weight is at least w_min (a real number in weight units), and always
// the maximum. A weight only grows with the logit, so this is one logit threshold.
inline void keep_weight_at_least(row_state& s, double w_min) noexcept {
  const float m = s.max_logit();
  if (!s.live()) return;
  // weight(e) = floor(e * 2^48) >= w_min  <=>  e * 2^48 >= ceil(w_min): a compare of e itself (e * 2^48
  // is exact in double). The least such logit, as an order-preserving integer.
  std::uint32_t cut = ordered(m);
  for_each_exp_at_least(s, std::ceil(w_min) * detail::weight_ulp, [&](float v, std::size_t) {
    const std::uint32_t k = ordered(v);
    cut = k < cut ? k : cut;
  });
  s.keep_scaled_at_least(0.0f, 1.0f, from_ordered(cut));
}

}  // namespace nucleus::detail
