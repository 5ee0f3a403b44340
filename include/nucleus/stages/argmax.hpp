// argmax(): the greedy pick: the highest logit, ties to the lowest id. Never computes a softmax.
#pragma once

#include "nucleus/core/chain.hpp"
#include "nucleus/core/materialize.hpp"

namespace nucleus {

struct argmax_stage : stage<argmax_stage> {
  static constexpr stage_info info{.terminal = true};

  sample_result finish(row_state& s, draw_key) const noexcept { return greedy_pick(s); }
  template <row_plan P>
  sample_result finish(row_state& s, draw_key, plan<P>) const noexcept {
    return greedy_pick(s, plan<P>{});
  }
};

inline argmax_stage argmax() noexcept {
  return {};
}

}  // namespace nucleus
