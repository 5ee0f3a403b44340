// typical(p): locally typical sampling (Meister et al.; llama.cpp's and Hugging Face's typical_p).
// Tokens are ranked by how far their surprise -log p lies from the entropy H, nearest first, and kept
// while the probability of the tokens before them is < p (the token that crosses p is kept).
//
// -log p_i - H = E[y] - y_i for the scaled logits y = (x - max) / T, so the ranking is the distance of
// y_i from its mean under the distribution (core/row_stats.hpp): no log, and exact sums. Ties in
// distance go to the higher logit, then the lower id.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>

#include "nucleus/core/chain.hpp"
#include "nucleus/core/row_stats.hpp"

namespace nucleus {

struct typical_stage : stage<typical_stage> {
  static constexpr stage_info info{.truncates = true, .needs_probs = true, .needs_max = true};

  float p;  // >= 1: disabled

  void apply(row_state& s) const {
    if (p >= 1.0f) return;
    const float m = s.max_logit();
    if (!s.live() || s.size() == 1) return;
    if (s.dense()) s.keep_scaled_at_least(0.0f, 1.0f, -std::numeric_limits<float>::max());
    const float inv = s.inv_temperature();
    const detail::row_moments mo = detail::moments(s);
    const detail::wsum bound = detail::mass_bound(p, mo.total);

    const std::size_t n = s.size();
    const float* v = s.logits();
    std::uint64_t* order = s.ws().keys.ensure(n);  // positions, ranked
    for (std::size_t i = 0; i < n; ++i) order[i] = i;
    auto dist = [&](std::uint64_t i) {
      return std::fabs(static_cast<double>(detail::scaled(v[i], m, inv)) - mo.mean_y);
    };
    std::sort(order, order + n, [&](std::uint64_t a, std::uint64_t b) {
      const double da = dist(a), db = dist(b);
      if (da != db) return da < db;
      if (v[a] != v[b]) return v[a] > v[b];
      return s.id(a) < s.id(b);
    });
    detail::wsum before = 0;
    std::size_t keep = 0;
    while (keep < n && before < bound)
      before += detail::weight(detail::exp_scalar(detail::scaled(v[order[keep++]], m, inv)));
    // The kept positions in their original order (ascending id, or rank order after top_k).
    std::sort(order, order + keep);
    float* vals = s.ws().vals.data();
    std::int32_t* ids = s.ws().ids.data();
    for (std::size_t j = 0; j < keep; ++j) {  // in place: order[j] >= j
      vals[j] = v[order[j]];
      ids[j] = s.id(order[j]);
    }
    s.assign(keep, s.sorted());
  }
};

inline typical_stage typical(float p) {
  if (!(p > 0.0f && p <= 1.0f)) throw std::invalid_argument("nucleus::typical: p must be in (0, 1]");
  return typical_stage{{}, p};
}

}  // namespace nucleus
