// categorical(): one draw from the processed distribution, keyed by draw_key{seed, position}.
#pragma once

#include "nucleus/core/chain.hpp"

namespace nucleus {

struct categorical_stage : stage<categorical_stage> {
  static constexpr stage_info info{
      .terminal = true, .needs_key = true, .needs_probs = true, .needs_max = true};

  sample_result finish(row_state& s, draw_key key) const noexcept {
    if (!s.live()) return s.fail();
    return s.draw(key);
  }
};

inline categorical_stage categorical() noexcept {
  return {};
}

}  // namespace nucleus
