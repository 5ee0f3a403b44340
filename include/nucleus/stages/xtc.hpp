// xtc(probability, threshold, min_keep = 1): "exclude top choices" (llama.cpp's XTC). With chance
// `probability`, every token whose probability is >= threshold is removed except the least likely of
// them, so the choice falls on a less obvious but still likely token. Nothing happens unless at least
// two tokens reach the threshold, nor (as llama.cpp's min_keep) when fewer than min_keep candidates
// would remain. The coin is the draw key's own stream (draw_key.hpp): no hidden generator.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>

#include "nucleus/core/chain.hpp"
#include "nucleus/core/row_stats.hpp"
#include "nucleus/simd/targets.hpp"
#include "nucleus/stages/min_keep.hpp"

namespace nucleus {

struct xtc_stage : stage<xtc_stage> {
  static constexpr stage_info info{.needs_key = true};

  float probability;  // <= 0: disabled
  float threshold;    // > 0.5: disabled (at most one token can exceed it)
  std::size_t min_keep = 1;

  void apply(row_state& s, draw_key key) const noexcept {
    if (probability <= 0.0f || threshold > 0.5f) return;
    const float mx = s.max_logit();
    if (!s.live() || s.size() < 2) return;
    if (!(detail::uniform(key, detail::key_stream::xtc) < static_cast<double>(probability))) return;
    const float inv = s.inv_temperature();
    const detail::wsum total =
        s.visit([&](const auto* x) { return detail::exp_sum(x, s.size(), mx, inv, nullptr); });
    // p_i >= threshold  <=>  w_i >= threshold * total, on the exact weights; w_i = floor(e_i 2^48), so
    // that is e_i 2^48 >= ceil(threshold * total): a compare of e_i (exact in double).
    const double e_min =
        std::ceil(static_cast<double>(threshold) * static_cast<double>(total)) * detail::weight_ulp;
    std::size_t above = 0;
    std::uint64_t last = ~std::uint64_t{0};  // the least likely token at or above the threshold
    float low = detail::inf();               // the least logit at or above it, and how many hold it
    std::size_t low_count = 0;
    detail::for_each_exp_at_least(s, e_min, [&](float v, std::size_t i) {
      ++above;
      const std::uint64_t k = detail::rank_key(v, s.id(i));
      last = k < last ? k : last;
      low_count = v < low ? 1 : low_count + (v == low);
      low = v < low ? v : low;
    });
    if (above < 2) return;
    if (min_keep > 1 && detail::candidate_count(s) - (above - 1) < min_keep) return;  // all or nothing
    const float lv = detail::key_value(last);
    const std::int32_t lid = detail::key_id(last);
    if (low_count == 1) {
      // No other token ties with the last one (equal logits weigh the same, so all of them were
      // counted): keep the candidates with logit <= lv, whose largest is lv itself. XTC drops a few
      // tokens and keeps the rest, so a dense row keeps them as a window (core/row_state.hpp).
      s.keep_window(-std::numeric_limits<float>::max(), lv, lv);
      return;
    }
    s.keep_if([&](float x, std::int32_t id) { return x < lv || (x == lv && id >= lid); });
  }
};

inline xtc_stage xtc(float probability, float threshold, int min_keep = 1) {
  if (!(probability >= 0.0f && probability <= 1.0f))
    throw std::invalid_argument("nucleus::xtc: probability must be in [0, 1]");
  if (!(threshold >= 0.0f && threshold <= 1.0f))
    throw std::invalid_argument("nucleus::xtc: threshold must be in [0, 1] (> 0.5 disables)");
  return xtc_stage{{}, probability, threshold, detail::checked_min_keep(min_keep, "xtc")};
}

}  // namespace nucleus
