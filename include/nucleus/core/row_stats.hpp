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

inline constexpr int mean_fraction_bits = 40;  // scaled logits (>= -88 where a weight is nonzero)

struct row_moments {
  wsum total = 0;       // sum of the weights floor(exp(y) * 2^48), y = (x - max) / T
  double mean_y = 0.0;  // sum(w * y) / sum(w): the mean scaled logit under the distribution

  double z() const noexcept { return to_double(total); }  // sum of exp(y), as a real
  // -sum(p log p) in nats: log Z - E[y] (p = exp(y) / Z).
  double entropy() const noexcept { return std::log(z()) - mean_y; }
};

// Two passes over the candidates: their exp values into ws.probs (SIMD; left there for the caller),
// then the integer sums. The weights are the draw's own (the same exp of the same float y).
inline row_moments moments(row_state& s) noexcept {
  const float m = s.max_logit();
  const float inv = s.inv_temperature();
  float* e = s.ws().probs.ensure(s.size());
  s.visit([&](const auto* x) { exp_store(x, s.size(), m, inv, e); });
  wsum total = 0;
  __int128 weighted = 0;  // sum of w * round(y * 2^40): |w| <= 2^48, |y * 2^40| < 2^47
  s.visit([&](const auto* x) {
    for (std::size_t i = 0; i < s.size(); ++i) {
      const std::uint64_t w = weight(e[i]);
      if (w == 0) continue;
      const float y = scaled(to_float(x[i]), m, inv);
      total += w;
      weighted += static_cast<__int128>(w) * std::llrint(std::ldexp(static_cast<double>(y), mean_fraction_bits));
    }
  });
  row_moments r;
  r.total = total;
  if (total != 0)
    r.mean_y = std::ldexp(static_cast<double>(weighted) / static_cast<double>(total), -mean_fraction_bits);
  return r;
}

// Keeps the candidates whose weight is at least w_min (a real number in weight units), and always
// the maximum. A weight only grows with the logit, so this is one logit threshold.
inline void keep_weight_at_least(row_state& s, double w_min) noexcept {
  const float m = s.max_logit();
  if (!s.live()) return;
  const float inv = s.inv_temperature();
  float* e = s.ws().probs.ensure(s.size());
  s.visit([&](const auto* x) { exp_store(x, s.size(), m, inv, e); });
  float cut = m;
  s.visit([&](const auto* x) {
    for (std::size_t i = 0; i < s.size(); ++i) {
      const float v = to_float(x[i]);
      // (-inf and NaN are never candidates, even for a threshold of 0)
      if (v < cut && v > -inf() && static_cast<double>(weight(e[i])) >= w_min) cut = v;
    }
  });
  s.keep_scaled_at_least(0.0f, 1.0f, cut);
}

}  // namespace nucleus::detail
