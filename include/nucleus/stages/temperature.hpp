// temperature(T): divides the logits by T before the next softmax. T = 0 is greedy.
#pragma once

#include <cmath>
#include <stdexcept>

#include "nucleus/core/chain.hpp"

namespace nucleus {

struct temperature_stage : stage<temperature_stage> {
  // Never a pass of its own: 1/T rides along into the passes that need probabilities.
  static constexpr stage_info info{.tempers = true};

  float temperature;  // T: 0 is greedy

  void apply(row_state& s) const noexcept {
    if (temperature == 0.0f) {
      s.set_greedy();
    } else {
      s.scale_inv_temperature(1.0f / temperature);  // greedy too when 1/T overflows
    }
  }
};

inline temperature_stage temperature(float t) {
  if (!(t >= 0.0f) || std::isinf(t))
    throw std::invalid_argument("nucleus::temperature: T must be finite and >= 0 (0 means greedy)");
  return temperature_stage{{}, t};
}

}  // namespace nucleus
