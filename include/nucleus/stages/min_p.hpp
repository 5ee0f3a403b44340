// min_p(m): keeps tokens whose probability is at least m times the largest one.
#pragma once

#include <cmath>
#include <stdexcept>

#include "nucleus/core/chain.hpp"

namespace nucleus {

struct min_p_stage : stage<min_p_stage> {
  // p_i >= m * p_max  <=>  (x_i - x_max) / T >= ln m: a logit threshold, no exp and no sum.
  static constexpr stage_info info{.truncates = true, .needs_max = true};

  float m;

  void apply(row_state& s) const noexcept {
    if (m <= 0.0f) return;
    const float mx = s.max_logit();
    if (!s.live()) return;
    s.keep_scaled_at_least(mx, s.inv_temperature(), std::log(m));
  }
};

inline min_p_stage min_p(float m) {
  if (!(m >= 0.0f && m <= 1.0f)) throw std::invalid_argument("nucleus::min_p: m must be in [0, 1]");
  return min_p_stage{{}, m};
}

}  // namespace nucleus
