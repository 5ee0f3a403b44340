// eta_cutoff(eta, min_keep = 1): entropy-dependent truncation (Hewitt et al.; Hugging Face's
// eta_cutoff). Keeps the tokens whose probability is >= min(eta, sqrt(eta) * exp(-H)), H the entropy
// in nats, and always those whose logit is >= the min_keep-th largest (Hugging Face's
// min_tokens_to_keep, ties kept; 1: the most likely ones).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>

#include "nucleus/core/chain.hpp"
#include "nucleus/core/row_stats.hpp"
#include "nucleus/stages/min_keep.hpp"

namespace nucleus {

struct eta_cutoff_stage : stage<eta_cutoff_stage> {
  static constexpr stage_info info{};

  float eta;  // 0: disabled
  std::size_t min_keep = 1;

  void apply(row_state& s) const {
    if (eta <= 0.0f) return;
    s.max_logit();
    if (!s.live() || s.size() == 1) return;
    const detail::row_moments mo = detail::moments(s);
    // p_i = w_i / total and exp(-H) = exp(E[y]) / Z with Z = total / 2^48, so
    // p_i >= sqrt(eta) exp(-H)  <=>  w_i >= sqrt(eta) exp(E[y]) 2^48.
    const double by_eta = static_cast<double>(eta) * detail::to_double(mo.total) * detail::weight_of_one;
    const double by_entropy =
        std::sqrt(static_cast<double>(eta)) * std::exp(mo.mean_y) * detail::weight_of_one;
    const double w_min = std::min(by_eta, by_entropy);
    if (min_keep > 1 && detail::weight_cut_floored(s, min_keep, w_min)) return;
    detail::keep_weight_at_least(s, w_min);
  }
};

inline eta_cutoff_stage eta_cutoff(float eta, int min_keep = 1) {
  if (!(eta >= 0.0f && eta < 1.0f))
    throw std::invalid_argument("nucleus::eta_cutoff: eta must be in [0, 1) (0 disables)");
  return eta_cutoff_stage{{}, eta, detail::checked_min_keep(min_keep, "eta_cutoff")};
}

}  // namespace nucleus
