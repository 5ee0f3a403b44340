// epsilon_cutoff(e): truncation sampling (Hewitt et al.; Hugging Face's epsilon_cutoff). Keeps the
// tokens whose probability is >= e, and always the most likely one.
#pragma once

#include <stdexcept>

#include "nucleus/core/chain.hpp"
#include "nucleus/core/row_stats.hpp"

namespace nucleus {

struct epsilon_cutoff_stage : stage<epsilon_cutoff_stage> {
  static constexpr stage_info info{.truncates = true, .needs_probs = true, .needs_max = true};

  float e;  // 0: disabled

  void apply(row_state& s) const noexcept {
    if (e <= 0.0f) return;
    const float m = s.max_logit();
    if (!s.live() || s.size() == 1) return;
    const float inv = s.inv_temperature();
    const detail::wsum total =
        s.visit([&](const auto* x) { return detail::exp_sum(x, s.size(), m, inv, nullptr); });
    detail::keep_weight_at_least(s, static_cast<double>(e) * static_cast<double>(total));
  }
};

inline epsilon_cutoff_stage epsilon_cutoff(float e) {
  if (!(e >= 0.0f && e < 1.0f))
    throw std::invalid_argument("nucleus::epsilon_cutoff: e must be in [0, 1) (0 disables)");
  return epsilon_cutoff_stage{{}, e};
}

}  // namespace nucleus
