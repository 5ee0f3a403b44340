// min_p(m, min_keep = 1): keeps tokens whose probability is at least m times the largest one, and at
// least the first min_keep in rank order (llama.cpp's and Hugging Face's min_keep).
#pragma once

#include <cmath>
#include <cstddef>
#include <stdexcept>

#include "nucleus/core/chain.hpp"
#include "nucleus/stages/min_keep.hpp"

namespace nucleus {

struct min_p_stage : stage<min_p_stage> {
  // p_i >= m * p_max  <=>  (x_i - x_max) / T >= ln m: a logit threshold, no exp and no sum.
  static constexpr stage_info info{};

  float min_p;  // the fraction of the largest probability a token needs; 0: disabled
  std::size_t min_keep = 1;

  void apply(row_state& s) const {
    if (min_p <= 0.0f) return;
    const float inv = s.inv_temperature(), threshold = std::log(min_p);
    if (min_keep <= 1) {
      s.keep_scaled_near_max(inv, threshold);  // one pass for the maximum and the cut where it can
      return;
    }
    const float mx = s.max_logit();
    if (!s.live()) return;
    // The survivors are a prefix in rank order: they reach min_keep iff the min_keep-th is one of them.
    const std::uint64_t floor_key = detail::min_keep_floor(s, min_keep);
    if (floor_key == 0) return;
    if (!(detail::scaled(detail::key_value(floor_key), mx, inv) >= threshold)) {
      detail::keep_rank_floor(s, floor_key);
      return;
    }
    s.keep_scaled_at_least(mx, inv, threshold);
  }
};

inline min_p_stage min_p(float m, int min_keep = 1) {
  if (!(m >= 0.0f && m <= 1.0f)) throw std::invalid_argument("nucleus::min_p: m must be in [0, 1]");
  return min_p_stage{{}, m, detail::checked_min_keep(min_keep, "min_p")};
}

}  // namespace nucleus
