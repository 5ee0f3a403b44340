// epsilon_cutoff(e, min_keep = 1): truncation sampling (Hewitt et al.; Hugging Face's epsilon_cutoff).
// Keeps the tokens whose probability is >= e, and always those whose logit is >= the min_keep-th
// largest (Hugging Face's min_tokens_to_keep, ties kept; 1: the most likely ones).
#pragma once

#include <cstddef>
#include <stdexcept>

#include "nucleus/core/chain.hpp"
#include "nucleus/core/row_stats.hpp"
#include "nucleus/stages/min_keep.hpp"

namespace nucleus {

struct epsilon_cutoff_stage : stage<epsilon_cutoff_stage> {
  static constexpr stage_info info{};

  float epsilon;  // 0: disabled
  std::size_t min_keep = 1;

  void apply(row_state& s) const {
    if (epsilon <= 0.0f) return;
    const float mx = s.max_logit();
    if (!s.live() || s.size() == 1) return;
    const float inv = s.inv_temperature();
    const detail::wsum total =
        s.visit([&](const auto* x) { return detail::exp_sum(x, s.size(), mx, inv, nullptr); });
    const double w_min = static_cast<double>(epsilon) * static_cast<double>(total);
    if (min_keep > 1 && detail::weight_cut_floored(s, min_keep, w_min)) return;
    detail::keep_weight_at_least(s, w_min);
  }
};

inline epsilon_cutoff_stage epsilon_cutoff(float e, int min_keep = 1) {
  if (!(e >= 0.0f && e < 1.0f))
    throw std::invalid_argument("nucleus::epsilon_cutoff: e must be in [0, 1) (0 disables)");
  return epsilon_cutoff_stage{{}, e, detail::checked_min_keep(min_keep, "epsilon_cutoff")};
}

}  // namespace nucleus
